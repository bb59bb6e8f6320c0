// The steps of the sampling chain, each on its own so tests can check it
// against a hand-computed example. The Sampler runs them in llama.cpp's
// default order: penalties -> top-k -> top-p -> min-p -> temperature -> draw.
//
// Steps after the penalties work on a candidate list, the tokens still in
// the running with their current logits. They only remove candidates or
// rescale logits; none reads the random generator except the draw.
//
// Probabilities are computed in double from float logits, as
// exp(logit - max_logit) / sum, so no step overflows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace octo {

struct TokenLogit {
  int32_t id;
  float logit;
};

// A token and its probability, for a distribution listed by id.
struct TokenProb {
  int32_t id;
  double p;
};

// Most likely first; equal logits go to the lower id. A total order, so a
// list sorted by it is the same on every standard library.
inline bool MoreLikely(const TokenLogit& a, const TokenLogit& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// The id of the largest logit; ties go to the lowest id. -1 when `logits` is
// empty or every logit is -inf. NaN must not occur (the Sampler rejects it).
int32_t ArgmaxLowestId(std::span<const float> logits);

// Repetition penalties over `window` (the last tokens of the history), as
// llama.cpp's penalties sampler: for each distinct token in the window with
// count c, a positive logit is divided by `repeat`, a negative one multiplied
// by it, and then c * frequency + presence is subtracted. Each token is
// penalised once however often it occurs. INVALID_ARGUMENT if the window
// holds an id outside [0, logits.size()); logits are then unchanged.
absl::Status ApplyPenalties(std::span<float> logits, std::span<const int32_t> window, double repeat,
                            double frequency, double presence);

// Keeps the k most likely candidates (by MoreLikely), in MoreLikely order.
// k <= 0 or k >= size: no change. O(size + k log k). A fixed order, so a
// row's candidates (logit_candidates.h) can rebuild the same list.
void KeepTopK(std::vector<TokenLogit>& candidates, int32_t k);

// Nucleus: keeps the most likely candidates, in MoreLikely order, up to and
// including the first at which their probabilities (softmax over the current
// list) sum to >= p. p >= 1: no change. Always keeps at least one. Sorts
// only as far as it needs, so a small nucleus in a 150K vocabulary costs a
// few linear passes, not a full sort. Survivors are left in MoreLikely order.
void KeepTopP(std::vector<TokenLogit>& candidates, double p);

// KeepTopP then KeepMinP, with the same result (survivors in MoreLikely
// order), but min-p's cut is made before the nucleus is sorted, so a long
// flat tail that min-p removes is never sorted. What the Sampler runs.
void KeepTopPThenMinP(std::vector<TokenLogit>& candidates, double p, double min_p);

// Keeps candidates whose probability is >= min_p times the largest, i.e.
// logit >= max_logit + ln(min_p). min_p <= 0: no change. The most likely
// always survives. The survivors keep their relative order.
void KeepMinP(std::vector<TokenLogit>& candidates, double min_p);

// Divides every logit by `temperature` (> 0), after shifting them so the
// largest is 0: the probabilities are those of logit / temperature, and a
// tiny temperature cannot overflow a logit to +inf.
void ApplyTemperature(std::vector<TokenLogit>& candidates, double temperature);

// Draws one candidate with probability softmax(logits), using `u` uniform in
// [0, 1): candidates are put in ascending id order and the first whose
// cumulative probability exceeds u is chosen. The order is fixed so a given
// u picks the same token everywhere. Needs at least one finite logit;
// returns -1 otherwise.
int32_t DrawToken(std::vector<TokenLogit>& candidates, double u);

// softmax(logits) of the candidates, as DrawToken weighs them, in ascending
// id order (candidates are sorted so). Empty when no logit is finite.
std::vector<TokenProb> Probabilities(std::vector<TokenLogit>& candidates);

}  // namespace octo
