// The engine's side of greedy speculative decoding (issue 16), on real
// models: a resident draft proposes k tokens, the target scores them all in
// one step of k + 1 rows, daemon/sampling/speculative.h keeps the longest
// prefix equal to the target's argmaxes plus the target's own next token,
// and both caches are cut back to what was kept (KvCache::Truncate). The
// output must be the plain greedy output token for token: a step's rows are
// the bits of one-token steps, and the rollback leaves no trace. The target
// is ../shared's widened stories260K (Q4_K_M mix and Q8_0), the draft the
// original stories260K (nearly the same function, the same vocabulary), or a
// proposer that is always wrong.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/engine/model.h"
#include "daemon/sampling/rng.h"
#include "daemon/sampling/speculative.h"
#include "gtest/gtest.h"
#include "storage/status_macros.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/daemon/engine/reference_records.h"
#include "tests/shared_data.h"

namespace octo::testing {
namespace {

struct SpecRun {
  std::vector<int32_t> tokens;
  int proposed = 0, accepted = 0, target_steps = 0;
};

// One sequence's step of `tokens`; the logits of every row when all.
absl::Status Step(Model& model, KvCache& kv, std::span<const int32_t> tokens, bool all, std::vector<float>& logits) {
  const SequenceStep step{.kv = &kv, .tokens = tokens, .all_logits = all};
  return model.Forward(std::span<const SequenceStep>(&step, 1), logits);
}

// Greedy speculative decoding of n_new tokens with k-token drafts. The draft
// proposes its argmax, or with `wrong` the token after it (never the
// target's choice unless by chance). Invariant between rounds: both caches
// hold the prompt and every emitted token but the last, `last`, which is
// fed next; the draft may lag, holding its pending tokens in draft_in.
absl::StatusOr<SpecRun> Speculate(Model& target, Model& draft, std::span<const int32_t> prompt, int n_new, int k,
                                  bool wrong) {
  const int context = static_cast<int>(prompt.size()) + n_new + k + 1;
  std::unique_ptr<KvCache> tkv = target.NewCache(context), dkv = draft.NewCache(context);
  const int32_t vocab = static_cast<int32_t>(target.config().vocab_size);
  std::vector<float> logits;
  OCTO_RETURN_IF_ERROR(Step(target, *tkv, prompt, false, logits));
  SpecRun run;
  run.tokens.push_back(Argmax(logits));
  std::vector<int32_t> draft_in(prompt.begin(), prompt.end());
  SplitMix64 rng(1);
  const std::function<double()> uniform = [&] { return rng.NextDouble(); };
  while (static_cast<int>(run.tokens.size()) < n_new) {
    const int32_t last = run.tokens.back();
    const int base = tkv->size();  // holds everything before `last`
    // The draft's k proposals, one step each.
    draft_in.push_back(last);
    std::vector<int32_t> proposal;
    for (int i = 0; i < k; ++i) {
      OCTO_RETURN_IF_ERROR(Step(draft, *dkv, draft_in, false, logits));
      const int32_t best = Argmax(logits);
      proposal.push_back(wrong ? (best + 1) % vocab : best);
      draft_in.assign(1, proposal.back());
    }
    // One target step over last and the proposals: k + 1 rows.
    std::vector<int32_t> rows = {last};
    rows.insert(rows.end(), proposal.begin(), proposal.end());
    OCTO_RETURN_IF_ERROR(Step(target, *tkv, rows, true, logits));
    ++run.target_steps;
    std::vector<std::vector<TokenProb>> q, p;
    for (int32_t t : proposal) q.push_back({{t, 1.0}});
    for (int i = 0; i <= k; ++i) {
      p.push_back({{Argmax(std::span<const float>(logits).subspan(size_t(i) * vocab, vocab)), 1.0}});
    }
    OCTO_ASSIGN_OR_RETURN(const SpeculativeOutcome out, VerifyDraft(proposal, q, p, uniform));
    run.proposed += k;
    run.accepted += out.accepted;
    run.tokens.insert(run.tokens.end(), proposal.begin(), proposal.begin() + out.accepted);
    run.tokens.push_back(out.next);
    // Keep last and the accepted proposals; drop the rest from both caches.
    const int keep = base + 1 + out.accepted;
    OCTO_RETURN_IF_ERROR(tkv->Truncate(keep));
    if (dkv->size() > keep) OCTO_RETURN_IF_ERROR(dkv->Truncate(keep));
    // The draft fed last and proposals 0 .. k-2; a fully kept draft still
    // owes its last proposal.
    draft_in.clear();
    if (dkv->size() < keep) draft_in.push_back(proposal.back());
  }
  run.tokens.resize(n_new);
  return run;
}

class SpeculativeGreedyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SpeculativeGreedyTest, GivesThePlainGreedyTokensWhateverTheDraftProposes) {
  const std::string target_file = GetParam();
  OCTO_REQUIRE_SHARED("models/" + target_file);
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  auto target = Model::Open(DecomposedSharedModel(target_file), ModelOptions{});
  auto draft = Model::Open(DecomposedSharedModel("stories260K.gguf"), ModelOptions{});
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_TRUE(draft.ok()) << draft.status();
  ASSERT_EQ((*target)->config().vocab_size, (*draft)->config().vocab_size);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // "Once upon a time", as llama.cpp tokenizes it
  const int n_new = 48;
  absl::StatusOr<GreedyRun> plain = Greedy(**target, prompt, n_new);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const int k : {1, 4, 7}) {
    for (const bool wrong : {false, true}) {
      absl::StatusOr<SpecRun> spec = Speculate(**target, **draft, prompt, n_new, k, wrong);
      ASSERT_TRUE(spec.ok()) << spec.status();
      const double acceptance = static_cast<double>(spec->accepted) / spec->proposed;
      std::printf("%-28s k=%d %-12s acceptance %.2f, %.2f target steps per token\n", target_file.c_str(), k,
                  wrong ? "wrong draft:" : "stories260K:", acceptance,
                  static_cast<double>(spec->target_steps) / n_new);
      EXPECT_EQ(spec->tokens, plain->tokens) << "k " << k << (wrong ? ", a wrong draft" : ", stories260K");
      if (wrong) {
        EXPECT_LT(acceptance, 0.1);
      } else {
        EXPECT_GT(acceptance, 0.6) << "stories260K computes nearly the widened model's function";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WidenedTargets, SpeculativeGreedyTest,
                         ::testing::Values("widened/llama-Q8_0.gguf", "widened/llama-Q4_K_M-mix.gguf"));

}  // namespace
}  // namespace octo::testing
