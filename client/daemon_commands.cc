#include "client/daemon_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/error_message.h"
#include "client/status_format.h"
#include "kernels/kv_types.h"
#include "storage/byte_size.h"

namespace octo {
namespace {

// The shortest --watch interval: status is cheap, but not free for octod.
constexpr double kMinWatchSeconds = 0.1;

int Fail(const absl::Status& status) {
  absl::FPrintF(stderr, "octo-ctl: %s\n", ErrorMessage(status));
  return 1;
}

// Sleeps `seconds`, waking early when `cancel` is set.
void SleepUnlessCancelled(double seconds, const std::atomic<bool>& cancel) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!cancel.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

DaemonCommands::DaemonCommands(CLI::App& app) {
  status_ = app.add_subcommand("status", "What octod runs: model, residency, memory, loader, layer times, sessions");
  status_->add_flag("--json", json_, "The GetStatus reply as JSON (one object per refresh)");
  status_->add_option("--watch", watch_seconds_, "Refresh every SECONDS (default 2) until Ctrl-C")
      ->expected(0, 1)
      ->default_str("2");

  residency_ = app.add_subcommand("residency", "Change what stays resident (between passes; sessions continue)");
  residency_->add_option("--pin-first", pin_first_, "First layers always resident");
  residency_->add_option("--pin-last", pin_last_, "Last layers always resident");
  residency_->add_option("--budget", budget_, "Layer memory: SIZE (e.g. 4GiB) or auto");
  residency_->add_option("--vram-budget", vram_budget_,
                         "CUDA: VRAM tier (device layers + staging buffers): SIZE (e.g. 60GiB) or auto");
  residency_->add_option("--expert-cache", expert_cache_,
                         "MoE models streaming their experts: experts kept in memory, out of the layer budget: "
                         "SIZE (e.g. 8GiB), 0 (none) or auto");
  residency_->add_flag("--reset", reset_,
                       "Start from octod's configured settings (other flags apply on top); settings changed at "
                       "run time hold for that model only");
  residency_->add_option("--model", model_path_, "The loaded model to change (default: the default model)");
  residency_->add_flag("--json", json_, "The plan in force as JSON");

  load_ = app.add_subcommand("load", "Load a model: a layer directory or GGUF file under octod's models root");
  load_->add_option("path", model_path_, "Its name (path relative to the models root)")->required();
  load_->add_option("--draft-model", draft_model_,
                    "Its draft model for speculative decoding (the same vocabulary; none: no draft; default: "
                    "octod's --draft-model)");
  load_->add_option("--cache-type-k", cache_type_k_,
                    absl::StrCat("Its sessions' KV cache keys: ", kKvCacheTypeNames, " (default: octod's)"));
  load_->add_option("--cache-type-v", cache_type_v_,
                    absl::StrCat("Its sessions' KV cache values: ", kKvCacheTypeNames, " (default: octod's)"));
  load_->add_flag("--json", json_, "The model as JSON");

  unload_ = app.add_subcommand("unload", "Unload a model, ending its sessions");
  unload_->add_option("name", model_path_, "The loaded model (may be left out while only one is loaded)");

  models_ = app.add_subcommand("models", "List the model directories under octod's models root");
  models_->add_flag("--json", json_, "The list as JSON");

  sessions_ = app.add_subcommand("sessions", "List your sessions (every one with the admin credential)");
  sessions_->add_flag("--json", json_, "The sessions as JSON");
  close_session_ = sessions_->add_subcommand("close", "Close a session, freeing its KV cache");
  close_session_->add_option("name", session_name_, "The session's name or id")->required();
  close_session_->fallthrough();

  health_ = app.add_subcommand("health", "Is octod serving? (exit 0 yes, 1 no)");
  health_->add_flag("--json", json_, "The reply as JSON");

  // Before or after the command: `octo-ctl --socket S status` or `octo-ctl status --socket S`.
  AddConnectFlags(&app, &connect_);
  for (CLI::App* command : {status_, residency_, load_, unload_, models_, sessions_, health_}) command->fallthrough();
}

std::optional<int> DaemonCommands::Run(const std::atomic<bool>& cancel) {
  CLI::App* chosen = nullptr;
  for (CLI::App* command : {status_, residency_, load_, unload_, models_, sessions_, health_}) {
    if (command->parsed()) chosen = command;
  }
  if (chosen == nullptr) return std::nullopt;
  absl::StatusOr<std::unique_ptr<OctoClient>> client = OctoClient::Connect(connect_);
  if (!client.ok()) {
    absl::FPrintF(stderr, "octo-ctl: %s\n", client.status().message());
    return 1;
  }
  if (chosen == status_) return Status(**client, cancel);
  if (chosen == residency_) return Residency(**client);
  if (chosen == load_) return Load(**client);
  if (chosen == unload_) return Unload(**client);
  if (chosen == models_) return Models(**client);
  if (chosen == sessions_) return Sessions(**client);
  return Health(**client);
}

int DaemonCommands::Status(OctoClient& client, const std::atomic<bool>& cancel) {
  const bool watch = status_->get_option("--watch")->count() > 0;
  if (watch && watch_seconds_ < kMinWatchSeconds) {
    absl::FPrintF(stderr, "octo-ctl: --watch takes an interval of at least %.1f seconds\n", kMinWatchSeconds);
    return 2;
  }
  const bool clear_screen = watch && !json_ && ::isatty(STDOUT_FILENO);
  do {
    absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
    if (!status.ok()) return Fail(status.status());
    if (clear_screen) std::fputs("\033[H\033[2J", stdout);
    std::fputs((json_ ? ToJson(*status) + "\n" : FormatStatus(*status)).c_str(), stdout);
    std::fflush(stdout);
    if (watch) SleepUnlessCancelled(watch_seconds_, cancel);
  } while (watch && !cancel.load());
  return 0;
}

int DaemonCommands::Sessions(OctoClient& client) {
  if (close_session_->parsed()) {
    if (absl::Status closed = client.CloseSession(session_name_); !closed.ok()) return Fail(closed);
    absl::PrintF("closed session %s\n", session_name_);
    return 0;
  }
  absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
  if (!status.ok()) return Fail(status.status());
  if (json_) {
    v1::GetStatusResponse sessions;
    *sessions.mutable_sessions() = status->sessions();
    sessions.set_other_sessions(status->other_sessions());
    std::fputs((ToJson(sessions) + "\n").c_str(), stdout);
  } else {
    std::fputs(FormatSessions(*status).c_str(), stdout);
  }
  return 0;
}

int DaemonCommands::Residency(OctoClient& client) {
  v1::SetResidencyRequest request;
  request.set_reset(reset_);
  request.set_model(model_path_);
  if (pin_first_.has_value()) request.set_pin_first(*pin_first_);
  if (pin_last_.has_value()) request.set_pin_last(*pin_last_);
  if (budget_ == "auto") {
    request.set_auto_budget(true);
  } else if (!budget_.empty()) {
    const std::optional<uint64_t> bytes = ParseByteSize(budget_);
    if (!bytes.has_value() || *bytes == 0) {
      absl::FPrintF(stderr, "octo-ctl: --budget '%s' is not a size such as 4GiB or 512M, or auto\n", budget_);
      return 2;
    }
    request.set_budget_bytes(*bytes);
    request.set_auto_budget(false);
  }
  if (vram_budget_ == "auto") {
    request.set_vram_auto(true);
  } else if (!vram_budget_.empty()) {
    const std::optional<uint64_t> bytes = ParseByteSize(vram_budget_);
    if (!bytes.has_value() || *bytes == 0) {
      absl::FPrintF(stderr, "octo-ctl: --vram-budget '%s' is not a size such as 60GiB or 512M, or auto\n",
                    vram_budget_);
      return 2;
    }
    request.set_vram_budget_bytes(*bytes);
    request.set_vram_auto(false);
  }
  if (expert_cache_ == "auto") {
    request.set_expert_cache_auto(true);
  } else if (!expert_cache_.empty()) {
    // 0 is a size here: no expert cache.
    const std::optional<uint64_t> bytes = ParseByteSize(expert_cache_);
    if (!bytes.has_value()) {
      absl::FPrintF(stderr, "octo-ctl: --expert-cache '%s' is not a size such as 8GiB or 512M, 0 or auto\n",
                    expert_cache_);
      return 2;
    }
    request.set_expert_cache_bytes(*bytes);
    request.set_expert_cache_auto(false);
  }
  absl::StatusOr<v1::ResidencyStatus> residency = client.SetResidency(request);
  if (!residency.ok()) return Fail(residency.status());
  std::fputs((json_ ? ToJson(*residency) + "\n" : FormatResidency(*residency)).c_str(), stdout);
  return 0;
}

int DaemonCommands::Load(OctoClient& client) {
  v1::LoadModelRequest request;
  request.set_path(model_path_);
  if (!draft_model_.empty()) request.set_draft_model(draft_model_);
  if (!cache_type_k_.empty()) request.set_cache_type_k(cache_type_k_);
  if (!cache_type_v_.empty()) request.set_cache_type_v(cache_type_v_);
  absl::StatusOr<v1::ModelInfo> model = client.LoadModel(request);
  if (!model.ok()) return Fail(model.status());
  if (json_) {
    std::printf("%s\n", ToJson(*model).c_str());
  } else {
    absl::PrintF("loaded %s: %s, %u layers, %s%s\n", model->path(), model->architecture(), model->n_layers(),
                 FormatByteSize(model->total_bytes()),
                 model->draft_model().empty() ? "" : "; draft model " + model->draft_model());
  }
  return 0;
}

int DaemonCommands::Unload(OctoClient& client) {
  if (absl::Status unloaded = client.UnloadModel(model_path_); !unloaded.ok()) return Fail(unloaded);
  absl::PrintF("unloaded%s\n", model_path_.empty() ? "" : " " + model_path_);
  return 0;
}

int DaemonCommands::Models(OctoClient& client) {
  absl::StatusOr<v1::ListModelsResponse> models = client.ListModels();
  if (!models.ok()) return Fail(models.status());
  std::fputs((json_ ? ToJson(*models) + "\n" : FormatModels(*models)).c_str(), stdout);
  return 0;
}

int DaemonCommands::Health(OctoClient& client) {
  absl::StatusOr<v1::HealthResponse> health = client.Health();
  if (!health.ok()) return Fail(health.status());
  if (json_) {
    std::printf("%s\n", ToJson(*health).c_str());
  } else {
    absl::PrintF("%s; model %s; loader %s\n", health->serving() ? "serving" : "not serving (shutting down)",
                 health->model_loaded() ? "loaded" : "none", health->loader_running() ? "running" : "not running");
  }
  return health->serving() ? 0 : 1;
}

}  // namespace octo
