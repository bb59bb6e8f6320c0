// BitNet (llama.cpp's `bitnet` architecture: sub-norms before attn_output and
// ffn_down, NEOX rope, tied logits) and its ternary types against llama.cpp:
// ../shared/models/bitnet/ holds one model as F32, TQ1_0 and TQ2_0 (the
// same weights: every row is exactly {-s, 0, +s}), and
// ../shared/reference/llamacpp-greedy-bitnet.jsonl llama.cpp's 64 greedy
// tokens and top-5 log-probabilities for two prompts on each.
//
// The CPU engine must give llama.cpp's tokens (a divergence only where
// llama.cpp's own top two are within a near-tie) and its log-probabilities,
// teacher-forced, within 0.02 (F32), or for TQ within 0.1 or twice the
// model's noise floor, whichever is larger: activations are rounded to Q8_K
// before each ternary dot, as llama.cpp's CPU path rounds them, and that
// rounding turns a one-ulp difference of summation order into a whole step
// (llamacpp_reference_test.cc says more). The floor is measured here, as
// there: our portable and SIMD kernels, which differ only in that order.
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

class LlamaCppBitnet : public ::testing::TestWithParam<const char*> {};

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

TEST_P(LlamaCppBitnet, TokensAndLogprobsMatch) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy-bitnet.jsonl");
  const std::string model_path = GetParam();
  OCTO_REQUIRE_SHARED("models/" + model_path);
  const bool f32 = absl::StrContains(model_path, "F32");
  auto model = Model::Open(DecomposedSharedModel(model_path), ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().architecture, "bitnet");
  ModelOptions portable_options;
  portable_options.allow_simd = false;
  auto portable = Model::Open(DecomposedSharedModel(model_path), portable_options);
  ASSERT_TRUE(portable.ok()) << portable.status();
  std::vector<LogprobErrors> errors;
  double floor = 0;
  for (const ReferenceRecord& r : LoadReferenceRecords("reference/llamacpp-greedy-bitnet.jsonl")) {
    if (r.model != model_path) continue;
    SCOPED_TRACE(r.model + ": " + r.prompt);
    auto greedy = Greedy(**model, r.prompt_tokens, kGenerated);
    ASSERT_TRUE(greedy.ok()) << greedy.status();
    int diverged = kGenerated;
    for (int i = 0; i < kGenerated && diverged == kGenerated; ++i) {
      if (greedy->tokens[i] != r.tokens[i]) diverged = i;
    }
    if (diverged < kGenerated) {
      double ours = -INFINITY;  // llama.cpp's logprob of our token, if in its top 5
      for (const auto& [id, lp] : r.top5[diverged]) {
        if (id == greedy->tokens[diverged]) ours = lp;
      }
      EXPECT_LE(r.top5[diverged][0].second - ours, kNearTieNats)
          << "diverges at " << diverged << " off a near-tie: llama.cpp " << r.tokens[diverged] << ", ours "
          << greedy->tokens[diverged];
    }
    // Teacher-forced log-probabilities over llama.cpp's tokens.
    std::vector<int32_t> all = r.prompt_tokens;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
    auto rows = TeacherForced(**model, all);
    ASSERT_TRUE(rows.ok()) << rows.status();
    auto portable_rows = TeacherForced(**portable, all);
    ASSERT_TRUE(portable_rows.ok()) << portable_rows.status();
    errors.push_back(CompareRows(r, *rows, *portable_rows));
    floor = std::max(floor, errors.back().floor);
    std::printf("%-26s %-32s %d/64 tokens equal, max |dlogprob| %.4f (noise floor %.4f)\n", r.model.c_str(),
                r.prompt.substr(0, 32).c_str(), diverged, errors.back().reference, errors.back().floor);
  }
  ASSERT_EQ(errors.size(), 2u) << "two prompts per file in the reference";
  const double tolerance = f32 ? 0.02 : std::max(0.1, 2 * floor);
  for (const LogprobErrors& e : errors) EXPECT_LE(e.reference, tolerance) << "model noise floor " << floor;
}

INSTANTIATE_TEST_SUITE_P(AllFiles, LlamaCppBitnet,
                         ::testing::Values("bitnet/bitnet-F32.gguf", "bitnet/bitnet-TQ1_0.gguf",
                                           "bitnet/bitnet-TQ2_0.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(name.find('-') + 1);
                           return name.substr(0, name.find('.'));
                         });

}  // namespace
}  // namespace octo::testing
