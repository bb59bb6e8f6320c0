// One pass serves several sequences: a token's logits must be the same bits
// whether its sequence runs alone or batched with others, and a prompt
// prefilled in chunks must continue exactly as one prefilled whole.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/model.h"
#include "storage/decompose.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/preset_param_name.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

class BatchTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    GenerateModel(tmp_.Path("m.gguf"), GetParam(), "Q4_K_M");
    ASSERT_TRUE(Decompose(tmp_.Path("m.gguf"), tmp_.Path("m"), DecomposeOptions{}).ok());
    auto model = Model::Open(tmp_.Path("m"), ModelOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  // Prefills `prompt` into a fresh cache; returns the cache.
  std::unique_ptr<KvCache> Prefill(const std::vector<int32_t>& prompt) {
    auto kv = model_->NewCache(256);
    std::vector<float> logits;
    const SequenceStep step{.kv = kv.get(), .tokens = prompt};
    EXPECT_TRUE(model_->Forward(std::span<const SequenceStep>(&step, 1), logits).ok());
    return kv;
  }

  TempDir tmp_;
  std::unique_ptr<Model> model_;
};

std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> p = {1};
  for (int t = 0; t < 3 + 2 * i; ++t) p.push_back(10 + (i * 37 + t * 11) % 400);
  return p;
}

TEST_P(BatchTest, EightSequencesBatchedGetTheirSoloLogits) {
  constexpr int kSequences = 8;
  const size_t vocab = model_->config().vocab_size;
  // Alone: each sequence decodes token 42 after its prompt.
  std::vector<std::vector<float>> solo(kSequences);
  for (int i = 0; i < kSequences; ++i) {
    auto kv = Prefill(Prompt(i));
    const int32_t token = 42;
    const SequenceStep step{.kv = kv.get(), .tokens = std::span<const int32_t>(&token, 1)};
    ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&step, 1), solo[i]).ok());
  }
  // Together, in one pass.
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<SequenceStep> steps;
  static const int32_t kToken = 42;
  for (int i = 0; i < kSequences; ++i) {
    caches.push_back(Prefill(Prompt(i)));
    steps.push_back({.kv = caches.back().get(), .tokens = std::span<const int32_t>(&kToken, 1)});
  }
  std::vector<float> batched;
  ASSERT_TRUE(model_->Forward(steps, batched).ok());
  ASSERT_EQ(batched.size(), kSequences * vocab);
  for (int i = 0; i < kSequences; ++i) {
    EXPECT_EQ(0, std::memcmp(solo[i].data(), &batched[i * vocab], vocab * sizeof(float))) << "sequence " << i;
    EXPECT_EQ(caches[i]->size(), static_cast<int>(Prompt(i).size()) + 1);
  }
}

TEST_P(BatchTest, PrefillAndDecodeMixInOnePass) {
  const size_t vocab = model_->config().vocab_size;
  // Sequence A prefills 9 tokens while sequence B decodes one.
  const std::vector<int32_t> a_prompt = Prompt(3);
  auto b_kv = Prefill(Prompt(1));
  const int32_t b_token = 7;
  auto a_alone = model_->NewCache(64);
  std::vector<float> a_logits, b_logits, both;
  const SequenceStep a_step{.kv = a_alone.get(), .tokens = a_prompt};
  ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&a_step, 1), a_logits).ok());
  auto b_alone = Prefill(Prompt(1));
  const SequenceStep b_step{.kv = b_alone.get(), .tokens = std::span<const int32_t>(&b_token, 1)};
  ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&b_step, 1), b_logits).ok());

  auto a_kv = model_->NewCache(64);
  const SequenceStep steps[] = {{.kv = a_kv.get(), .tokens = a_prompt},
                                {.kv = b_kv.get(), .tokens = std::span<const int32_t>(&b_token, 1)}};
  ASSERT_TRUE(model_->Forward(steps, both).ok());
  EXPECT_EQ(0, std::memcmp(a_logits.data(), both.data(), vocab * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b_logits.data(), both.data() + vocab, vocab * sizeof(float)));
}

