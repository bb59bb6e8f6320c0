// OctoClient: octo-gen's and octo-ctl's connection to octod. Wraps the
// generated stub: unary calls return StatusOr, streams hand each message to
// a callback, errors keep their gRPC code as an absl code (status_map.h).
//
// Transport: the unix socket (default: endpoint.h's DefaultClientSocketPath),
// or TCP with --host HOST:PORT, which needs --token-file (sent as
// `authorization: Bearer <token>` on every call).
//
// Threads: one call at a time from one thread; Cancel() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "octo.grpc.pb.h"

namespace CLI {
class App;
}

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace octo {

struct ConnectOptions {
  std::string socket;       // empty: the default socket path
  std::string host;         // "host:port": TCP instead of the socket
  std::string token_file;   // TCP: the file holding the bearer token
  // TCP over TLS: the CA octod's certificate must chain to (PEM); with
  // mutual TLS also this client's certificate and key.
  std::string tls_ca, tls_cert, tls_key;
  std::chrono::milliseconds connect_timeout{3000};
};

// --socket PATH, --host HOST:PORT, --token-file FILE, --tls-ca FILE,
// --tls-cert FILE, --tls-key FILE.
void AddConnectFlags(CLI::App* command, ConnectOptions* options);

class OctoClient {
 public:
  // Opens a channel and waits up to connect_timeout for octod to answer.
  // UNAVAILABLE "cannot reach octod at unix:/path: is it running?" when it
  // does not; INVALID_ARGUMENT / NOT_FOUND for a bad or unreadable token file.
  static absl::StatusOr<std::unique_ptr<OctoClient>> Connect(const ConnectOptions& options);

  // "unix:/path" or "host:port".
  const std::string& target() const { return target_; }

  absl::StatusOr<v1::HealthResponse> Health();
  absl::StatusOr<v1::GetStatusResponse> GetStatus();
  // `name`: the caller's session of that name, opened when missing.
  // `model`: the model it runs (empty: octod's default).
  absl::StatusOr<v1::CreateSessionResponse> CreateSession(uint32_t context_length, const std::string& name = "",
                                                          const std::string& model = "");
  // Runs even after Cancel(), so a cancelled conversation can still clean up.
  absl::Status CloseSession(const std::string& session_id);
  absl::StatusOr<v1::ResidencyStatus> SetResidency(const v1::SetResidencyRequest& request);
  // draft_model: its draft for speculative decoding (unset: octod's; "none": none).
  absl::StatusOr<v1::ModelInfo> LoadModel(const std::string& path,
                                          const std::optional<std::string>& draft_model = std::nullopt);
  absl::StatusOr<v1::ModelInfo> LoadModel(const v1::LoadModelRequest& request);
  absl::Status UnloadModel(const std::string& path = "");  // empty: the only loaded model
  absl::StatusOr<v1::ListModelsResponse> ListModels();
  absl::StatusOr<v1::EmbedResponse> Embed(const v1::EmbedRequest& request);

  // Runs the stream to its end: on_message gets every message in order;
  // the result is the call's status (CANCELLED after Cancel()).
  using MessageCallback = std::function<void(const v1::GenerateResponse&)>;
  absl::Status Generate(const v1::GenerateRequest& request, const MessageCallback& on_message);
  absl::Status Chat(const v1::ChatRequest& request, const MessageCallback& on_message);

  // Cancels the call in progress, and every later one (they return
  // CANCELLED at once). Safe from any thread, e.g. a signal watcher.
  void Cancel();
  bool cancelled();
  // Cancels only the call in progress (an interactive chat's reply); later
  // calls run. False when no call was in progress.
  bool StopCall();

 private:
  OctoClient(std::string target, std::shared_ptr<grpc::Channel> channel, std::optional<std::string> token);

  // A context with the token attached, registered so Cancel() reaches it;
  // nullptr once cancelled, unless `cleanup`.
  std::unique_ptr<grpc::ClientContext> Begin(bool cleanup = false);
  void End();
  template <typename Response, typename Request, typename Method>
  absl::StatusOr<Response> Unary(Method method, const Request& request, bool cleanup = false);
  template <typename Request, typename Method>
  absl::Status Stream(Method method, const Request& request, const MessageCallback& on_message);
  absl::Status Error(const grpc::Status& status) const;

  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Octo::Stub> stub_;
  const std::optional<std::string> token_;
  absl::Mutex mu_;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace octo
