// Generation's side of speculative decoding: proposing a draft token from a
// draft model's logits, and verifying a draft (linear or a tree) against the
// target's rows. See generation.h and daemon/sampling/speculative.h.
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/engine/generation.h"
#include "daemon/sampling/speculative.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<int> Generation::AdvanceGrammar(std::span<const int32_t> tokens, bool* ended) {
  int advanced = 0;
  for (const int32_t t : tokens) {
    if (tokenizer_.IsEndOfGeneration(t)) {
      // The generation ends there: what a draft proposes after it is never kept.
      if (ended != nullptr) *ended = true;
      return advanced;
    }
    if (!GrammarTakes(t)) {
      if (absl::Status back = grammar_->Rollback(advanced); !back.ok()) return back;
      return absl::FailedPreconditionError("a drafted token the output constraint refuses");
    }
    ++advanced;
  }
  return advanced;
}

absl::StatusOr<Generation::Proposal> Generation::Propose(std::span<const float> draft_logits,
                                                         std::span<const int32_t> proposed) {
  std::vector<int32_t> history = history_;
  history.insert(history.end(), proposed.begin(), proposed.end());
  Proposal proposal;
  bool ended = false;
  if (grammar_.has_value()) {
    // What the grammar allows after the tokens proposed so far.
    OCTO_ASSIGN_OR_RETURN(const int advanced, AdvanceGrammar(proposed, &ended));
    const absl::Status masked = ended ? absl::OkStatus() : MaskLogits(draft_logits);
    OCTO_RETURN_IF_ERROR(grammar_->Rollback(advanced));
    OCTO_RETURN_IF_ERROR(masked);
  }
  if (grammar_.has_value() && !ended) {
    OCTO_ASSIGN_OR_RETURN(proposal.q, sampler_.Distribution(masked_, history));
  } else {
    OCTO_ASSIGN_OR_RETURN(proposal.q, sampler_.Distribution(draft_logits, history));
  }
  proposal.token = greedy() ? proposal.q.front().id : DrawFrom(proposal.q, sampler_.NextUniform());
  return proposal;
}

absl::StatusOr<Generation::Verdict> Generation::AcceptDraft(
    const DraftTree& draft, std::span<const std::vector<TokenProb>> q,
    const std::function<std::span<const float>(int node)>& logits) {
  if (finished()) return absl::FailedPreconditionError("the generation has finished");
  Verdict verdict;
  // Emits `id`, decided from `row`; false for an end token (which ends the
  // generation and is not emitted).
  auto emit = [&](int32_t id, std::span<const float> row) -> absl::StatusOr<bool> {
    OCTO_ASSIGN_OR_RETURN(std::optional<GeneratedToken> token, Take(id, row));
    if (!token.has_value()) return false;
    verdict.tokens.push_back(std::move(*token));
    return true;
  };
  if (greedy()) {
    // Down the tree while the target's own choice (Accept's draw, the
    // grammar's too) is a child.
    for (int node = -1;;) {
      std::span<const float> row = logits(node);
      OCTO_ASSIGN_OR_RETURN(const int32_t id, Draw(row, &row));
      OCTO_ASSIGN_OR_RETURN(const bool emitted, emit(id, row));
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
  std::vector<std::vector<float>> rows;   // constrained: the rows masked as the grammar stands there
  std::vector<int32_t> history = history_;
  int advanced = 0;
  bool ended = false;  // past an end token: the rest is never kept, its rows stay as they are
  for (int i = -1; i < draft.size(); ++i) {
    if (i >= 0) history.push_back(tokens[static_cast<size_t>(i)]);
    std::span<const float> row = logits(i);
    if (grammar_.has_value()) {
      if (i >= 0 && !ended) {
        OCTO_ASSIGN_OR_RETURN(const int one,
                              AdvanceGrammar(std::span<const int32_t>(&tokens[static_cast<size_t>(i)], 1), &ended));
        advanced += one;
      }
      if (!ended) {
        OCTO_RETURN_IF_ERROR(MaskLogits(row));
        rows.push_back(masked_);
      } else {
        rows.emplace_back(row.begin(), row.end());
      }
      row = rows.back();
    }
    OCTO_ASSIGN_OR_RETURN(std::vector<TokenProb> dist, sampler_.Distribution(row, history));
    p.push_back(std::move(dist));
  }
  if (grammar_.has_value()) OCTO_RETURN_IF_ERROR(grammar_->Rollback(advanced));
  OCTO_ASSIGN_OR_RETURN(const SpeculativeOutcome outcome,
                        VerifyDraft(tokens, q, p, [this] { return sampler_.NextUniform(); }));
  for (int i = 0; i <= outcome.accepted; ++i) {
    const bool drafted = i < outcome.accepted;
    const int32_t id = drafted ? tokens[static_cast<size_t>(i)] : outcome.next;
    if (grammar_.has_value() && !GrammarTakes(id)) {
      return absl::InternalError("speculative verification kept a token the grammar refuses");
    }
    const std::span<const float> row = grammar_.has_value() ? std::span<const float>(rows[static_cast<size_t>(i)]) : logits(i - 1);
    OCTO_ASSIGN_OR_RETURN(const bool emitted, emit(id, row));
    if (!emitted) break;
    if (drafted) verdict.kept.push_back(i);
    if (finished()) break;
  }
  return verdict;
}

}  // namespace octo
