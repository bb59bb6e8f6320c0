#include "client/sampling_flags.h"

#include "CLI/CLI.hpp"

namespace octo {

SamplingParams SamplingFlags::Params() const {
  SamplingParams params;
  params.max_tokens = max_tokens.value_or(params.max_tokens);
  params.temperature = temperature.value_or(params.temperature);
  params.top_k = top_k.value_or(params.top_k);
  params.top_p = top_p.value_or(params.top_p);
  params.min_p = min_p.value_or(params.min_p);
  params.repeat_penalty = repeat_penalty.value_or(params.repeat_penalty);
  params.repeat_last_n = repeat_last_n.value_or(params.repeat_last_n);
  params.frequency_penalty = frequency_penalty.value_or(params.frequency_penalty);
  params.presence_penalty = presence_penalty.value_or(params.presence_penalty);
  params.seed = seed;
  params.stop = stop;
  params.top_logprobs = logprobs;
  return params;
}

void AddSamplingFlags(CLI::App* command, SamplingFlags* flags) {
  command->add_option("-n,--max-tokens", flags->max_tokens, "Tokens to generate (-1: until the end)");
  command->add_option("--temperature,--temp", flags->temperature, "0 = greedy (default 0.8)");
  command->add_option("--top-k", flags->top_k, "0 = off (default 40)");
  command->add_option("--top-p", flags->top_p, "1 = off (default 0.95)");
  command->add_option("--min-p", flags->min_p, "0 = off (default 0.05)");
  command->add_option("--repeat-penalty", flags->repeat_penalty, "1 = off");
  command->add_option("--repeat-last-n", flags->repeat_last_n, "Penalty window (-1: all; default 64)");
  command->add_option("--frequency-penalty", flags->frequency_penalty, "0 = off");
  command->add_option("--presence-penalty", flags->presence_penalty, "0 = off");
  command->add_option("--seed", flags->seed, "Sampler seed (same seed, same tokens)");
  // One string per --stop, so `--stop X "prompt"` leaves the prompt alone.
  command->add_option("--stop", flags->stop, "Stop string (repeatable)")->allow_extra_args(false);
  command->add_option("--logprobs", flags->logprobs, "Alternatives per token to report (with --json)");
}

}  // namespace octo
