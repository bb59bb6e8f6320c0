// The engine's forward pass on the hybrid Qwen architectures (qwen35,
// qwen35moe, qwen3next), on the CPU backend: against the double-precision
// reference (hybrid_reference.h), against llama.cpp's tokens
// (tests/data/llamacpp-hybrid.jsonl), and against itself -- one prompt
// chunk, many, or token by token; alone or batched; resident or streamed; a
// session continued, cut back to its turn snapshot, or started over.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/engine/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "storage/model_config.h"
#include "storage/tensor_layout.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/daemon/engine/hybrid_reference.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

constexpr const char* kPresets[] = {"tiny-qwen35", "tiny-qwen35moe", "tiny-qwen3next"};
const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 250, 311, 5, 77};  // the records' prompt ids

// Largest |difference| of two log-softmaxes.
double MaxLogprobDiff(std::span<const float> engine, const std::vector<double>& reference) {
  const std::vector<double> a = LogSoftmax(engine);
  double mx = -INFINITY, sum = 0, worst = 0;
  for (double v : reference) mx = std::max(mx, v);
  for (double v : reference) sum += std::exp(v - mx);
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - (reference[i] - mx - std::log(sum))));
  return worst;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
         });
}

class HybridForwardTest : public ::testing::Test {
 protected:
  // The preset as a GGUF (seed 1, as the llama.cpp records) and decomposed.
  std::string Gguf(const std::string& preset, const std::string& type) {
    const std::string path = tmp_.Path(absl::StrCat(preset, "-", type, ".gguf"));
    if (!std::ifstream(path)) {
      absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset(preset), *ParseTypeRecipe(type));
      EXPECT_TRUE(plan.ok()) << plan.status();
      EXPECT_TRUE(WriteModel(*plan, path, /*seed=*/1).ok());
    }
    return path;
  }
  std::string Dir(const std::string& preset, const std::string& type) {
    const std::string dir = tmp_.Path(absl::StrCat(preset, "-", type));
    if (!std::ifstream(dir + "/manifest.json")) {
      absl::StatusOr<Manifest> m = Decompose(Gguf(preset, type), dir, DecomposeOptions{});
      EXPECT_TRUE(m.ok()) << m.status();
    }
    return dir;
  }
  std::unique_ptr<Model> Open(const std::string& dir, uint64_t layer_budget = kUnlimitedBudget) {
    ModelOptions options;
    options.weights.layer_budget_bytes = layer_budget;
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(dir, options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }
  // Runs `passes` (token chunks) through one sequence; every token's logits.
  std::vector<std::vector<float>> Run(Model& model, KvCache& kv, const std::vector<std::vector<int32_t>>& passes) {
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    const size_t vocab = model.config().vocab_size;
    for (const std::vector<int32_t>& tokens : passes) {
      const SequenceStep step{.kv = &kv, .tokens = tokens, .all_logits = true};
      const absl::Status status = model.Forward(std::span<const SequenceStep>(&step, 1), logits);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) return out;
      for (size_t p = 0; p < tokens.size(); ++p) out.emplace_back(logits.begin() + p * vocab, logits.begin() + (p + 1) * vocab);
    }
    return out;
  }

  TempDir tmp_;
};

