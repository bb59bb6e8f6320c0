#include "daemon/core/speculation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/draft_model.h"
#include "daemon/core/job.h"
#include "daemon/sampling/logprobs.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// Greedy drafts on attention-only models may branch; the rest are chains
// (sampling verifies a chain; a recurrent state follows one path; a
// grammar masks one path).
bool UsesTree(Job& job) {
  const JobDraft& d = job.draft();
  // A constrained job drafts a chain: each link from logits its grammar masked.
  return d.settings.tree_nodes > 0 && job.generation().greedy() && !job.generation().constrained() &&
         !d.model->recurrent() && !job.session().kv->recurrent();
}

// Grows `job`'s draft by the children of `parents` (-1: the root), whose
// next-token logits are row(i).
absl::Status Grow(Job& job, const std::vector<int>& parents,
                  const std::function<std::span<const float>(size_t)>& row) {
  JobDraft& d = job.draft();
  if (!UsesTree(job)) {
    OCTO_ASSIGN_OR_RETURN(Generation::Proposal p, job.generation().Propose(row(0), d.tree.Tokens(d.tree.size())));
    d.tree.Add(d.tree.size() - 1, p.token, 0.0);
    d.q.push_back(std::move(p.q));
    return absl::OkStatus();
  }
  std::vector<std::vector<TokenLogprob>> top;
  for (size_t i = 0; i < parents.size(); ++i) {
    OCTO_ASSIGN_OR_RETURN(std::vector<TokenLogprob> best, TopLogprobs(row(i), d.settings.tree_branches));
    top.push_back(std::move(best));
  }
  const int width = std::max(1, d.planned / d.depth);
  GrowLevel(d.tree, parents, top, d.settings.tree_branches, width, d.planned - d.tree.size());
  return absl::OkStatus();
}

// The draft passes of the jobs of one draft model.
absl::Status ProposeGroup(DraftModel& draft, const std::vector<Job*>& jobs, int catch_up_limit,
                          std::vector<float>& logits) {
  const size_t vocab = draft.model().config().vocab_size;
  // Pass 0: each draft cache catches up to its root (the last emitted
  // token) and scores it.
  std::vector<SequenceStep> steps;
  std::vector<Job*> growing;
  std::vector<size_t> growing_row;
  for (Job* job : jobs) {
    JobDraft& d = job->draft();
    const Generation& g = job->generation();
    KvCache& dkv = *job->session().draft_kv;
    d.base = static_cast<int>(g.fed());
    d.pending = static_cast<int>(g.history().size()) - d.base;
    d.tree.Clear();
    d.q.clear();
    d.draft_fed = 0;
    const int root_end = d.base + d.pending;  // history[0, root_end): every decided token
    if (dkv.size() >= root_end) OCTO_RETURN_IF_ERROR(dkv.Truncate(dkv.ReusablePrefix(root_end - 1)));
    std::span<const int32_t> input = std::span<const int32_t>(g.history()).subspan(
        static_cast<size_t>(dkv.size()), static_cast<size_t>(root_end - dkv.size()));
    if (input.size() <= static_cast<size_t>(catch_up_limit)) {
      growing.push_back(job);
      growing_row.push_back(steps.size());
    } else {
      input = input.first(static_cast<size_t>(catch_up_limit));  // catching up; a plain step this pass
    }
    steps.push_back(SequenceStep{.kv = &dkv, .tokens = input});
  }
  OCTO_RETURN_IF_ERROR(draft.model().Forward(steps, logits));
  for (size_t j = 0; j < growing.size(); ++j) {
    Job& job = *growing[j];
    if (draft.recurrent()) OCTO_RETURN_IF_ERROR(job.session().draft_kv->Checkpoint());  // the rollback point
    const std::span<const float> root = std::span<const float>(logits).subspan(growing_row[j] * vocab, vocab);
    OCTO_RETURN_IF_ERROR(Grow(job, {-1}, [&](size_t) { return root; }));
  }
  // Pass L: the nodes of depth L, for the next level.
  for (int level = 1; !growing.empty(); ++level) {
    std::vector<Job*> next;
    std::vector<std::vector<int>> parents;
    steps.clear();
    for (Job* job : growing) {
      JobDraft& d = job->draft();
      if (d.tree.depth() != level || level >= d.depth || d.tree.size() >= d.planned) continue;
      const std::vector<int> nodes = d.tree.Level(level);
      const int root_end = d.base + d.pending;  // node i sits at draft row root_end + i
      d.draft_tokens.clear();
      d.draft_mask.clear();
      for (int i : nodes) {
        d.draft_tokens.push_back(d.tree.node(i).token);
        if (!d.tree.linear()) d.draft_mask.push_back(d.tree.Mask(i, 0, -1));
      }
      steps.push_back(SequenceStep{.kv = job->session().draft_kv.get(), .tokens = d.draft_tokens,
                                   .all_logits = true, .tree_mask = d.draft_mask, .tree_base = root_end});
      next.push_back(job);
      parents.push_back(nodes);
    }
    if (next.empty()) break;
    OCTO_RETURN_IF_ERROR(draft.model().Forward(steps, logits));
    size_t row = 0;
    for (size_t j = 0; j < next.size(); ++j) {
      JobDraft& d = next[j]->draft();
      d.draft_fed += static_cast<int>(parents[j].size());
      const size_t first = row;
      OCTO_RETURN_IF_ERROR(Grow(*next[j], parents[j], [&](size_t i) {
        return std::span<const float>(logits).subspan((first + i) * vocab, vocab);
      }));
      row += parents[j].size();
    }
    growing = std::move(next);
  }
  return absl::OkStatus();
}

