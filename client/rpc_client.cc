#include "client/rpc_client.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/server/endpoint.h"
#include "daemon/server/status_map.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace octo {
namespace {

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the token file ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(contents.str()));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("the token file ", path, " is empty"));
  return token;
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// Plain for the unix socket and for TCP without --tls-ca; TLS otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const ConnectOptions& options) {
  if (options.host.empty() || options.tls_ca.empty()) {
    if (!options.tls_ca.empty() || !options.tls_cert.empty()) {
      return absl::InvalidArgumentError("--tls-ca and --tls-cert are for --host (the unix socket needs no TLS)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem("--tls-ca", options.tls_ca);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls-cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls-key", options.tls_key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

absl::Status Unreachable(const std::string& target) {
  return absl::UnavailableError(absl::StrCat("cannot reach octod at ", target, ": is it running?"));
}

}  // namespace

void AddConnectFlags(CLI::App* command, ConnectOptions* options) {
  command->add_option("--socket", options->socket, "octod's unix socket (default: the one octod uses)")
      ->envname("OCTO_SOCKET");
  command->add_option("--host", options->host, "octod over TCP, HOST:PORT (needs --token-file)")->envname("OCTO_HOST");
  command->add_option("--token-file", options->token_file, "File holding the bearer token for --host")
      ->envname("OCTO_TOKEN_FILE");
  command->add_option("--tls-ca", options->tls_ca, "--host over TLS: the CA octod's certificate is checked against (PEM)");
  command->add_option("--tls-cert", options->tls_cert, "--host over mutual TLS: this client's certificate (PEM)");
  command->add_option("--tls-key", options->tls_key, "--host over mutual TLS: this client's private key (PEM)");
}

OctoClient::OctoClient(std::string target, std::shared_ptr<grpc::Channel> channel, std::optional<std::string> token)
    : target_(std::move(target)),
      channel_(std::move(channel)),
      stub_(v1::Octo::NewStub(channel_)),
      token_(std::move(token)) {}

absl::StatusOr<std::unique_ptr<OctoClient>> OctoClient::Connect(const ConnectOptions& options) {
  std::string target;
  std::optional<std::string> token;
  if (!options.host.empty()) {
    if (options.token_file.empty()) {
      return absl::InvalidArgumentError("--host needs --token-file (octod takes no TCP call without a token)");
    }
    absl::StatusOr<std::string> read = ReadToken(options.token_file);
    if (!read.ok()) return read.status();
    token = *std::move(read);
    target = options.host;
  } else {
    const std::string path = options.socket.empty() ? DefaultClientSocketPath() : options.socket;
    target = UnixTarget(path);
    // Fail fast, with the same message, when nothing listens there.
    if (!UnixSocketAnswers(path)) return Unreachable(target);
  }
  grpc::ChannelArguments arguments;
  // A generation can be quiet for long (a big prompt's prefill); keep TCP
  // connections checked rather than silently dropped by middleboxes.
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ChannelCredentialsFor(options);
  if (!credentials.ok()) return credentials.status();
  auto channel = grpc::CreateCustomChannel(target, *credentials, arguments);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + options.connect_timeout)) {
    return Unreachable(target);
  }
  return std::unique_ptr<OctoClient>(new OctoClient(target, std::move(channel), std::move(token)));
}

void OctoClient::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->TryCancel();
}

bool OctoClient::StopCall() {
  absl::MutexLock lock(&mu_);
  if (active_ == nullptr) return false;
  active_->TryCancel();
  return true;
}

bool OctoClient::cancelled() {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

std::unique_ptr<grpc::ClientContext> OctoClient::Begin(bool cleanup) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (token_.has_value()) context->AddMetadata("authorization", absl::StrCat("Bearer ", *token_));
  absl::MutexLock lock(&mu_);
  if (cancelled_ && !cleanup) return nullptr;
  active_ = context.get();
  return context;
}

void OctoClient::End() {
  absl::MutexLock lock(&mu_);
  active_ = nullptr;
}

absl::Status OctoClient::Error(const grpc::Status& status) const {
  absl::Status error = FromGrpcStatus(status);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(absl::StrCat("octod at ", target_, ": ", error.message()));
  }
  return error;
}

