#include "client/sampling_flags.h"

#include "CLI/CLI.hpp"

namespace octo {

SamplingParams SamplingFlags::Resolved() const {
  SamplingParams resolved = params;
  if (seed.has_value()) resolved.seed = seed;
  return resolved;
}

void AddSamplingFlags(CLI::App* command, SamplingFlags* flags) {
  SamplingParams& p = flags->params;
  SamplingFlags::Given& given = flags->given;
  given.max_tokens = command->add_option("-n,--max-tokens", p.max_tokens, "Tokens to generate (-1: until the end)");
  given.temperature = command->add_option("--temperature,--temp", p.temperature, "0 = greedy (default 0.8)");
  given.top_k = command->add_option("--top-k", p.top_k, "0 = off (default 40)");
  given.top_p = command->add_option("--top-p", p.top_p, "1 = off (default 0.95)");
  given.min_p = command->add_option("--min-p", p.min_p, "0 = off (default 0.05)");
  given.repeat_penalty = command->add_option("--repeat-penalty", p.repeat_penalty, "1 = off");
  given.repeat_last_n = command->add_option("--repeat-last-n", p.repeat_last_n, "Penalty window (-1: all; default 64)");
  given.frequency_penalty = command->add_option("--frequency-penalty", p.frequency_penalty, "0 = off");
  given.presence_penalty = command->add_option("--presence-penalty", p.presence_penalty, "0 = off");
  given.seed = command->add_option("--seed", flags->seed, "Sampler seed (same seed, same tokens)");
  given.stop = command->add_option("--stop", p.stop, "Stop string (repeatable)");
  given.logprobs = command->add_option("--logprobs", p.top_logprobs, "Alternatives per token to report (with --json)");
}

bool WasGiven(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

}  // namespace octo