// The step of a job whose draft is ready: the pending tokens, then the nodes.
void PrepareStep(Job& job) {
  JobDraft& d = job.draft();
  const std::vector<int32_t>& history = job.generation().history();
  d.step_tokens.assign(history.begin() + d.base, history.end());
  const std::vector<int32_t> nodes = d.tree.Tokens(d.tree.size());
  d.step_tokens.insert(d.step_tokens.end(), nodes.begin(), nodes.end());
  d.step_mask.clear();
  if (!d.tree.linear()) {
    // A tree follows exactly one pending token (UsesTree: attention-only),
    // its root: bit 0; node i is bit 1 + i.
    d.step_mask.push_back(1);
    for (int i = 0; i < d.tree.size(); ++i) d.step_mask.push_back(d.tree.Mask(i, 1, 0));
  }
  d.proposing = true;
}

}  // namespace

absl::Status ValidateSpeculation(const SpeculationSettings& s) {
  if (s.draft_max < 1 || s.draft_max > kMaxDraftTokens) {
    return absl::InvalidArgumentError(absl::StrCat("draft_max is ", s.draft_max, "; it must be 1..", kMaxDraftTokens));
  }
  if (s.draft_min < 1 || s.draft_min > s.draft_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_min is ", s.draft_min, "; it must be 1..draft_max (", s.draft_max, ")"));
  }
  if (s.tree_nodes < 0 || s.tree_nodes > kMaxDraftTreeNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_tree is ", s.tree_nodes, "; it must be 0 (linear drafts) ..", kMaxDraftTreeNodes));
  }
  if (s.tree_branches < 1 || s.tree_branches > kMaxDraftTreeNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_branches is ", s.tree_branches, "; it must be 1..", kMaxDraftTreeNodes));
  }
  return absl::OkStatus();
}

int PlannedDraftNodes(Job& job, int max_nodes) {
  JobDraft& d = job.draft();
  d.planned = 0;
  d.depth = 0;
  d.proposing = false;
  const Generation& g = job.generation();
  if (d.model == nullptr || g.finished() || g.fed() < static_cast<size_t>(g.prompt_tokens())) return 0;
  const int base = static_cast<int>(g.fed());
  const int pending = static_cast<int>(g.history().size()) - base;
  // Rows past the context, past max_tokens (the round's own token comes
  // free) or past the step's row limit would be wasted or refused.
  const int room = std::min({max_nodes, g.max_positions() - base - pending,
                             job.session().draft_kv->max_positions() - base - pending,
                             kMaxTreeAttentionRows - pending, g.tokens_left() - 1});
  const bool tree = UsesTree(job);
  d.depth = std::min(d.k, tree ? std::min(room, d.settings.tree_nodes) : room);
  if (d.depth <= 0) return 0;
  d.planned = tree ? std::min(d.settings.tree_nodes, room) : d.depth;
  return d.planned;
}

