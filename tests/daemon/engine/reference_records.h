// The llama.cpp reference outputs in ../shared/reference/llamacpp-greedy.jsonl
// (see the README beside it): per model and prompt, the prompt's tokens, 64
// greedy tokens and the top-5 log-probabilities at each generated position.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace octo::testing {

struct ReferenceRecord {
  std::string model;   // relative to ../shared/models
  std::string prompt;
  std::vector<int32_t> prompt_tokens;  // BOS included
  std::vector<int32_t> tokens;         // generated, greedy
  std::string text;                    // their text
  // For each generated position, the 5 most likely (token, logprob).
  std::vector<std::vector<std::pair<int32_t, double>>> top5;
};

// Every record of `file` (under ../shared); an empty vector (and a test
// failure) if it cannot be read. The others beside the default:
// llamacpp-greedy-bitnet.jsonl, llamacpp-greedy-lowbit.jsonl.
std::vector<ReferenceRecord> LoadReferenceRecords(const std::string& file = "reference/llamacpp-greedy.jsonl");

// ../shared/models/<model> decomposed into a layer directory, once per test
// process (later calls return the same directory). Fails the test on error.
std::string DecomposedSharedModel(const std::string& model);

}  // namespace octo::testing
