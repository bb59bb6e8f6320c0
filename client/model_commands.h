// The octo-ctl commands that work on model files directly, without a
// daemon: decompose, verify, inspect. Each returns the process exit code
// (0 success, 1 failure) and prints its own messages.
#pragma once

#include <atomic>
#include <string>

namespace octo {

struct DecomposeFlags {
  std::string gguf;
  std::string out_dir;
  bool force = false;
  bool quiet = false;
};
// `cancel` is set by the SIGINT/SIGTERM handler.
int RunDecompose(const DecomposeFlags& flags, const std::atomic<bool>& cancel);

int RunVerify(const std::string& dir, bool quiet);

// `path` is a .gguf file or a model directory.
int RunInspect(const std::string& path, int max_array_elements);

}  // namespace octo