TEST_F(HybridForwardTest, MatchesTheDoubleReferenceTokenByToken) {
  for (const char* preset : kPresets) {
    SCOPED_TRACE(preset);
    std::unique_ptr<Model> model = Open(Dir(preset, "F32"));
    ASSERT_NE(model, nullptr);
    auto ref = HybridReference::Load(Gguf(preset, "F32"));
    ASSERT_TRUE(ref.ok()) << ref.status();
    // The same pass without the fp16 roundings of q, k and v: how far those
    // alone move the log-probs (the scale a float pass's flips of an fp16
    // rounding live on).
    auto exact = HybridReference::Load(Gguf(preset, "F32"), {.fp16_kv = false, .fp16_q = false});
    ASSERT_TRUE(exact.ok()) << exact.status();
    std::vector<int32_t> tokens = kPrompt;
    for (int i = 0; i < 24; ++i) tokens.push_back((i * 37 + 11) % 600);
    std::unique_ptr<KvCache> kv = model->NewCache(64);
    const std::vector<std::vector<float>> engine = Run(*model, *kv, {tokens});
    ASSERT_EQ(engine.size(), tokens.size());
    double worst = 0, fp16_effect = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      const std::vector<double> want = *(*ref)->Step(tokens[p]);
      const std::vector<double> unrounded = *(*exact)->Step(tokens[p]);
      worst = std::max(worst, MaxLogprobDiff(engine[p], want));
      std::vector<float> as_float(unrounded.begin(), unrounded.end());
      fp16_effect = std::max(fp16_effect, MaxLogprobDiff(as_float, want));
    }
    std::printf("%-16s engine vs double reference: max |log-prob difference| %.2e over %zu positions "
                "(the fp16 roundings alone: %.2e)\n",
                preset, worst, tokens.size(), fp16_effect);
    // Float against double, both rounding q, k and v to fp16: well inside
    // what those roundings move, and far from any wrong variant (0.7+ nats,
    // hybrid_reference_test).
    EXPECT_LT(worst, 1e-3);
    EXPECT_LT(worst, fp16_effect);
  }
}

TEST_F(HybridForwardTest, GreedyTokensMatchLlamaCpp) {
  std::ifstream in(OCTO_HYBRID_REFERENCE);
  ASSERT_TRUE(in) << OCTO_HYBRID_REFERENCE;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r["prompt_mode"] != "whole") continue;
    const std::string preset = r["preset"], type = r["type"];
    std::unique_ptr<Model> model = Open(Dir(preset, type));
    ASSERT_NE(model, nullptr);
    absl::StatusOr<GreedyRun> run = Greedy(*model, r["prompt_tokens"].get<std::vector<int32_t>>(), 32);
    ASSERT_TRUE(run.ok()) << run.status();
    const std::vector<int32_t> want = r["tokens"];
    size_t equal = 0;
    while (equal < want.size() && run->tokens[equal] == want[equal]) ++equal;
    double gap = 0;
    if (equal < want.size()) {
      const nlohmann::json& top = r["top5_logprobs"][equal];
      gap = top[0][1].get<double>() - top[1][1].get<double>();
    }
    std::printf("%-16s %-6s: %zu/32 greedy tokens as llama.cpp%s\n", preset.c_str(), type.c_str(), equal,
                equal < want.size() ? absl::StrCat(", then a divergence where llama.cpp's top two are ", gap,
                                                   " nats apart").c_str()
                                    : "");
    if (type == "F32") {
      EXPECT_EQ(equal, want.size()) << preset;
    }
    // Quantized: llama.cpp rounds activations to 8 bits before its dots;
    // a divergence must be at a near-tie.
    if (equal < want.size()) {
      EXPECT_LT(gap, 0.02) << preset << " " << type << " at " << equal;
    }
  }
}

