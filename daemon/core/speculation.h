// Speculative decoding in the scheduler: a small draft model, resident,
// proposes the next tokens of every decoding session, and the target
// verifies all of them in the pass it runs anyway. A streamed target costs
// about the same per pass whether a session brings 1 row or 30, so every
// accepted draft token is a pass saved.
//
// One pass, for each job with a draft (the scheduler's RunPass):
//  1. PlannedDraftNodes: how many draft tokens its step may carry.
//  2. ProposeDrafts: the draft catches up on the tokens it has not seen and
//     grows each job's draft a level per draft pass, every job of a draft
//     model batched into each pass: a chain of k tokens, or (greedy, on
//     attention-only models) a tree, each level the most likely paths.
//  3. DraftStep: the target's step is the pending tokens, then the draft's
//     nodes, each row of a tree seeing only its ancestors.
//  4. FinishDraft: Generation::AcceptDraft keeps the longest prefix the
//     target agrees with (greedy), or verifies by rejection (sampling); both
//     caches are cut back to what was kept (a tree's accepted path is moved
//     into place, a hybrid's recurrent state returns to its checkpoint); k
//     adapts to the acceptance.
// Greedy output is token for token the output without a draft: the target's
// rows are the bits of one-token steps (kernels/ops.h, the batch contract),
// and nothing rejected stays in a cache. Sampling keeps the target's
// distribution exactly, with another sequence of draws.
//
// Everything here runs on the scheduler thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/speculation_settings.h"
#include "daemon/engine/draft_tree.h"
#include "daemon/engine/forward.h"
#include "daemon/engine/generation.h"
#include "daemon/sampling/transforms.h"

namespace octo {

class DraftModel;
class Job;

// One job's speculation: its draft model and settings, and during a pass
// the draft it proposed.
struct JobDraft {
  std::shared_ptr<DraftModel> model;  // null: the job does not speculate
  SpeculationSettings settings;
  int k = 0;                          // the draft length now: adapts within [draft_min, draft_max]

  // This pass (set by ProposeDrafts, used by DraftStep and FinishDraft).
  int planned = 0;          // the most nodes the step may carry
  int depth = 0;            // the most levels (a chain's length)
  bool proposing = false;   // the step carries a draft
  int base = 0;             // the target cache's size before the pass
  int pending = 0;          // tokens before the draft: the last emitted one (and a hybrid's re-fed ones)
  int draft_fed = 0;        // nodes the draft fed into its own cache
  DraftTree tree;
  std::vector<std::vector<TokenProb>> q;  // sampling: the distribution node i was drawn from
  std::vector<int32_t> step_tokens;       // the target's step
  std::vector<uint64_t> step_mask;        // its tree masks (empty: a chain)
  std::vector<int32_t> draft_tokens;      // the draft's step now
  std::vector<uint64_t> draft_mask;

  // Totals over the job.
  uint64_t proposed = 0, accepted = 0;
};

// Verification rounds and what they did, summed (status).
struct SpeculationCounters {
  uint64_t rounds = 0;    // target steps that carried a draft
  uint64_t proposed = 0;  // draft tokens they carried
  uint64_t accepted = 0;  // ... that the target kept
  uint64_t tokens = 0;    // tokens the rounds emitted (accepted + the target's own)
  uint64_t errors = 0;    // failed draft passes (their jobs stepped plainly)
  std::string last_error;
  void Add(const SpeculationCounters& o) {
    rounds += o.rounds;
    proposed += o.proposed;
    accepted += o.accepted;
    tokens += o.tokens;
  }
};

// How many draft nodes `job`'s next step may carry, at most max_nodes: its
// k (or its tree's node budget) within the context (both models'),
// max_tokens and the step's row limit; 0 for a plain step (no draft, a
// prompt still going in, or no room).
int PlannedDraftNodes(Job& job, int max_nodes);

// Runs the draft passes for `jobs` (each with planned > 0). A job whose
// draft is still catching up on more than catch_up_limit tokens feeds that
// many and steps plainly this pass. A failed draft pass leaves its jobs
// stepping plainly (or with the draft grown so far) and is returned, the
// first one named; the caches hold nothing of it.
absl::Status ProposeDrafts(std::span<Job* const> jobs, int catch_up_limit, std::vector<float>& logits);

// The target step of a proposing job (its JobDraft holds the tokens and
// masks the step points to).
SequenceStep DraftStep(Job& job);

// After the target's pass: `rows` are the job's logits rows (one per token
// of its step). Verifies, cuts both caches back, marks what was fed, adapts
// k, and returns the tokens to emit. An error fails the job.
absl::StatusOr<std::vector<GeneratedToken>> FinishDraft(Job& job, std::span<const float> rows, size_t vocab);

}  // namespace octo
