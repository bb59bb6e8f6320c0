// The sampling flags shared by `octo-ctl run` (in-process) and `octo-gen`
// (through octod): one definition, the same names and help everywhere.
//
//   -n,--max-tokens N  --temperature,--temp T  --top-k K  --top-p P  --min-p P
//   --repeat-penalty R  --repeat-last-n N  --frequency-penalty F
//   --presence-penalty P  --seed S  --stop STR (repeatable)  --logprobs N
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/sampling/sampling_params.h"

namespace CLI {
class App;
}

namespace octo {

// What the user gave; an unset field was not on the command line (and so
// takes the defaults: SamplingParams' here, octod's over RPC).
struct SamplingFlags {
  std::optional<int32_t> max_tokens;
  std::optional<double> temperature;
  std::optional<int32_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repeat_penalty;
  std::optional<int32_t> repeat_last_n;
  std::optional<double> frequency_penalty;
  std::optional<double> presence_penalty;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int32_t logprobs = 0;

  // SamplingParams' defaults with the given flags applied.
  SamplingParams Params() const;
};

// Adds the flags to `command`; `flags` must outlive the parse.
void AddSamplingFlags(CLI::App* command, SamplingFlags* flags);

}  // namespace octo
