// Generation's side of speculative decoding: proposing a draft token from a
// draft model's logits, and verifying a draft (linear or a tree) against the
// target's rows. See generation.h and daemon/sampling/speculative.h.
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/engine/generation.h"
#include "daemon/sampling/speculative.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<Generation::Proposal> Generation::Propose(std::span<const float> draft_logits,
                                                         std::span<const int32_t> proposed) {
  std::vector<int32_t> history = history_;
  history.insert(history.end(), proposed.begin(), proposed.end());
  Proposal proposal;
  OCTO_ASSIGN_OR_RETURN(proposal.q, sampler_.Distribution(draft_logits, history));
  proposal.token = greedy() ? proposal.q.front().id : DrawFrom(proposal.q, sampler_.NextUniform());
  return proposal;
}

absl::StatusOr<Generation::Verdict> Generation::AcceptDraft(
    const DraftTree& draft, std::span<const std::vector<TokenProb>> q,
    const std::function<std::span<const float>(int node)>& logits) {
  if (finished()) return absl::FailedPreconditionError("the generation has finished");
  Verdict verdict;
  // Emits `id`, decided from the row after `node`; false for an end token
  // (which ends the generation and is not emitted).
  auto emit = [&](int32_t id, int node) -> absl::StatusOr<bool> {
    OCTO_ASSIGN_OR_RETURN(std::optional<GeneratedToken> token, Take(id, logits(node)));
    if (!token.has_value()) return false;
    verdict.tokens.push_back(std::move(*token));
    return true;
  };
  if (greedy()) {
    // Down the tree while the target's own choice is a child.
    for (int node = -1;;) {
      OCTO_ASSIGN_OR_RETURN(const int32_t id, sampler_.Sample(logits(node), history_));
      OCTO_ASSIGN_OR_RETURN(const bool emitted, emit(id, node));
      const int child = draft.Child(node, id);
      if (!emitted || child < 0) break;
      verdict.kept.push_back(child);
      if (finished()) break;
      node = child;
    }
    return verdict;
  }
  if (!draft.linear() || q.size() != static_cast<size_t>(draft.size())) {
    return absl::InvalidArgumentError(absl::StrCat("sampling verifies a linear draft with its distributions (",
                                                   draft.size(), " nodes, ", q.size(), " distributions)"));
  }
  const std::vector<int32_t> tokens = draft.Tokens(draft.size());
  std::vector<std::vector<TokenProb>> p;  // p[i]: the target's distribution after node i - 1
  std::vector<int32_t> history = history_;
  for (int i = -1; i < draft.size(); ++i) {
    if (i >= 0) history.push_back(tokens[static_cast<size_t>(i)]);
    OCTO_ASSIGN_OR_RETURN(std::vector<TokenProb> dist, sampler_.Distribution(logits(i), history));
    p.push_back(std::move(dist));
  }
  OCTO_ASSIGN_OR_RETURN(const SpeculativeOutcome outcome,
                        VerifyDraft(tokens, q, p, [this] { return sampler_.NextUniform(); }));
  for (int i = 0; i <= outcome.accepted; ++i) {
    const bool drafted = i < outcome.accepted;
    OCTO_ASSIGN_OR_RETURN(const bool emitted, emit(drafted ? tokens[static_cast<size_t>(i)] : outcome.next, i - 1));
    if (!emitted) break;
    if (drafted) verdict.kept.push_back(i);
    if (finished()) break;
  }
  return verdict;
}

}  // namespace octo
