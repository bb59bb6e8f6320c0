// How speculative decoding drafts (daemon/core/speculation.h): octod's
// --draft-* flags and config keys, and a request's draft_max.
#pragma once

#include "absl/status/status.h"

namespace octo {

// The draft model name that turns speculation off (config, request, load).
inline constexpr const char* kNoDraftModel = "none";

// The longest linear draft (or tree depth) a request may ask for: with the
// pending tokens a hybrid model re-feeds after a rejection (at most as
// many), a step stays within the kMaxTreeAttentionRows rows a decode step
// computes the same bits for as one-token steps.
inline constexpr int kMaxDraftTokens = 31;

struct SpeculationSettings {
  int draft_max = 8;      // the most tokens a draft proposes (a tree's depth), 1..kMaxDraftTokens
  int draft_min = 1;      // the least k adapts down to, 1..draft_max
  int tree_nodes = 0;     // a greedy draft tree's nodes per session per pass; 0: linear drafts
  int tree_branches = 2;  // the most children a tree node gets
};

// Checks each field's range; INVALID_ARGUMENT naming the bad one.
absl::Status ValidateSpeculation(const SpeculationSettings& s);

}  // namespace octo