// A prompt's aligned chunks of kMaxDeltaRuleChunk positions take the
// chunked form of the delta rule, the rest the step form (kernels/ops.h).
// Passes cut at chunk boundaries give one pass's bits; passes of 5 tokens
// hold no whole chunk, so they give token by token's bits; the two forms
// agree to float rounding, within the fp16 cache's rounding (F32 weights:
// quantized ones round activations to 8 bits, which amplifies it).
TEST_F(HybridForwardTest, PrefillInOneChunkManyOrTokenByTokenGivesTheSameLogits) {
  for (const char* preset : kPresets) {
    SCOPED_TRACE(preset);
    std::unique_ptr<Model> model = Open(Dir(preset, "F32"));
    ASSERT_NE(model, nullptr);
    std::vector<int32_t> tokens = kPrompt;
    for (int i = 0; i < 62; ++i) tokens.push_back((i * 53 + 7) % 600);
    auto passes_of = [&](size_t size) {
      std::vector<std::vector<int32_t>> passes;
      for (size_t i = 0; i < tokens.size(); i += size) {
        passes.emplace_back(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + size));
      }
      return passes;
    };
    auto kv = [&] { return model->NewCache(128); };
    const auto whole = Run(*model, *kv(), {tokens});
    const auto aligned = Run(*model, *kv(), passes_of(kMaxDeltaRuleChunk));
    const auto fives = Run(*model, *kv(), passes_of(5));
    const auto stepped = Run(*model, *kv(), passes_of(1));
    ASSERT_EQ(aligned.size(), tokens.size());
    ASSERT_EQ(fives.size(), tokens.size());
    ASSERT_EQ(stepped.size(), tokens.size());
    double worst = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      EXPECT_TRUE(SameBits(whole[p], aligned[p])) << "position " << p << ", passes of " << kMaxDeltaRuleChunk;
      EXPECT_TRUE(SameBits(fives[p], stepped[p])) << "position " << p << ", passes of 5";
      const std::vector<double> chunked(whole[p].begin(), whole[p].end());
      worst = std::max(worst, MaxLogprobDiff(stepped[p], chunked));
      EXPECT_EQ(std::max_element(whole[p].begin(), whole[p].end()) - whole[p].begin(),
                std::max_element(stepped[p].begin(), stepped[p].end()) - stepped[p].begin())
          << "position " << p;
    }
    std::printf("%-16s chunked vs step form prefill: max |log-prob difference| %.2e over %zu positions\n", preset,
                worst, tokens.size());
    EXPECT_GT(worst, 0.0) << "one pass must take the chunked form";
    // Both passes round k and v to fp16 in the cache; a float rounding's
    // difference flips a few of those roundings, which alone move log-probs
    // by 4e-4 to 7e-4 here (MatchesTheDoubleReferenceTokenByToken).
    EXPECT_LT(worst, 4e-4);
  }
}

TEST_F(HybridForwardTest, BatchedStreamedAndContinuedSequencesKeepTheirBits) {
  const std::string dir = Dir("tiny-qwen35moe", "Q4_K_M");
  std::unique_ptr<Model> model = Open(dir);
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> a = kPrompt, b = {3, 9, 27, 81, 243, 129};
  auto solo_a = model->NewCache(64), solo_b = model->NewCache(64);
  const auto want_a = Run(*model, *solo_a, {a}), want_b = Run(*model, *solo_b, {b});
  // Both in one pass.
  auto kv_a = model->NewCache(64), kv_b = model->NewCache(64);
  const SequenceStep batch[] = {{.kv = kv_a.get(), .tokens = a, .all_logits = true},
                                {.kv = kv_b.get(), .tokens = b, .all_logits = true}};
  std::vector<float> logits;
  ASSERT_TRUE(model->Forward(batch, logits).ok());
  const size_t vocab = model->config().vocab_size;
  for (size_t p = 0; p < a.size(); ++p) {
    EXPECT_TRUE(SameBits(std::span<const float>(logits).subspan(p * vocab, vocab), want_a[p])) << "a at " << p;
  }
  for (size_t p = 0; p < b.size(); ++p) {
    EXPECT_TRUE(SameBits(std::span<const float>(logits).subspan((a.size() + p) * vocab, vocab), want_b[p]))
        << "b at " << p;
  }
  // Streamed: a budget of about two layers, the rest read per pass.
  std::unique_ptr<Model> streamed = Open(dir, 2 * model->store().manifest().files.front().size + (4 << 20));
  ASSERT_NE(streamed, nullptr);
  auto kv_s = streamed->NewCache(64);
  const auto got = Run(*streamed, *kv_s, {a});
  for (size_t p = 0; p < a.size(); ++p) EXPECT_TRUE(SameBits(got[p], want_a[p])) << "streamed at " << p;
}

