// octod: the Octo daemon. Serves octo.v1.Octo (proto/octo.proto) over a
// unix socket, and over TCP with a bearer token when --listen is given.
//
//   octod --models-root DIR [--model NAME] [--config FILE] [--socket PATH]
//         [--listen HOST:PORT --token-file FILE] [--http-listen HOST:PORT]
//         [runtime settings...]
//
// --http-listen adds the OpenAI- and Ollama-compatible HTTP API (daemon/http).
//
// Every setting is a flag and a config-file key (config.h; `octod --help`).
// Under systemd (Type=notify) it says READY=1 once it serves and feeds the
// unit's watchdog while its forward passes advance (systemd_notify.h).
// SIGTERM or SIGINT: stop taking calls, cancel running generations (their
// clients get finish_reason "cancelled"), wait up to kShutdownGrace for
// calls to end, remove the socket, exit 0. A second signal ends it at once.
// Exit codes: 0 after a clean stop, 1 when it could not start, 2 for bad
// settings.
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "client/command_line.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/runtime.h"
#include "daemon/http/http_api.h"
#include "daemon/http/tls_context.h"
#include "daemon/server/config.h"
#include "daemon/server/endpoint.h"
#include "daemon/server/service.h"
#include "daemon/server/socket_file.h"
#include "daemon/server/systemd_notify.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

constexpr const char* kVersion = kOctoVersion;
constexpr std::chrono::seconds kShutdownGrace{10};

// One line per event on stderr, with the local time.
void Log(absl::string_view line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm local = {};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);
  std::fprintf(stderr, "%s octod: %.*s\n", stamp, static_cast<int>(line.size()), line.data());
}

void LogModel(Runtime& runtime, const RuntimeOptions& options) {
  const RuntimeReport report = runtime.Report();
  if (!report.model.has_value()) {
    Log("no model loaded (octo-ctl load NAME loads one)");
    return;
  }
  const ModelSummary& model = *report.model;
  Log(absl::StrFormat("serving %s: %u layers resident, %u streamed; backend %s", model.path,
                      report.residency.resident_layers, report.residency.streamed_layers, report.backend));
  const ExpertReport& experts = report.residency.experts;
  if (experts.present) {
    Log(absl::StrFormat("experts: %u two-phase layers stream their routed experts; expert cache %s%s",
                        experts.two_phase_layers, FormatByteSize(experts.cache_capacity_bytes),
                        options.expert_cache_bytes == kAutoExpertCache ? " (auto)" : ""));
  } else if (!experts.not_selective.empty()) {
    Log(absl::StrCat("experts: whole layers (", experts.not_selective, ")"));
  }
  const SpeculationReport& spec = report.speculation;
  if (!spec.draft_model.empty()) {
    const SpeculationSettings& s = spec.settings;
    Log(absl::StrFormat("speculative decoding: draft model %s (%s, resident), up to %d tokens per session per pass%s",
                        spec.draft_model, FormatByteSize(spec.draft_bytes), s.draft_max,
                        s.tree_nodes > 0 ? absl::StrFormat(", greedy trees of %d tokens, %d branches",
                                                           s.tree_nodes, s.tree_branches)
                                         : std::string()));
  }
}

// Feeds systemd's watchdog (WATCHDOG=1 every half timeout) while the
// runtime's passes advance; a pass standing still for the whole timeout
// (a deadlock, a wait nothing ends) stops the feeding, and systemd restarts
// octod. Runs until `stop` is notified.
void FeedWatchdog(const SystemdNotifier& systemd, Runtime& runtime, absl::Notification& stop) {
  const absl::Duration timeout = *systemd.watchdog_timeout();
  bool starving = false;
  do {
    const absl::Duration silence = runtime.PassSilence();
    if (silence < timeout) {
      systemd.Send("WATCHDOG=1");
      starving = false;
    } else if (!starving) {
      Log(absl::StrCat("watchdog: the forward pass has made no progress for ", absl::FormatDuration(silence),
                       "; systemd's watchdog is no longer fed"));
      starving = true;
    }
  } while (!stop.WaitForNotificationWithTimeout(timeout / 2));
}

// gRPC over TCP: plain, or TLS with the configured files (mutual with a
// client CA). INVALID_ARGUMENT naming the file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(const OctodConfig& config) {
  if (!config.tls.has_value()) return grpc::InsecureServerCredentials();
  auto read = [](const char* key, const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path, std::ios::binary);
    std::stringstream contents;
    if (!(in && contents << in.rdbuf())) return absl::InvalidArgumentError(absl::StrCat(key, ": cannot read ", path));
    return contents.str();
  };
  const TlsFiles& files = *config.tls;
  grpc::SslServerCredentialsOptions ssl(files.client_ca.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  OCTO_ASSIGN_OR_RETURN(std::string cert, read("tls-cert", files.cert));
  OCTO_ASSIGN_OR_RETURN(std::string key, read("tls-key", files.key));
  ssl.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
  if (!files.client_ca.empty()) {
    OCTO_ASSIGN_OR_RETURN(ssl.pem_root_certs, read("tls-client-ca", files.client_ca));
  }
  return grpc::SslServerCredentials(ssl);
}

// The backend asked for (--backend); the "model loaded" line says which one runs.
void LogBackendAsked(const RuntimeOptions& options) {
  if (options.backend == "cpu") {
    Log("backend asked: cpu");
    return;
  }
  const std::string vram = absl::StrFormat(
      "vram budget %s, %u staging buffers",
      options.vram_budget_bytes == 0 ? std::string("auto") : FormatByteSize(options.vram_budget_bytes),
      options.staging_buffers);
  if (options.backend == "cuda") {
    Log(absl::StrFormat("backend asked: cuda, gpu %d; %s", options.gpu, vram));
  } else {
    Log(absl::StrFormat("backend asked: %s (cuda gpu %d when usable, else the cpu); %s", options.backend,
                        options.gpu, vram));
  }
}

