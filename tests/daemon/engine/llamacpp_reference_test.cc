// The CPU engine against llama.cpp: for every model and prompt in
// ../shared/reference/llamacpp-greedy.jsonl, decompose the GGUF, run the
// prompt tokens llama.cpp used, and compare
//   - the 64 greedy tokens: all equal for F32/F16/BF16/Q8_0 models, except
//     where llama.cpp's own top two are within kExactTieNats; for the
//     lower-bit types at least 90% of records agree on the first 32, and each
//     divergence must sit on a near-tie (its two candidates within
//     kNearTieNats of each other in llama.cpp's own log-probabilities);
//   - the top-5 log-probabilities at every generated position, with our model
//     fed llama.cpp's tokens (teacher forcing, so a late divergence does not
//     hide the rest): within 0.02 for F32 models and 0.1 for the others --
//     or, for a quantized model, twice our own noise floor when that is
//     larger.
//
// The noise floor. A quantized model rounds its activations to 8 bits before
// each matmul (as llama.cpp does), and that rounding turns a one-ulp change
// upstream (a different summation order) into a whole quantization step
// downstream. Our AVX2 and portable kernels differ only in summation order,
// yet on widened/llama-Q8_0 their log-probabilities differ by up to 0.2 nats.
// llama.cpp's SIMD code sums in yet another order, so no engine that does not
// copy its exact instruction sequence can be held closer to it than this
// floor. The test measures the floor per record (portable vs AVX2 kernels,
// teacher-forced), prints it beside the error, and takes the larger of a
// model's two records as the model's floor.
//
// Every record prints one line of the report (the divergence report the
// issue asks for) to stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "daemon/engine/model.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/daemon/engine/reference_records.h"
#include "tests/shared_data.h"

namespace octo::testing {
namespace {

constexpr int kGenerated = 64;
constexpr int kLowBitPrefix = 32;
constexpr double kLowBitAgreement = 0.9;
// Two candidates closer than this in llama.cpp's log-probabilities are a
// near-tie: 8-bit rounding of activations (llama.cpp) against our identical
// rounding but a different summation order moves logits by a few 1e-3 at
// most; 0.1 nats leaves room and still refuses a real disagreement.
constexpr double kNearTieNats = 0.15;
// F32/F16/BF16/Q8_0 must give all 64 tokens, unless llama.cpp's own top two
// are closer than this at the divergence (a coin toss for any engine).
constexpr double kExactTieNats = 0.01;

bool IsExactType(const std::string& model) {
  for (const char* t : {"F32", "F16", "BF16", "Q8_0", "stories260K.gguf"}) {
    if (absl::StrContains(model, t)) return true;
  }
  return false;
}
double LogprobTolerance(const std::string& model) {
  return absl::StrContains(model, "F32") || model == "stories260K.gguf" ? 0.02 : 0.1;
}

struct RecordResult {
  int first_divergence = kGenerated;  // index of the first token that differs, or 64
  double max_logprob_error = 0;       // over the top-5 of every position
  // At the divergence: llama.cpp's top logprob minus its logprob of our
  // token (infinity when ours is not in its top 5).
  double reference_gap = 0;
  // Max |logprob| difference between our portable and AVX2 kernels over the
  // same top-5 entries (0 when the CPU has no AVX2).
  double noise_floor = 0;
  std::string report;
};

// llama.cpp's logprob of `token` at a position, if it is in the top 5.
bool RefLogprob(const std::vector<std::pair<int32_t, double>>& top5, int32_t token, double* lp) {
  for (const auto& [id, value] : top5) {
    if (id == token) {
      *lp = value;
      return true;
    }
  }
  return false;
}

RecordResult RunRecord(const ReferenceRecord& r, int index) {
  static std::map<int, RecordResult>* cache = new std::map<int, RecordResult>();
  if (auto it = cache->find(index); it != cache->end()) return it->second;
  RecordResult result;
  auto model = Model::Open(DecomposedSharedModel(r.model), ModelOptions{});
  EXPECT_TRUE(model.ok()) << r.model << ": " << model.status();
  if (!model.ok()) return result;

  // Free-running greedy.
  auto greedy = Greedy(**model, r.prompt_tokens, kGenerated);
  EXPECT_TRUE(greedy.ok()) << greedy.status();
  if (!greedy.ok()) return result;
  for (int i = 0; i < kGenerated; ++i) {
    if (greedy->tokens[i] != r.tokens[i]) {
      result.first_divergence = i;
      break;
    }
  }

  // Teacher-forced log-probabilities over llama.cpp's tokens.
  std::vector<int32_t> all = r.prompt_tokens;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
  auto rows = TeacherForced(**model, all);
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return result;
  ModelOptions portable_options;
  portable_options.allow_simd = false;
  auto portable = Model::Open(DecomposedSharedModel(r.model), portable_options);
  EXPECT_TRUE(portable.ok()) << portable.status();
  if (!portable.ok()) return result;
  auto portable_rows = TeacherForced(**portable, all);
  EXPECT_TRUE(portable_rows.ok()) << portable_rows.status();
  if (!portable_rows.ok()) return result;
  for (int i = 0; i < kGenerated; ++i) {
    const size_t row = r.prompt_tokens.size() - 1 + i;
    const std::vector<double> lp = LogSoftmax((*rows)[row]);
    const std::vector<double> lp_portable = LogSoftmax((*portable_rows)[row]);
    for (const auto& [id, want] : r.top5[i]) {
      result.max_logprob_error = std::max(result.max_logprob_error, std::abs(lp[id] - want));
      result.noise_floor = std::max(result.noise_floor, std::abs(lp[id] - lp_portable[id]));
    }
  }

  char line[512];
  if (result.first_divergence == kGenerated) {
    std::snprintf(line, sizeof line, "%-32s prompt %d: 64/64 tokens equal, max |dlogprob| %.4f (noise floor %.4f)",
                  r.model.c_str(), index % 2, result.max_logprob_error, result.noise_floor);
  } else {
    const int i = result.first_divergence;
    const int32_t ours = greedy->tokens[i];
    const int32_t theirs = r.tokens[i];
    double ref_ours = -INFINITY;
    const bool in_top5 = RefLogprob(r.top5[i], ours, &ref_ours);
    const std::vector<double> lp = LogSoftmax(greedy->logits[i]);
    result.reference_gap = in_top5 ? r.top5[i][0].second - ref_ours : INFINITY;
    std::snprintf(line, sizeof line,
                  "%-32s prompt %d: diverges at %d: llama.cpp %d (%.4f) vs ours %d (%s%.4f in llama.cpp; "
                  "ours: %.4f vs %.4f), gap %.4f nats, max |dlogprob| %.4f (noise floor %.4f)",
                  r.model.c_str(), index % 2, i, theirs, r.top5[i][0].second, ours, in_top5 ? "" : "not in top 5, <",
                  in_top5 ? ref_ours : r.top5[i].back().second, lp[theirs], lp[ours],
                  r.top5[i][0].second - (in_top5 ? ref_ours : r.top5[i].back().second), result.max_logprob_error,
                  result.noise_floor);
  }
  result.report = line;
  std::printf("%s\n", line);
  (*cache)[index] = result;
  return result;
}

std::vector<std::pair<int, ReferenceRecord>> RecordsFor(const std::string& model) {
  std::vector<std::pair<int, ReferenceRecord>> out;
  std::vector<ReferenceRecord> all = LoadReferenceRecords();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].model == model) out.emplace_back(static_cast<int>(i), all[i]);
  }
  return out;
}

