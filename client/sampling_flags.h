// The sampling flags shared by `octo-ctl run` (in-process) and `octo-gen`
// (through octod): one definition, the same names and help everywhere.
//
//   -n,--max-tokens N  --temperature,--temp T  --top-k K  --top-p P  --min-p P
//   --repeat-penalty R  --repeat-last-n N  --frequency-penalty F
//   --presence-penalty P  --seed S  --stop STR (repeatable)  --logprobs N
#pragma once

#include <cstdint>
#include <optional>

#include "daemon/sampling/sampling_params.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace octo {

struct SamplingFlags {
  SamplingParams params;          // octo's defaults, then what the flags set
  std::optional<uint64_t> seed;   // --seed

  // Each flag's option, to tell which were given (Option::count() > 0);
  // set by AddSamplingFlags.
  struct Given {
    CLI::Option* max_tokens = nullptr;
    CLI::Option* temperature = nullptr;
    CLI::Option* top_k = nullptr;
    CLI::Option* top_p = nullptr;
    CLI::Option* min_p = nullptr;
    CLI::Option* repeat_penalty = nullptr;
    CLI::Option* repeat_last_n = nullptr;
    CLI::Option* frequency_penalty = nullptr;
    CLI::Option* presence_penalty = nullptr;
    CLI::Option* seed = nullptr;
    CLI::Option* stop = nullptr;
    CLI::Option* logprobs = nullptr;
  } given;

  // params with the seed, for running in this process.
  SamplingParams Resolved() const;
};

// Adds the flags to `command`; `flags` must outlive the parse.
void AddSamplingFlags(CLI::App* command, SamplingFlags* flags);

// True when the flag behind `option` appeared on the command line.
bool WasGiven(const CLI::Option* option);

}  // namespace octo