int Serve(const OctodConfig& config, const sigset_t& stop_signals) {
  bool removed_stale = false;
  if (absl::Status ready = PrepareSocketPath(config.socket_path, &removed_stale); !ready.ok()) {
    Log(ready.message());
    return 1;
  }
  if (removed_stale) Log(absl::StrCat("removed a stale socket at ", config.socket_path));

  // TLS files are checked before the model loads: a typo costs no wait.
  for (const std::string& warning : config.warnings) Log(absl::StrCat("warning: ", warning));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tcp_credentials = TcpCredentials(config);
  std::shared_ptr<TlsContext> https;
  if (tcp_credentials.ok() && config.tls.has_value()) {
    // OpenSSL reads the files now, for both listeners: a key that is not the
    // certificate's is named here rather than as a listener that will not start.
    absl::StatusOr<std::shared_ptr<TlsContext>> created = TlsContext::Create(*config.tls);
    if (created.ok()) {
      if (config.http.has_value()) https = *std::move(created);
    } else {
      tcp_credentials = created.status();
    }
  }
  if (!tcp_credentials.ok()) {
    Log(absl::StrCat("cannot start: ", tcp_credentials.status().message()));
    return 1;
  }

  LogBackendAsked(config.runtime);
  RuntimeOptions runtime_options = config.runtime;
  runtime_options.log = Log;
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(runtime_options);
  if (!runtime.ok()) {
    Log(absl::StrCat("cannot start: ", runtime.status().message()));
    return 1;
  }
  LogModel(**runtime, config.runtime);

  OctoService service(**runtime, ServiceOptions{.version = kVersion, .credentials = config.credentials, .log = Log});
  grpc::ServerBuilder builder;
  builder.AddListeningPort(UnixTarget(config.socket_path), grpc::InsecureServerCredentials());
  int tcp_port = 0;
  if (!config.listen.empty()) builder.AddListeningPort(config.listen, *tcp_credentials, &tcp_port);
  builder.RegisterService(&service);
  // The socket file is created owner-only from the start (no window in
  // which another user could connect), and chmod'ed again to be sure.
  const mode_t old_umask = ::umask(077);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ::umask(old_umask);
  if (server == nullptr || (!config.listen.empty() && tcp_port == 0)) {
    Log(absl::StrCat("cannot listen on ", UnixTarget(config.socket_path),
                     config.listen.empty() ? "" : absl::StrCat(" and ", config.listen)));
    if (server != nullptr) server->Shutdown();
    (*runtime)->Shutdown();
    return 1;
  }
  ::chmod(config.socket_path.c_str(), 0600);
  Log(absl::StrCat("listening on ", UnixTarget(config.socket_path)));
  if (!config.listen.empty()) {
    Log(absl::StrCat("listening on ", config.listen, " (TCP", config.tls.has_value() ? " over TLS" : "",
                     config.tls.has_value() && !config.tls->client_ca.empty() ? ", client certificates required" : "",
                     ", bearer token required)"));
  }
  std::unique_ptr<HttpServer> http;
  if (config.http.has_value()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> started = StartHttpApi(
        **runtime, HttpApiOptions{.host = config.http->host, .port = config.http->port, .credentials = config.credentials,
                                  .tls = https, .version = kVersion, .cors_origins = config.http_cors_origins,
                                  .metrics = config.http_metrics});
    if (!started.ok()) {
      Log(absl::StrCat("cannot start: ", started.status().message()));
      server->Shutdown();
      (*runtime)->Shutdown();
      return 1;
    }
    http = *std::move(started);
    // Tests and scripts that ask for port 0 read the port from this line.
    Log(absl::StrCat("http: listening on ", config.http->host, ":", http->port(), " (OpenAI /v1, Ollama /api",
                     https != nullptr ? "; TLS" : "",
                     config.credentials.any() ? "; bearer token required)" : ")"));
  }

  const SystemdNotifier systemd = SystemdNotifier::FromEnvironment();
  systemd.Send(absl::StrCat("READY=1\nSTATUS=serving on ", UnixTarget(config.socket_path)));
  absl::Notification stop_watchdog;
  std::thread watchdog;
  if (systemd.watchdog_timeout().has_value()) {
    watchdog = std::thread([&] { FeedWatchdog(systemd, **runtime, stop_watchdog); });
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(absl::StrCat("received ", strsignal(signal_number), ": shutting down"));
  systemd.Send("STOPPING=1");
  stop_watchdog.Notify();
  if (watchdog.joinable()) watchdog.join();
  // A second signal takes its default action: the process ends at once.
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);

  (*runtime)->Shutdown();  // refuses new jobs, cancels running ones: streams finish
  if (http != nullptr) http->Stop();  // wakes idle connections; handlers have their jobs' ends
  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server.reset();
  ::unlink(config.socket_path.c_str());
  Log("stopped");
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) {
  // Stop signals are taken by sigwait in Serve; blocked here, before any
  // thread exists, so every thread gRPC and the runtime start inherits it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"octod: the Octo daemon (serves octo-gen and octo-ctl)"};
  octo::UseOctoConventions(app, "octod");
  octo::OctodFlags flags;
  octo::AddOctodFlags(app, flags);
  if (const std::optional<int> exit_code = octo::ParseCommandLine(app, argc, argv)) return *exit_code;
  absl::StatusOr<octo::OctodConfig> config = octo::ValidateOctodFlags(flags);
  if (!config.ok()) {
    std::fprintf(stderr, "octod: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  return octo::Serve(*config, stop_signals);
}
