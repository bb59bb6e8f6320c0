// octo-ctl's commands that talk to octod:
//
//   octo-ctl status [--json] [--watch [SECONDS]]   model, residency map, memory
//                                                  vs budgets, loader, per-layer
//                                                  times, overlap, sessions
//   octo-ctl residency [--model NAME] [--pin-first N] [--pin-last N]
//                      [--budget SIZE|auto] [--vram-budget SIZE|auto]
//   octo-ctl load NAME          load a model (relative to octod's models root),
//                               beside the loaded ones
//   octo-ctl unload [NAME]      unload one (NAME may be left out while only
//                               one is loaded)
//   octo-ctl models [--json]    model directories under the models root
//   octo-ctl health [--json]    exit 0 when octod serves, 1 otherwise
//
// Each takes --socket PATH or --host HOST:PORT --token-file FILE.
// Exit codes: 0 done, 1 an error (printed to stderr), 2 bad flags.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "client/rpc_client.h"

namespace CLI {
class App;
}

namespace octo {

class DaemonCommands {
 public:
  // Adds the commands to `app`; the object must outlive the parse.
  explicit DaemonCommands(CLI::App& app);

  // Runs the command the user chose; nullopt when it was none of these.
  // `cancel` (set by a signal handler) ends --watch.
  std::optional<int> Run(const std::atomic<bool>& cancel);

 private:
  int Status(OctoClient& client, const std::atomic<bool>& cancel);
  int Residency(OctoClient& client);
  int Load(OctoClient& client);
  int Unload(OctoClient& client);
  int Models(OctoClient& client);
  int Health(OctoClient& client);
  int Sessions(OctoClient& client);

  ConnectOptions connect_;
  bool json_ = false;
  bool reset_ = false;  // residency --reset
  double watch_seconds_ = 0;
  std::optional<uint32_t> pin_first_, pin_last_;
  std::string budget_;
  std::string vram_budget_;
  std::string expert_cache_;
  std::string model_path_;  // load's and unload's NAME, residency --model
  std::string draft_model_;  // load --draft-model; empty: octod's
  std::string cache_type_k_, cache_type_v_;  // load --cache-type-k, -v; empty: octod's
  CLI::App* status_ = nullptr;
  CLI::App* residency_ = nullptr;
  CLI::App* load_ = nullptr;
  CLI::App* unload_ = nullptr;
  CLI::App* models_ = nullptr;
  CLI::App* health_ = nullptr;
  CLI::App* sessions_ = nullptr;
  CLI::App* close_session_ = nullptr;
  std::string session_name_;
};

}  // namespace octo