template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> OctoClient::Unary(Method method, const Request& request, bool cleanup) {
  std::unique_ptr<grpc::ClientContext> context = Begin(cleanup);
  if (context == nullptr) return absl::CancelledError("cancelled");
  Response response;
  const grpc::Status status = (stub_.get()->*method)(context.get(), request, &response);
  End();
  if (!status.ok()) return Error(status);
  return response;
}

template <typename Request, typename Method>
absl::Status OctoClient::Stream(Method method, const Request& request, const MessageCallback& on_message) {
  std::unique_ptr<grpc::ClientContext> context = Begin();
  if (context == nullptr) return absl::CancelledError("cancelled");
  auto reader = (stub_.get()->*method)(context.get(), request);
  v1::GenerateResponse message;
  while (reader->Read(&message)) on_message(message);
  const grpc::Status status = reader->Finish();
  End();
  return status.ok() ? absl::OkStatus() : Error(status);
}

absl::StatusOr<v1::HealthResponse> OctoClient::Health() {
  return Unary<v1::HealthResponse>(&v1::Octo::Stub::Health, v1::HealthRequest());
}

absl::StatusOr<v1::GetStatusResponse> OctoClient::GetStatus() {
  return Unary<v1::GetStatusResponse>(&v1::Octo::Stub::GetStatus, v1::GetStatusRequest());
}

absl::StatusOr<v1::CreateSessionResponse> OctoClient::CreateSession(uint32_t context_length,
                                                                   const std::string& name,
                                                                   const std::string& model) {
  v1::CreateSessionRequest request;
  request.set_context_length(context_length);
  request.set_name(name);
  request.set_model(model);
  return Unary<v1::CreateSessionResponse>(&v1::Octo::Stub::CreateSession, request);
}

absl::Status OctoClient::CloseSession(const std::string& session_id) {
  v1::CloseSessionRequest request;
  request.set_session_id(session_id);
  return Unary<v1::CloseSessionResponse>(&v1::Octo::Stub::CloseSession, request, /*cleanup=*/true).status();
}

absl::StatusOr<v1::ResidencyStatus> OctoClient::SetResidency(const v1::SetResidencyRequest& request) {
  absl::StatusOr<v1::SetResidencyResponse> response =
      Unary<v1::SetResidencyResponse>(&v1::Octo::Stub::SetResidency, request);
  if (!response.ok()) return response.status();
  return response->residency();
}

absl::StatusOr<v1::ModelInfo> OctoClient::LoadModel(const std::string& path,
                                                    const std::optional<std::string>& draft_model) {
  v1::LoadModelRequest request;
  request.set_path(path);
  if (draft_model.has_value()) request.set_draft_model(*draft_model);
  return LoadModel(request);
}

absl::StatusOr<v1::ModelInfo> OctoClient::LoadModel(const v1::LoadModelRequest& request) {
  absl::StatusOr<v1::LoadModelResponse> response = Unary<v1::LoadModelResponse>(&v1::Octo::Stub::LoadModel, request);
  if (!response.ok()) return response.status();
  return response->model();
}

absl::Status OctoClient::UnloadModel(const std::string& path) {
  v1::UnloadModelRequest request;
  request.set_path(path);
  return Unary<v1::UnloadModelResponse>(&v1::Octo::Stub::UnloadModel, request).status();
}

absl::StatusOr<v1::ListModelsResponse> OctoClient::ListModels() {
  return Unary<v1::ListModelsResponse>(&v1::Octo::Stub::ListModels, v1::ListModelsRequest());
}

absl::StatusOr<v1::EmbedResponse> OctoClient::Embed(const v1::EmbedRequest& request) {
  return Unary<v1::EmbedResponse>(&v1::Octo::Stub::Embed, request);
}

absl::Status OctoClient::Generate(const v1::GenerateRequest& request, const MessageCallback& on_message) {
  return Stream(&v1::Octo::Stub::Generate, request, on_message);
}

absl::Status OctoClient::Chat(const v1::ChatRequest& request, const MessageCallback& on_message) {
  return Stream(&v1::Octo::Stub::Chat, request, on_message);
}

}  // namespace octo
