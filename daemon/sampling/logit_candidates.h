// The candidates path: a logits row reduced where it was computed to its
// kLogitCandidates best tokens and what log-probabilities need
// (Backend::TopLogits, kernels/ops.h), so a decode step brings back a few
// hundred bytes instead of the whole vocabulary. Where CandidatesDecide
// says so, Sampler::Sample, Logprob and TopLogprobs give from the
// candidates exactly what they give from the whole row: the same token (and
// the same random numbers drawn), the same errors, and logprobs bit for bit
// wherever the backend's exp is the host's (the CPU backend and the CUDA
// executor both sum in LogSumExp's order, kernels/sum_exp.h), within 1e-12
// on a GPU (its double exp).
//
// Why they can: greedy is the first candidate; top-k with k <= the count
// keeps the k best, which the candidates hold in the order KeepTopK leaves
// them (or, when k reaches every finite logit, all of those, by id, as the
// whole row's list is); the chain after top-k sees only that list; a
// logprob is its logit less the row's log-sum-exp, which the reduction
// carries, and the top alternatives are the first candidates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/sampling/sampling_params.h"
#include "daemon/sampling/transforms.h"

namespace octo {

// How many of a row's best tokens come back (kernels/ops.h kTopLogits).
inline constexpr int kLogitCandidates = 64;

// One logits row, reduced.
struct LogitCandidates {
  std::vector<TokenLogit> top;  // the row's min(kLogitCandidates, vocab) best, in MoreLikely order
  size_t vocab = 0;             // the row's width
  float max_logit = 0;          // the row's largest logit
  double sum_exp = 0;           // sum over the row of exp(logit - max_logit)
  int32_t n_finite = 0;         // logits other than -inf
  int32_t bad_id = -1;          // the lowest id whose logit is NaN or +inf, or -1; the rest is then unspecified
  float bad_logit = 0;          // its logit
};

// Whether candidates decide a draw with `params` as the whole row would (a
// grammar, a draft to verify or more rows are the caller's to rule out):
// no penalties (repeat 1, frequency and presence 0, or repeat_last_n 0),
// greedy or 1 <= top_k <= kLogitCandidates, and top_logprobs <=
// kLogitCandidates.
bool CandidatesDecide(const SamplingParams& params);

}  // namespace octo
