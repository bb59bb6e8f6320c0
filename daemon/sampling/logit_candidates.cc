#include "daemon/sampling/logit_candidates.h"

namespace octo {

bool CandidatesDecide(const SamplingParams& params) {
  // ApplyPenalties changes nothing exactly when sampler.cc's window is empty or every penalty is neutral.
  const bool no_penalties = params.repeat_last_n == 0 || (params.repeat_penalty == 1.0 &&
                                                          params.frequency_penalty == 0.0 &&
                                                          params.presence_penalty == 0.0);
  const bool from_the_best = params.temperature == 0 || (params.top_k >= 1 && params.top_k <= kLogitCandidates);
  return no_penalties && from_the_best && params.top_logprobs <= kLogitCandidates;
}

}  // namespace octo