class LlamaCppReference : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppReference, TokensAndLogprobsMatch) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy.jsonl");
  const std::string model = GetParam();
  OCTO_REQUIRE_SHARED("models/" + model);
  auto records = RecordsFor(model);
  ASSERT_EQ(records.size(), 2u) << "two prompts per model in the reference";
  // The model's noise floor: the larger of its two records' (which positions
  // happen to sit near a rounding boundary is luck; how far a flip carries
  // is the model's).
  double noise_floor = 0;
  for (const auto& [index, r] : records) noise_floor = std::max(noise_floor, RunRecord(r, index).noise_floor);
  for (const auto& [index, r] : records) {
    const RecordResult result = RunRecord(r, index);
    const bool f32 = LogprobTolerance(model) < 0.05;
    const double tolerance = f32 ? LogprobTolerance(model) : std::max(LogprobTolerance(model), 2 * noise_floor);
    EXPECT_LE(result.max_logprob_error, tolerance) << result.report << " (model noise floor " << noise_floor << ")";
    if (IsExactType(model)) {
      if (result.first_divergence < kGenerated) {
        EXPECT_LE(result.reference_gap, kExactTieNats) << "diverges off a tie: " << result.report;
      }
      continue;
    }
    // A divergence must be a near-tie in llama.cpp's own numbers.
    if (result.first_divergence < kGenerated) {
      EXPECT_LE(result.reference_gap, kNearTieNats) << "not a near-tie: " << result.report;
    }
  }
}

constexpr const char* kModels[] = {
    "stories260K.gguf",           "TinyStories-656K-Q8_0.gguf",    "widened/llama-F32.gguf",
    "widened/llama-F16.gguf",     "widened/llama-BF16.gguf",       "widened/llama-Q8_0.gguf",
    "widened/llama-Q4_0.gguf",    "widened/llama-Q4_1.gguf",       "widened/llama-Q5_0.gguf",
    "widened/llama-Q5_1.gguf",    "widened/llama-Q2_K.gguf",       "widened/llama-Q3_K.gguf",
    "widened/llama-Q4_K.gguf",    "widened/llama-Q5_K.gguf",       "widened/llama-Q6_K.gguf",
    "widened/llama-IQ4_NL.gguf",  "widened/llama-IQ4_XS.gguf",     "widened/llama-Q4_K_M-mix.gguf",
    "widened/moe-Q8_0.gguf",      "widened/moe-Q4_K_M-mix.gguf",   "widened/qwen2-F32.gguf",
    "widened/qwen2-Q4_K_M-mix.gguf"};

std::string ParamName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  name = name.substr(name.find('/') == std::string::npos ? 0 : name.find('/') + 1);
  name = name.substr(0, name.find(".gguf"));
  for (char& ch : name) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllModels, LlamaCppReference, ::testing::ValuesIn(kModels), ParamName);

// Over every record of a type below 8 bits: at least 90% agree with
// llama.cpp on the first 32 greedy tokens.
TEST(LlamaCppReferenceSummary, LowBitTypesAgreeOnFirst32) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy.jsonl");
  std::vector<ReferenceRecord> all = LoadReferenceRecords();
  int low_bit = 0;
  int agree = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (IsExactType(all[i].model) || !HaveShared("models/" + all[i].model)) continue;
    ++low_bit;
    if (RunRecord(all[i], static_cast<int>(i)).first_divergence >= kLowBitPrefix) ++agree;
  }
  if (low_bit == 0) GTEST_SKIP() << "no low-bit models";
  std::printf("low-bit records agreeing on the first %d tokens: %d of %d\n", kLowBitPrefix, agree, low_bit);
  EXPECT_GE(agree, kLowBitAgreement * low_bit);
}

}  // namespace
}  // namespace octo::testing
