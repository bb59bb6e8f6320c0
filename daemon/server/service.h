// OctoService: the octo.v1.Octo gRPC service over an octo::Runtime. It
// checks who is calling (auth.h), translates proto <-> core types
// (proto_convert.h) and absl::Status -> grpc::Status (status_map.h), and
// does nothing else: the Runtime decides everything.
//
// Callers (credentials.h): a session belongs to the credential that created
// it (the caller's credential goes with each job and session call), and
// GetStatus lists another credential's sessions only as a count, unless the
// caller is admin. LoadModel, UnloadModel and SetResidency need an admin
// caller: the unix socket, or the admin token over TCP (PERMISSION_DENIED).
//
// Threads: gRPC runs the handlers on its callback threads. Calls that may
// take long (LoadModel, UnloadModel, ListModels, SetResidency) run on a
// thread of their own so they never hold up a callback thread; the rest
// call the Runtime directly. Generate and Chat stream through TokenStream.
//
// Lifetime: the Runtime must outlive the service, and the service the
// grpc::Server it is registered with (shut the server down first: that
// waits for every call, blocking ones included, to finish).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/runtime.h"
#include "daemon/server/auth.h"
#include "octo.grpc.pb.h"

namespace octo {

struct ServiceOptions {
  std::string version;                      // GetStatus's version
  Credentials credentials;                   // the tokens TCP callers need; none: no TCP calls
  std::function<void(absl::string_view)> log;  // one line per event (model loaded, ...); may be empty
};

class OctoService final : public v1::Octo::CallbackService {
 public:
  OctoService(Runtime& runtime, ServiceOptions options);
  ~OctoService() override;  // waits for blocking calls still running

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context, const v1::HealthRequest* request,
                                   v1::HealthResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* Chat(grpc::CallbackServerContext* context,
                                                       const v1::ChatRequest* request) override;
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                          const v1::CreateSessionRequest* request,
                                          v1::CreateSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context, const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context, const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context, const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* SetResidency(grpc::CallbackServerContext* context,
                                         const v1::SetResidencyRequest* request,
                                         v1::SetResidencyResponse* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* context, const v1::LoadModelRequest* request,
                                      v1::LoadModelResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context, const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context, const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  enum class Access { kAnyCaller, kAdmin };
  using Call = std::function<absl::Status(const Caller&)>;
  // Who is calling, and whether it may do what `access` asks.
  absl::StatusOr<Caller> Admit(const grpc::CallbackServerContext& context, Access access) const;
  // Admits the caller, runs `call` here, finishes with its status.
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, Access access, const Call& call);
  // The same with `call` on a thread of its own.
  grpc::ServerUnaryReactor* Blocking(grpc::CallbackServerContext* context, Access access, Call call);
  // Generate and Chat: the caller admitted, the job (or why there is none) streamed.
  grpc::ServerWriteReactor<v1::GenerateResponse>* StartStream(const grpc::CallbackServerContext& context,
                                                              absl::StatusOr<GenerateJob> job);
  void Log(absl::string_view line) const;

  // Blocking calls' threads still running. Shared with them, so a thread
  // may finish its bookkeeping after the destructor has seen the count fall.
  struct CallCount {
    absl::Mutex mu;
    int running ABSL_GUARDED_BY(mu) = 0;
  };

  Runtime& runtime_;
  const ServiceOptions options_;
  const Authorizer authorizer_;
  const std::shared_ptr<CallCount> blocking_calls_ = std::make_shared<CallCount>();
};

}  // namespace octo
