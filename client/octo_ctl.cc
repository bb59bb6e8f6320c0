// octo-ctl: control and model-file tool.
//
//   octo-ctl decompose MODEL.gguf OUT_DIR [--force]   GGUF -> layer directory
//   octo-ctl verify DIR                               sizes, headers, checksums
//   octo-ctl inspect FILE.gguf|DIR                    metadata and tensor table
//   octo-ctl run DIR "prompt" [sampling flags]        generate in this process
//   octo-ctl perplexity DIR TEXT_FILE [--ctx N]        llama.cpp-style perplexity
//   octo-ctl status|residency|load|unload|models|sessions|health  ask octod (daemon_commands.h)
#include <csignal>

#include <atomic>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "client/command_line.h"
#include "client/daemon_commands.h"
#include "client/local_commands.h"
#include "client/model_commands.h"
#include "client/sampling_flags.h"
#include "kernels/kv_types.h"

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
  CLI::App app{"octo-ctl: decompose, verify, inspect and run Octo models; control octod"};
  octo::UseOctoConventions(app, "octo-ctl");
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

  auto add_model_flags = [](CLI::App* cmd, octo::LocalModelFlags& m) {
    cmd->add_option("dir", m.dir, "Model directory (from decompose)")->required()->check(CLI::ExistingDirectory);
    cmd->add_option("-t,--threads", m.threads, "Threads (0: one per core)")->check(CLI::Range(0, 1024));
    cmd->add_option("--budget", m.budget,
                    "Bytes of layer weights to hold in memory (e.g. 2G); the rest are read from disk per pass");
    cmd->add_flag("--portable", m.portable, "Use the portable kernels, not AVX2");
    cmd->add_option("--backend", m.backend, "cpu (default), cuda, or auto: CUDA when a device is usable")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    cmd->add_option("--cache-type-k", m.cache_type_k,
                    absl::StrCat("The KV cache's keys: ", octo::kKvCacheTypeNames, " (default f16)"));
    cmd->add_option("--cache-type-v", m.cache_type_v,
                    absl::StrCat("The KV cache's values: ", octo::kKvCacheTypeNames, " (default f16)"));
  };

  octo::RunFlags run;
  CLI::App* run_cmd = app.add_subcommand("run", "Generate from a model directory in this process (no daemon)");
  add_model_flags(run_cmd, run.model);
  run_cmd->add_option("prompt", run.prompt, "Prompt text")->required();
  run_cmd->add_flag("--chat", run.chat, "Format the prompt as a user message with the chat template");
  run_cmd->add_option("--system", run.system, "System message (with --chat)");
  run_cmd->add_option("--chat-template", run.chat_template, "Template name instead of the model's (chatml, llama3, ...)");
  octo::SamplingFlags run_sampling;
  octo::AddSamplingFlags(run_cmd, &run_sampling);
  run_cmd->add_flag("--json", run.json, "Print one JSON object: tokens, logprobs, text, timings");
  run_cmd->add_flag("--tokens", run.raw_tokens, "Print token ids instead of text");
  run_cmd->add_flag("--stats", run.stats, "Print tokens/s to stderr");

  octo::PerplexityFlags ppl;
  CLI::App* ppl_cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text file (as llama-perplexity)");
  add_model_flags(ppl_cmd, ppl.model);
  ppl_cmd->add_option("text", ppl.text_file, "Text file")->required()->check(CLI::ExistingFile);
  ppl_cmd->add_option("--ctx", ppl.n_ctx, "Tokens per chunk")->check(CLI::Range(2, 1 << 20));

  octo::DaemonCommands daemon_commands(app);

  if (const std::optional<int> exit_code = octo::ParseCommandLine(app, argc, argv)) return *exit_code;

  if (*decompose_cmd) {
    InstallCancelHandler();
    return octo::RunDecompose(decompose, g_cancel);
  }
  if (*verify_cmd) return octo::RunVerify(verify_dir, verify_quiet);
  if (*inspect_cmd) return octo::RunInspect(inspect_path, max_elements);
  if (*run_cmd) {
    InstallCancelHandler();
    run.sampling = run_sampling.Params();
    run.seed = run_sampling.seed;
    return octo::RunLocalGenerate(run, g_cancel);
  }
  if (*ppl_cmd) return octo::RunPerplexity(ppl);
  InstallCancelHandler();  // ends status --watch
  return daemon_commands.Run(g_cancel).value_or(2);
}
