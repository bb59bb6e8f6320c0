// BitNet (llama.cpp's `bitnet` architecture: sub-norms before attn_output and
// ffn_down, NEOX rope, tied logits) and its ternary types against llama.cpp:
// ../shared/models/bitnet/ holds one model as F32, TQ1_0 and TQ2_0 (the
// same weights: every row is exactly {-s, 0, +s}), and
// ../shared/reference/llamacpp-greedy-bitnet.jsonl llama.cpp's 64 greedy
// tokens and top-5 log-probabilities for two prompts on each.
//
// And the IQ1-IQ3 types: ../shared/models/lowbit/ holds the widened llama in
// all seven, with llama.cpp's references in llamacpp-greedy-lowbit.jsonl.
//
// The CPU engine must give llama.cpp's tokens (a divergence only where
// llama.cpp's own top two are close) and its log-probabilities,
// teacher-forced, within 0.02 (F32), or for the quantized files within 0.1
// or twice the family's noise floor, whichever is larger: activations are
// rounded to Q8_K before each TQ/IQ dot, as llama.cpp's CPU path rounds
// them, and that rounding turns a one-ulp difference of summation order
// anywhere upstream into a whole step (llamacpp_reference_test.cc says
// more). The floor is measured here, as there: our portable and SIMD
// kernels, which differ only in that order. (The SIMD builds' TQ and IQ dots
// sum in ggml's AVX2 order and give its results bit for bit; the
// dequantizers give its floats bit for bit.)
#include <algorithm>
#include <cmath>
#include <cstdio>
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
constexpr double kNearTieNats = 0.15;



// Max |logprob| difference over llama.cpp's top-5 entries of every
// generated position, between `rows` and the reference, and between `rows`
// and `other` (the noise floor).
struct LogprobErrors {
  double reference = 0, floor = 0;
};
LogprobErrors CompareRows(const ReferenceRecord& r, const std::vector<std::vector<float>>& rows,
                          const std::vector<std::vector<float>>& other) {
  LogprobErrors e;
  for (int i = 0; i < kGenerated; ++i) {
    const size_t row = r.prompt_tokens.size() - 1 + i;
    const std::vector<double> lp = LogSoftmax(rows[row]);
    const std::vector<double> lp_other = LogSoftmax(other[row]);
    for (const auto& [id, want] : r.top5[i]) {
      e.reference = std::max(e.reference, std::abs(lp[id] - want));
      e.floor = std::max(e.floor, std::abs(lp[id] - lp_other[id]));
    }
  }
  return e;
}

struct RecordResult {
  std::string model, prompt;
  int diverged = kGenerated;  // the first greedy token that differs, or 64
  double gap = 0;             // there: llama.cpp's top logprob less its logprob of ours
  LogprobErrors errors;
};

RecordResult RunRecord(const ReferenceRecord& r, Model& model, Model& portable) {
  RecordResult result;
  result.model = r.model;
  result.prompt = r.prompt;
  auto greedy = Greedy(model, r.prompt_tokens, kGenerated);
  EXPECT_TRUE(greedy.ok()) << greedy.status();
  if (!greedy.ok()) return result;
  for (int i = 0; i < kGenerated && result.diverged == kGenerated; ++i) {
    if (greedy->tokens[i] != r.tokens[i]) result.diverged = i;
  }
  if (result.diverged < kGenerated) {
    double ours = -INFINITY;  // llama.cpp's logprob of our token, if in its top 5
    for (const auto& [id, lp] : r.top5[result.diverged]) {
      if (id == greedy->tokens[result.diverged]) ours = lp;
    }
    result.gap = r.top5[result.diverged][0].second - ours;
  }
  // Teacher-forced log-probabilities over llama.cpp's tokens.
  std::vector<int32_t> all = r.prompt_tokens;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
  auto rows = TeacherForced(model, all);
  auto portable_rows = TeacherForced(portable, all);
  EXPECT_TRUE(rows.ok() && portable_rows.ok());
  if (rows.ok() && portable_rows.ok()) result.errors = CompareRows(r, *rows, *portable_rows);
  std::printf("%-26s %-32s %2d/64 tokens equal (gap there %.4f), max |dlogprob| %.4f (noise floor %.4f)\n",
              r.model.c_str(), r.prompt.substr(0, 32).c_str(), result.diverged, result.gap, result.errors.reference,
              result.errors.floor);
  return result;
}

