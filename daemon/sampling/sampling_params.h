// What a request asks of the sampler: how to turn each step's logits into the
// next token, when to stop, and which log-probabilities to report.
//
// Defaults are those of llama.cpp's server (common_params_sampling), so a
// request that sets nothing behaves as it would there: temperature 0.8,
// top-k 40, top-p 0.95, min-p 0.05, penalties off (repeat 1.0 over the last
// 64 tokens, frequency and presence 0), a random seed, no token limit.
// A value that turns a step off is written next to each field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace octo {

// Limits on a request's fields; ValidateSamplingParams names the one exceeded.
inline constexpr size_t kMaxStopStrings = 16;         // llama.cpp has none; OpenAI allows 4
inline constexpr size_t kMaxStopStringBytes = 256;    // per stop string, UTF-8 bytes
inline constexpr double kMaxAbsTokenPenalty = 2.0;    // frequency/presence: OpenAI's [-2, 2]
inline constexpr int32_t kMaxTopLogprobs = 20;        // OpenAI's limit on top_logprobs

struct SamplingParams {
  // Logits are divided by this before the draw. 0 = greedy: the argmax after
  // penalties, ties to the lowest id, no random draw. Range [0, inf).
  double temperature = 0.8;
  // Keep the k most likely tokens. 0 = off. Range [0, inf); k >= vocab is off.
  int32_t top_k = 40;
  // Keep the smallest set of most likely tokens whose probability sums to at
  // least top_p. 1 = off. Range (0, 1].
  double top_p = 0.95;
  // Keep tokens whose probability is at least min_p times the most likely
  // one's. 0 = off. Range [0, 1].
  double min_p = 0.05;

  // Penalties look at the last repeat_last_n tokens of the history (prompt
  // and generated tokens). -1 = the whole history, 0 = all penalties off.
  int32_t repeat_last_n = 64;
  // A token seen in the window has a positive logit divided by this, a
  // negative one multiplied by it. 1 = off. Range (0, inf).
  double repeat_penalty = 1.0;
  // A token seen `count` times in the window loses
  // count * frequency_penalty + presence_penalty from its logit. 0 = off.
  // Range [-kMaxAbsTokenPenalty, kMaxAbsTokenPenalty] each.
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;

  // Seed of the sampler's random generator. Unset: the Sampler picks one and
  // reports it (Sampler::seed()), so any run can be repeated.
  std::optional<uint64_t> seed;

  // Most tokens to generate. -1 = no limit (until end of generation or the
  // context is full); 0 generates nothing. Range [-1, inf).
  int32_t max_tokens = -1;
  // Generation stops before the first occurrence of any of these in the
  // output text; the stop string itself is not returned. At most
  // kMaxStopStrings, each 1..kMaxStopStringBytes bytes of valid UTF-8.
  std::vector<std::string> stop;

  // How many alternatives to report with each generated token, with their
  // log-probabilities (see logprobs.h). 0 = none. Range [0, kMaxTopLogprobs].
  int32_t top_logprobs = 0;
};

// OK, or INVALID_ARGUMENT naming the first bad field, its value and the
// allowed range. NaN and infinities are rejected everywhere.
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace octo