TEST_F(HybridForwardTest, ASessionReusesOnlyWholeStateOrItsTurnSnapshot) {
  std::unique_ptr<Model> model = Open(Dir("tiny-qwen35", "Q8_0"));
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> turn1 = kPrompt, reply = {400, 401, 402}, turn2 = {500, 501};
  std::vector<int32_t> all = turn1;
  all.insert(all.end(), reply.begin(), reply.end());
  all.insert(all.end(), turn2.begin(), turn2.end());
  auto fresh = model->NewCache(64);
  const auto want = Run(*model, *fresh, {all});

  auto kv = model->NewCache(64);
  Run(*model, *kv, {turn1});
  ASSERT_TRUE(kv->Snapshot().ok());  // the end of the first prompt: a turn boundary
  Run(*model, *kv, {reply});
  // A continuation of everything held: all of it is reusable.
  EXPECT_EQ(kv->ReusablePrefix(kv->size()), kv->size());
  // A prompt that agrees only up to inside the reply: back to the snapshot.
  EXPECT_EQ(kv->ReusablePrefix(static_cast<int>(turn1.size()) + 2), static_cast<int>(turn1.size()));
  // One that parts before the snapshot: nothing of the recurrent state is usable.
  EXPECT_EQ(kv->ReusablePrefix(3), 0);
  EXPECT_EQ(kv->Truncate(5).code(), absl::StatusCode::kFailedPrecondition) << "state cannot be cut at 5";

  ASSERT_TRUE(kv->Truncate(static_cast<int>(turn1.size())).ok());
  std::vector<int32_t> rest = reply;
  rest.insert(rest.end(), turn2.begin(), turn2.end());
  const auto again = Run(*model, *kv, {rest});
  ASSERT_EQ(again.size(), rest.size());
  for (size_t p = 0; p < rest.size(); ++p) {
    EXPECT_TRUE(SameBits(again[p], want[turn1.size() + p])) << "after the snapshot, at " << p;
  }
  ASSERT_TRUE(kv->Truncate(0).ok());
  const auto restart = Run(*model, *kv, {all});
  for (size_t p = 0; p < all.size(); ++p) EXPECT_TRUE(SameBits(restart[p], want[p])) << "from empty, at " << p;
}

TEST_F(HybridForwardTest, AMissingOrIllShapedTensorIsNamed) {
  absl::StatusOr<GgufFile> gguf = GgufFile::Open(Gguf("tiny-qwen3next", "F32"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(*gguf);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ssm_v_heads, 4u);
  EXPECT_TRUE(IsDeltaNetLayer(*config, 0));
  EXPECT_FALSE(IsDeltaNetLayer(*config, 1));
  std::map<std::string, std::vector<uint64_t>> shapes;
  for (const GgufTensorInfo& t : gguf->tensors()) shapes[t.name] = t.dims;
  const ShapeLookup lookup = [&](absl::string_view name) -> const std::vector<uint64_t>* {
    auto it = shapes.find(std::string(name));
    return it == shapes.end() ? nullptr : &it->second;
  };
  EXPECT_TRUE(CheckModelTensors(*config, lookup).ok());
  shapes["blk.0.ssm_conv1d.weight"] = {3, 512};
  EXPECT_NE(CheckModelTensors(*config, lookup).message().find("blk.0.ssm_conv1d.weight has shape [3, 512], expected [4, 512]"),
            std::string::npos);
  shapes["blk.0.ssm_conv1d.weight"] = {4, 512};
  shapes.erase("blk.1.attn_q_norm.weight");
  EXPECT_NE(CheckModelTensors(*config, lookup).message().find("missing tensor blk.1.attn_q_norm.weight"),
            std::string::npos);
  shapes["blk.1.attn_q_norm.weight"] = {64};
  shapes.erase("blk.2.ssm_ba.weight");
  EXPECT_NE(CheckModelTensors(*config, lookup).message().find("blk.2.ssm_ba.weight"), std::string::npos);
  // A config whose DeltaNet heads do not divide.
  ModelConfig odd = *config;
  odd.ssm_k_heads = 3;
  EXPECT_NE(ValidateModelConfig(odd).message().find("ssm_v_heads (4) is not a multiple of ssm_k_heads (3)"),
            std::string::npos);
}

}  // namespace
}  // namespace octo::testing
