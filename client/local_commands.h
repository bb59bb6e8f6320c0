// octo-ctl commands that run a model in this process, without a daemon: for
// trying a model right after decompose, checking it against llama.cpp, and
// measuring perplexity. The daemon (octod) serves the same engine to clients.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/sampling/sampling_params.h"

namespace octo {

struct LocalModelFlags {
  std::string dir;                 // layer directory
  int threads = 0;                 // 0: one per core
  std::string budget;              // layer byte budget ("2G", "512M", bytes) or "" for all resident
  bool portable = false;           // no AVX2 kernels
  std::string backend = "cpu";     // cpu | cuda | auto (as octod's --backend)
  std::string cache_type_k = "f16";  // the KV cache's types (as octod's --cache-type-k, -v)
  std::string cache_type_v = "f16";
};

struct RunFlags {
  LocalModelFlags model;
  std::string prompt;
  bool chat = false;               // wrap the prompt as one user message
  std::string system;              // system message in chat mode
  std::string chat_template;       // a template name instead of the model's
  bool raw_tokens = false;         // print token ids instead of text
  bool json = false;               // one JSON object at the end: tokens, text, logprobs, stats
  bool stats = false;              // tokens/s on stderr
  SamplingParams sampling;
  std::optional<uint64_t> seed;
};

// Streams the generated text to stdout. Exit code 0, 1 on an error
// (printed to stderr), 2 on bad flags.
int RunLocalGenerate(RunFlags flags, const std::atomic<bool>& cancel);

struct PerplexityFlags {
  LocalModelFlags model;
  std::string text_file;
  int n_ctx = 512;
};

int RunPerplexity(const PerplexityFlags& flags);

}  // namespace octo