// An embedding's step (hidden states, no logits) between two generations'
// steps: the generations keep their logits' bits, the embedding gets the
// states it gets alone, and a hidden step without a place for them is refused.
TEST_P(BatchTest, HiddenStatesStepsMixWithLogitsSteps) {
  const size_t vocab = model_->config().vocab_size, dim = model_->config().dim;
  const std::vector<int32_t> a = Prompt(1), e = Prompt(2), b = Prompt(3);
  auto run = [&](const std::vector<int32_t>& tokens, bool hidden, std::vector<float>& out) {
    auto kv = model_->NewCache(64);
    std::vector<float> logits, states;
    const SequenceStep step{.kv = kv.get(), .tokens = tokens, .all_logits = hidden, .hidden = hidden};
    ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&step, 1), logits, &states).ok());
    out = hidden ? states : logits;
    EXPECT_EQ(hidden ? logits.size() : states.size(), 0u);
  };
  std::vector<float> a_logits, b_logits, e_states;
  run(a, false, a_logits);
  run(b, false, b_logits);
  run(e, true, e_states);
  ASSERT_EQ(e_states.size(), e.size() * dim);

  auto a_kv = model_->NewCache(64), e_kv = model_->NewCache(64), b_kv = model_->NewCache(64);
  const SequenceStep steps[] = {{.kv = a_kv.get(), .tokens = a},
                                {.kv = e_kv.get(), .tokens = e, .all_logits = true, .hidden = true},
                                {.kv = b_kv.get(), .tokens = b}};
  std::vector<float> logits, states;
  ASSERT_TRUE(model_->Forward(steps, logits, &states).ok());
  ASSERT_EQ(logits.size(), 2 * vocab);
  EXPECT_EQ(0, std::memcmp(a_logits.data(), logits.data(), vocab * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b_logits.data(), logits.data() + vocab, vocab * sizeof(float)));
  EXPECT_EQ(states, e_states);

  auto kv = model_->NewCache(64);
  const SequenceStep hidden{.kv = kv.get(), .tokens = e, .hidden = true};
  const absl::Status refused = model_->Forward(std::span<const SequenceStep>(&hidden, 1), logits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(kv->size(), 0);
}

TEST_P(BatchTest, ChunkedPrefillContinuesLikeWholePrefill) {
  const std::vector<int32_t> prompt = Prompt(6);  // 15 tokens
  auto whole = Greedy(*model_, prompt, 6);
  ASSERT_TRUE(whole.ok());

  auto kv = model_->NewCache(64);
  std::vector<float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += 4) {
    const size_t end = std::min(prompt.size(), begin + 4);
    const SequenceStep step{.kv = kv.get(), .tokens = std::span<const int32_t>(prompt).subspan(begin, end - begin)};
    ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&step, 1), logits).ok());
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < 6; ++i) {
    const int32_t token = Argmax(logits);
    if (i == 0) {
      EXPECT_EQ(0, std::memcmp(logits.data(), whole->logits[0].data(), logits.size() * sizeof(float)));
    }
    tokens.push_back(token);
    const SequenceStep step{.kv = kv.get(), .tokens = std::span<const int32_t>(&tokens.back(), 1)};
    ASSERT_TRUE(model_->Forward(std::span<const SequenceStep>(&step, 1), logits).ok());
  }
  EXPECT_EQ(tokens, whole->tokens);
}

TEST_P(BatchTest, BadStepsAreRefusedAndNothingIsCommitted) {
  auto kv = Prefill(Prompt(0));
  const int before = kv->size();
  std::vector<float> logits;
  const int32_t bad = static_cast<int32_t>(model_->config().vocab_size);
  const SequenceStep step{.kv = kv.get(), .tokens = std::span<const int32_t>(&bad, 1)};
  absl::Status s = model_->Forward(std::span<const SequenceStep>(&step, 1), logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(kv->size(), before);

  const std::vector<int32_t> too_long(300, 5);  // the cache allows 256
  const SequenceStep long_step{.kv = kv.get(), .tokens = too_long};
  s = model_->Forward(std::span<const SequenceStep>(&long_step, 1), logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(kv->size(), before);

  const int32_t ok = 3;
  const SequenceStep twice[] = {{.kv = kv.get(), .tokens = std::span<const int32_t>(&ok, 1)},
                                {.kv = kv.get(), .tokens = std::span<const int32_t>(&ok, 1)}};
  s = model_->Forward(twice, logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(kv->size(), before);
}

INSTANTIATE_TEST_SUITE_P(Presets, BatchTest, ::testing::Values("tiny", "tiny-qwen3moe"),
                         PresetParamName());

}  // namespace
}  // namespace octo::testing
