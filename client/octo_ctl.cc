// octo-ctl: control and model-file tool.
//
//   octo-ctl decompose MODEL.gguf OUT_DIR [--force]   GGUF -> layer directory
//   octo-ctl verify DIR                               sizes, headers, checksums
//   octo-ctl inspect FILE.gguf|DIR                    metadata and tensor table
#include <csignal>

#include <atomic>

#include "CLI/CLI.hpp"
#include "client/model_commands.h"

namespace {

// Set by SIGINT/SIGTERM; long commands poll it and clean up after themselves.
std::atomic<bool> g_cancel{false};

void OnSignal(int) { g_cancel.store(true); }

void InstallCancelHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"octo-ctl: decompose, verify and inspect Octo models"};
  app.require_subcommand(1);

  octo::DecomposeFlags decompose;
  CLI::App* decompose_cmd = app.add_subcommand("decompose", "Split a GGUF model into a layer directory");
  decompose_cmd->add_option("model", decompose.gguf, "GGUF file")->required()->check(CLI::ExistingFile);
  decompose_cmd->add_option("out_dir", decompose.out_dir, "Directory to create")->required();
  decompose_cmd->add_flag("-f,--force", decompose.force, "Replace an existing model directory");
  decompose_cmd->add_flag("-q,--quiet", decompose.quiet, "No progress output");

  std::string verify_dir;
  bool verify_quiet = false;
  CLI::App* verify_cmd = app.add_subcommand("verify", "Check a layer directory's files against its manifest");
  verify_cmd->add_option("dir", verify_dir, "Model directory")->required()->check(CLI::ExistingDirectory);
  verify_cmd->add_flag("-q,--quiet", verify_quiet, "No progress output");

  std::string inspect_path;
  int max_elements = 8;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Show the metadata and tensors of a GGUF file or model directory");
  inspect_cmd->add_option("path", inspect_path, "GGUF file or model directory")->required()->check(CLI::ExistingPath);
  inspect_cmd->add_option("--array-elements", max_elements, "Array elements to show")
      ->check(CLI::Range(0, 1000000));

  CLI11_PARSE(app, argc, argv);

  if (*decompose_cmd) {
    InstallCancelHandler();
    return octo::RunDecompose(decompose, g_cancel);
  }
  if (*verify_cmd) return octo::RunVerify(verify_dir, verify_quiet);
  if (*inspect_cmd) return octo::RunInspect(inspect_path, max_elements);
  return 2;
}
