// The double-precision hybrid reference (hybrid_reference.h) against
// llama.cpp's outputs on the tiny hybrid presets (tests/data/README.md): the
// cross-check that the reference reads qwen35 / qwen35moe / qwen3next as
// llama.cpp does, before any engine is held to it. Each deliberately wrong
// variant (no conv state, a flipped decay sign, no attention output gate, a
// norm offset) must move the log-probabilities far past the agreement.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/engine/hybrid_reference.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

// llama.cpp runs in float with fp16 keys and values; its own prompt-in-one-
// batch and token-by-token forms differ by up to 2e-4 in a top-1 log-prob
// on these models. The reference must land within this of both.
constexpr double kLogprobTolerance = 1e-3;

struct Record {
  std::string preset, type, mode;
  uint64_t seed = 0;
  std::vector<int32_t> prompt, tokens;
  std::vector<std::vector<std::pair<int32_t, double>>> top5;
};

std::vector<Record> LoadRecords(const std::string& type) {
  std::vector<Record> out;
  std::ifstream in(OCTO_HYBRID_REFERENCE);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] != type) continue;
    Record r{j["preset"], j["type"], j["prompt_mode"], j["seed"], j["prompt_tokens"], j["tokens"], {}};
    for (const nlohmann::json& step : j["top5_logprobs"]) {
      r.top5.emplace_back();
      for (const nlohmann::json& alt : step) r.top5.back().emplace_back(alt[0], alt[1]);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> LogSoftmax(const std::vector<double>& logits) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double v : logits) sum += std::exp(v - mx);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - mx - std::log(sum);
  return out;
}

class HybridReferenceTest : public ::testing::Test {
 protected:
  // The preset's GGUF as the record was computed on (same seed, same bytes:
  // hybrid_presets_test checks the hash).
  std::string Model(const Record& r) {
    const std::string path = tmp_.Path(absl::StrCat(r.preset, "-", r.type, "-", r.seed, ".gguf"));
    std::ifstream exists(path);
    if (!exists) {
      absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset(r.preset), *ParseTypeRecipe(r.type));
      EXPECT_TRUE(plan.ok()) << plan.status();
      EXPECT_TRUE(WriteModel(*plan, path, r.seed).ok());
    }
    return path;
  }

  // Feeds the prompt and the record's tokens (teacher forcing, so one early
  // difference does not hide the rest) and returns the largest difference
  // between llama.cpp's top-5 log-probs and the reference's for the same
  // ids; counts the steps whose argmax differs.
  double MaxDifference(const Record& r, const HybridReferenceOptions& options, int* argmax_differs) {
    absl::StatusOr<std::unique_ptr<HybridReference>> ref = HybridReference::Load(Model(r), options);
    EXPECT_TRUE(ref.ok()) << ref.status();
    if (!ref.ok()) return INFINITY;
    std::vector<double> logits;
    for (int32_t t : r.prompt) logits = *(*ref)->Step(t);
    double worst = 0;
    *argmax_differs = 0;
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      const std::vector<double> lp = LogSoftmax(logits);
      for (const auto& [id, want] : r.top5[i]) worst = std::max(worst, std::abs(lp[id] - want));
      const int32_t ours = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
      *argmax_differs += ours != r.tokens[i];
      logits = *(*ref)->Step(r.tokens[i]);
    }
    return worst;
  }

  TempDir tmp_;
};

TEST_F(HybridReferenceTest, AgreesWithLlamaCppOnEveryF32Record) {
  const std::vector<Record> records = LoadRecords("F32");
  ASSERT_EQ(records.size(), 6u) << OCTO_HYBRID_REFERENCE;  // 3 presets x 2 prompt modes
  for (const Record& r : records) {
    int differs = 0;
    const double worst = MaxDifference(r, {}, &differs);
    std::printf("%-16s %-6s: max |log-prob difference| %.2e over 32 steps, %d argmax differences\n", r.preset.c_str(),
                r.mode.c_str(), worst, differs);
    EXPECT_LT(worst, kLogprobTolerance) << r.preset << " " << r.mode;
    EXPECT_EQ(differs, 0) << r.preset << " " << r.mode;
  }
}

TEST_F(HybridReferenceTest, EachWrongVariantIsFarFromLlamaCpp) {
  struct Variant {
    const char* name;
    HybridReferenceOptions options;
  };
  std::vector<Variant> variants(4);
  variants[0] = {"no conv state", {}};
  variants[0].options.drop_conv_state = true;
  variants[1] = {"decay sign flipped", {}};
  variants[1].options.flip_decay_sign = true;
  variants[2] = {"no output gate", {}};
  variants[2].options.drop_output_gate = true;
  variants[3] = {"norm offset", {}};
  variants[3].options.norm_offset = true;
  for (const Record& r : LoadRecords("F32")) {
    if (r.mode != "whole") continue;
    for (const Variant& v : variants) {
      int differs = 0;
      const double worst = MaxDifference(r, v.options, &differs);
      std::printf("%-16s %-18s: max |log-prob difference| %.2e, %d argmax differences\n", r.preset.c_str(), v.name,
                  worst, differs);
      EXPECT_GT(worst, 10 * kLogprobTolerance) << r.preset << ": " << v.name << " went unnoticed";
    }
  }
}

}  // namespace
}  // namespace octo::testing