// Every model and prompt of `reference`. The noise floor is the family's:
// the largest over its quantized files (one trained model at several
// widths, so one sensitivity; a single record's floor is luck, as the
// divergences' positions are). F32: logprobs within 0.02, tokens equal but
// on a near-tie. Quantized: logprobs within max(0.1, 2 * floor); a
// divergence sits within max(near-tie, 2 * floor) of llama.cpp's own top
// token; at least `agree` of the records give llama.cpp's first 32 tokens.
void CheckFamily(const char* reference, std::vector<std::string> models, const std::string& architecture,
                 double agree) {
  std::vector<RecordResult> results;
  for (const std::string& model_path : models) {
    if (!HaveShared("models/" + model_path)) GTEST_SKIP() << "../shared lacks " << model_path;
    auto model = Model::Open(DecomposedSharedModel(model_path), ModelOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->config().architecture, architecture);
    ModelOptions portable_options;
    portable_options.allow_simd = false;
    auto portable = Model::Open(DecomposedSharedModel(model_path), portable_options);
    ASSERT_TRUE(portable.ok()) << portable.status();
    int records = 0;
    for (const ReferenceRecord& r : LoadReferenceRecords(reference)) {
      if (r.model != model_path) continue;
      ++records;
      results.push_back(RunRecord(r, **model, **portable));
    }
    EXPECT_EQ(records, 2) << model_path << ": two prompts per file in the reference";
  }
  double floor = 0;
  int quantized = 0, quantized_agree = 0;
  for (const RecordResult& r : results) {
    if (absl::StrContains(r.model, "F32")) continue;
    floor = std::max(floor, r.errors.floor);
    ++quantized;
    quantized_agree += r.diverged >= 32;
  }
  std::printf("family noise floor %.4f; %d of %d quantized records give llama.cpp's first 32 tokens\n", floor,
              quantized_agree, quantized);
  for (const RecordResult& r : results) {
    SCOPED_TRACE(r.model + ": " + r.prompt);
    if (absl::StrContains(r.model, "F32")) {
      EXPECT_LE(r.errors.reference, 0.02);
      if (r.diverged < kGenerated) {
        EXPECT_LE(r.gap, kNearTieNats);
      }
      continue;
    }
    EXPECT_LE(r.errors.reference, std::max(0.1, 2 * floor)) << "family noise floor " << floor;
    if (r.diverged < kGenerated) {
      EXPECT_LE(r.gap, std::max(kNearTieNats, 2 * floor)) << "diverges at " << r.diverged;
    }
  }
  EXPECT_GE(quantized_agree, agree * quantized);
}

TEST(LlamaCppNewTypes, BitnetF32AndTernaryFilesMatch) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy-bitnet.jsonl");
  CheckFamily("reference/llamacpp-greedy-bitnet.jsonl",
              {"bitnet/bitnet-F32.gguf", "bitnet/bitnet-TQ1_0.gguf", "bitnet/bitnet-TQ2_0.gguf"}, "bitnet", 1.0);
}

// IQ1 is noise at this size (../shared/models/README.md): its tokens must
// still follow llama.cpp's as closely as the family's floor allows.
TEST(LlamaCppNewTypes, IqLowBitFilesMatch) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy-lowbit.jsonl");
  CheckFamily("reference/llamacpp-greedy-lowbit.jsonl",
              {"lowbit/llama-IQ1_S.gguf", "lowbit/llama-IQ1_M.gguf", "lowbit/llama-IQ2_XXS.gguf",
               "lowbit/llama-IQ2_XS.gguf", "lowbit/llama-IQ2_S.gguf", "lowbit/llama-IQ3_XXS.gguf",
               "lowbit/llama-IQ3_S.gguf"},
              "llama", 0.8);
}

}  // namespace
}  // namespace octo::testing
