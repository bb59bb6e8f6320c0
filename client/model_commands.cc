#include "client/model_commands.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/error_message.h"
#include "client/inspect.h"
#include "client/progress.h"
#include "storage/decompose.h"
#include "storage/verify.h"

namespace octo {

int RunDecompose(const DecomposeFlags& flags, const std::atomic<bool>& cancel) {
  Progress progress("decompose", stderr, ::isatty(STDERR_FILENO) != 0);
  DecomposeOptions options;
  options.overwrite = flags.force;
  options.cancel = &cancel;
  uint64_t done_bytes = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    done_bytes = done;
    if (!flags.quiet) progress.Update(done, total);
  };
  auto manifest = Decompose(flags.gguf, flags.out_dir, options);
  if (!manifest.ok()) {
    absl::FPrintF(stderr, "%socto-ctl decompose: %s\n", ::isatty(STDERR_FILENO) ? "\n" : "",
                  ErrorMessage(manifest.status()));
    return 1;
  }
  if (!flags.quiet) progress.Finish(done_bytes);
  const ModelConfig& c = manifest->config;
  absl::PrintF("%s: %s, %u layers, dim %u, vocab %u, %u files\n", flags.out_dir, c.architecture, c.n_layers, c.dim,
               c.vocab_size, manifest->files.size());
  return 0;
}

int RunVerify(const std::string& dir, bool quiet) {
  Progress progress("verify", stderr, ::isatty(STDERR_FILENO) != 0);
  uint64_t done_bytes = 0;
  VerifyReport report = VerifyModelDir(dir, [&](uint64_t done, uint64_t total) {
    done_bytes = done;
    if (!quiet) progress.Update(done, total);
  });
  if (!quiet && done_bytes > 0) progress.Finish(done_bytes);
  for (const VerifyProblem& p : report.problems) absl::PrintF("FAIL %s: %s\n", p.file, p.message);
  for (const std::string& note : report.notes) absl::PrintF("note: %s\n", note);
  if (report.ok()) {
    absl::PrintF("OK %s: %u files, %s checked\n", dir, report.files_ok.size(), Progress::FormatBytes(report.bytes_checked));
    return 0;
  }
  absl::PrintF("FAILED %s: %u problem(s), %u file(s) good\n", dir, report.problems.size(), report.files_ok.size());
  return 1;
}

int RunInspect(const std::string& path, int max_array_elements) {
  std::error_code ec;
  absl::Status status = std::filesystem::is_directory(path, ec) ? InspectModelDir(path, max_array_elements, std::cout)
                                                                : InspectGguf(path, max_array_elements, std::cout);
  if (!status.ok()) {
    absl::FPrintF(stderr, "octo-ctl inspect: %s\n", ErrorMessage(status));
    return 1;
  }
  return 0;
}

}  // namespace octo