absl::Status ProposeDrafts(std::span<Job* const> jobs, int catch_up_limit, std::vector<float>& logits) {
  // Each draft model's jobs share its passes.
  std::vector<std::pair<DraftModel*, std::vector<Job*>>> groups;
  for (Job* job : jobs) {
    DraftModel* model = job->draft().model.get();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == model; });
    if (it == groups.end()) {
      groups.push_back({model, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(job);
  }
  absl::Status first_error;
  for (auto& [model, group] : groups) {
    absl::Status proposed = ProposeGroup(*model, group, catch_up_limit, logits);
    if (!proposed.ok() && first_error.ok()) {
      first_error = Annotate(proposed, absl::StrCat("draft model '", model->path(), "'"));
    }
    // What grew before an error is still a valid draft to verify.
    for (Job* job : group) {
      if (!job->draft().tree.empty()) PrepareStep(*job);
    }
  }
  return first_error;
}

SequenceStep DraftStep(Job& job) {
  JobDraft& d = job.draft();
  SequenceStep step{.kv = job.session().kv.get(), .tokens = d.step_tokens, .all_logits = true};
  if (!d.step_mask.empty()) {
    step.tree_mask = d.step_mask;
    step.tree_base = d.base;  // the root's row
  }
  // A hybrid keeps the state after the pending tokens (all decided): where
  // a rejection rolls back to.
  if (job.session().kv->recurrent()) step.checkpoint_rows = d.pending;
  return step;
}

absl::StatusOr<std::vector<GeneratedToken>> FinishDraft(Job& job, std::span<const float> rows, size_t vocab) {
  JobDraft& d = job.draft();
  d.proposing = false;
  Generation& g = job.generation();
  const size_t root_row = static_cast<size_t>(d.pending - 1);
  OCTO_ASSIGN_OR_RETURN(Generation::Verdict verdict,
                        g.AcceptDraft(d.tree, d.q, [&](int node) {
                          return rows.subspan((root_row + 1 + static_cast<size_t>(node)) * vocab, vocab);
                        }));
  // Node i sits at row first + i of both caches; keep the accepted ones.
  const int first = d.base + d.pending;
  const int kept = static_cast<int>(verdict.kept.size());
  KvCache& kv = *job.session().kv;
  KvCache& dkv = *job.session().draft_kv;
  if (d.tree.linear()) {
    OCTO_RETURN_IF_ERROR(kv.Truncate(kv.ReusablePrefix(first + kept)));
    OCTO_RETURN_IF_ERROR(dkv.Truncate(dkv.ReusablePrefix(std::min(dkv.size(), first + kept))));
  } else {
    std::vector<int> slots, draft_slots;
    for (int node : verdict.kept) {
      slots.push_back(first + node);
      if (node < d.draft_fed) draft_slots.push_back(first + node);
    }
    OCTO_RETURN_IF_ERROR(kv.KeepRows(first, slots));
    OCTO_RETURN_IF_ERROR(dkv.KeepRows(first, draft_slots));
  }
  g.InputFed(static_cast<size_t>(kv.size() - d.base));
  // k follows the acceptance: longer after a fully kept draft, shorter
  // after one kept less than half.
  d.proposed += static_cast<uint64_t>(d.tree.size());
  d.accepted += static_cast<uint64_t>(kept);
  const int depth = d.tree.depth();
  if (kept >= depth) {
    d.k = std::min(d.k + 1, d.settings.draft_max);
  } else if (2 * kept < depth) {
    d.k = std::max(d.k - 1, d.settings.draft_min);
  }
  return std::move(verdict.tokens);
}

}  // namespace octo
