#include "daemon/server/service.h"

#include "storage/utf8.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "daemon/server/proto_convert.h"
#include "daemon/server/status_map.h"
#include "daemon/server/token_stream.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {

OctoService::OctoService(Runtime& runtime, ServiceOptions options)
    : runtime_(runtime), options_(std::move(options)), authorizer_(options_.credentials) {}

OctoService::~OctoService() {
  CallCount& calls = *blocking_calls_;
  absl::MutexLock lock(&calls.mu);
  calls.mu.Await(absl::Condition(+[](int* running) { return *running == 0; }, &calls.running));
}

void OctoService::Log(absl::string_view line) const {
  if (options_.log) options_.log(line);
}

absl::StatusOr<Caller> OctoService::Admit(const grpc::CallbackServerContext& context, Access access) const {
  OCTO_ASSIGN_OR_RETURN(Caller caller, authorizer_.Identify(context));
  if (access == Access::kAdmin && !caller.admin) {
    return absl::PermissionDeniedError(
        "loading, unloading and residency changes need the admin token over TCP (octod --admin-token-file), or "
        "the unix socket");
  }
  return caller;
}

grpc::ServerUnaryReactor* OctoService::Unary(grpc::CallbackServerContext* context, Access access, const Call& call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Admit(*context, access);
  reactor->Finish(ToGrpcStatus(caller.ok() ? call(*caller) : caller.status()));
  return reactor;
}

grpc::ServerUnaryReactor* OctoService::Blocking(grpc::CallbackServerContext* context, Access access, Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Admit(*context, access);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  {
    absl::MutexLock lock(&blocking_calls_->mu);
    ++blocking_calls_->running;
  }
  // The server's Shutdown waits for this call's Finish and the destructor for
  // the count, so `this` and the Runtime outlive `call`; after Finish the
  // thread touches only the shared count.
  std::thread([reactor, calls = blocking_calls_, call = std::move(call), caller = *std::move(caller)] {
    reactor->Finish(ToGrpcStatus(call(caller)));
    absl::MutexLock lock(&calls->mu);
    --calls->running;
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* OctoService::Health(grpc::CallbackServerContext* context, const v1::HealthRequest*,
                                              v1::HealthResponse* response) {
  return Unary(context, Access::kAnyCaller, [&](const Caller&) {
    const RuntimeReport report = runtime_.Report();
    response->set_serving(report.serving);
    response->set_model_loaded(report.model.has_value());
    response->set_loader_running(report.loader.running);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::GetStatus(grpc::CallbackServerContext* context, const v1::GetStatusRequest*,
                                                 v1::GetStatusResponse* response) {
  return Unary(context, Access::kAnyCaller, [&](const Caller& caller) {
    RuntimeReport report = runtime_.Report();
    // Another credential's sessions are only counted, unless the caller is admin.
    uint32_t others = 0;
    if (!caller.admin) {
      others = static_cast<uint32_t>(std::erase_if(
          report.sessions, [&](const SessionReport& s) { return s.owner != caller.credential; }));
    }
    ToProto(report, response);
    response->set_other_sessions(others);
    response->set_version(options_.version);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::GenerateResponse>* OctoService::Generate(grpc::CallbackServerContext* context,
                                                                      const v1::GenerateRequest* request) {
  return StartStream(*context, JobFromProto(*request));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* OctoService::Chat(grpc::CallbackServerContext* context,
                                                                  const v1::ChatRequest* request) {
  return StartStream(*context, JobFromProto(*request));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* OctoService::StartStream(const grpc::CallbackServerContext& context,
                                                                         absl::StatusOr<GenerateJob> job) {
  absl::StatusOr<Caller> caller = Admit(context, Access::kAnyCaller);
  if (!caller.ok()) return TokenStream::Start(runtime_, caller.status());
  if (job.ok()) job->owner = caller->credential;
  return TokenStream::Start(runtime_, std::move(job));
}

grpc::ServerUnaryReactor* OctoService::CreateSession(grpc::CallbackServerContext* context,
                                                     const v1::CreateSessionRequest* request,
                                                     v1::CreateSessionResponse* response) {
  return Unary(context, Access::kAnyCaller, [&](const Caller& caller) -> absl::Status {
    OCTO_ASSIGN_OR_RETURN(const SessionReport session,
                          runtime_.CreateSession(request->context_length(), caller.credential, request->name(),
                                                 request->model()));
    response->set_session_id(session.id);
    response->set_model(session.model);
    response->set_context_length(session.context_length);
    response->set_created(session.created);
    response->set_positions(session.positions);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::CloseSession(grpc::CallbackServerContext* context,
                                                    const v1::CloseSessionRequest* request,
                                                    v1::CloseSessionResponse*) {
  return Unary(context, Access::kAnyCaller,
               [&](const Caller& caller) { return runtime_.CloseSession(request->session_id(), caller.credential); });
}

grpc::ServerUnaryReactor* OctoService::Embed(grpc::CallbackServerContext* context, const v1::EmbedRequest* request,
                                             v1::EmbedResponse* response) {
  return Blocking(context, Access::kAnyCaller, [this, context, request, response](const Caller& caller) -> absl::Status {
    EmbedJob job;
    for (const v1::EmbedInput& input : request->inputs()) {
      if (job.texts.size() + job.token_inputs.size() > kMaxEmbedInputs) break;  // Embed names the limit
      if (input.has_tokens()) {
        job.token_inputs.emplace_back(input.tokens().ids().begin(), input.tokens().ids().end());
      } else {
        job.texts.push_back(input.text());
      }
    }
    job.model = request->model();
    job.owner = caller.credential;
    job.origin = "gRPC Embed";
    job.dimensions = static_cast<int>(std::min<uint32_t>(request->dimensions(), 1u << 30));
    job.normalize = !request->raw();
    job.truncate = request->truncate();
    job.context_length = static_cast<int>(std::min<uint32_t>(request->context_length(), 1u << 30));
    OCTO_ASSIGN_OR_RETURN(const EmbedResult result,
                          runtime_.Embed(job, [context] { return context->IsCancelled(); }));
    for (size_t i = 0; i < result.embeddings.size(); ++i) {
      v1::Embedding* e = response->add_embeddings();
      e->mutable_values()->Add(result.embeddings[i].begin(), result.embeddings[i].end());
      e->set_tokens(static_cast<uint32_t>(result.input_tokens[i]));
    }
    response->set_model(result.model);
    response->set_pooling(result.pooling);
    response->set_prompt_tokens(static_cast<uint32_t>(result.prompt_tokens));
    response->set_truncated(result.truncated);
    response->set_seconds(result.seconds);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::Tokenize(grpc::CallbackServerContext* context,
                                                const v1::TokenizeRequest* request, v1::TokenizeResponse* response) {
  return Unary(context, Access::kAnyCaller, [&](const Caller&) -> absl::Status {
    if (request->text().size() > kMaxPromptBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("text has %u bytes; at most %u", request->text().size(), kMaxPromptBytes));
    }
    std::vector<std::string> pieces;
    OCTO_ASSIGN_OR_RETURN(const std::vector<int32_t> tokens,
                          runtime_.Tokenize(request->text(), request->add_bos(), request->parse_special(), &pieces));
    response->mutable_tokens()->Add(tokens.begin(), tokens.end());
    for (std::string& piece : pieces) response->add_pieces(std::move(piece));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::Detokenize(grpc::CallbackServerContext* context,
                                                  const v1::DetokenizeRequest* request,
                                                  v1::DetokenizeResponse* response) {
  return Unary(context, Access::kAnyCaller, [&](const Caller&) -> absl::Status {
    const std::vector<int32_t> tokens(request->tokens().begin(), request->tokens().end());
    OCTO_ASSIGN_OR_RETURN(std::string text, runtime_.Detokenize(tokens));
    response->set_text(ReplaceInvalidUtf8(text));  // a lone byte token is part of a character
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::SetResidency(grpc::CallbackServerContext* context,
                                                    const v1::SetResidencyRequest* request,
                                                    v1::SetResidencyResponse* response) {
  return Blocking(context, Access::kAdmin, [this, request, response](const Caller&) -> absl::Status {
    OCTO_ASSIGN_OR_RETURN(const ResidencyReport residency,
                          runtime_.SetResidency(ResidencyChangeFromProto(*request)));
    ToProto(residency, response->mutable_residency());
    const DeviceReport& device = residency.device;
    Log(absl::StrFormat("residency: pin first %u, last %u; budget %s%s; %u layers resident, %u streamed%s%s",
                        residency.pin_first, residency.pin_last, FormatByteSize(residency.budget_bytes),
                        residency.auto_budget ? " (auto)" : "", residency.resident_layers,
                        residency.streamed_layers,
                        residency.experts.present
                            ? absl::StrCat("; expert cache ", FormatByteSize(residency.experts.cache_capacity_bytes))
                            : "",
                        device.present ? absl::StrFormat("; vram budget %s%s, %u layers in vram",
                                                         FormatByteSize(device.budget_bytes),
                                                         device.auto_budget ? " (auto)" : "", device.device_layers)
                                       : ""));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::LoadModel(grpc::CallbackServerContext* context,
                                                 const v1::LoadModelRequest* request,
                                                 v1::LoadModelResponse* response) {
  return Blocking(context, Access::kAdmin, [this, request, response](const Caller&) -> absl::Status {
    ModelSettings settings;
    if (request->has_draft_model()) settings.draft_model = request->draft_model();
    if (request->has_cache_type_k()) {
      OCTO_ASSIGN_OR_RETURN(settings.cache_type_k, ParseKvCacheType("cache_type_k", request->cache_type_k()));
    }
    if (request->has_cache_type_v()) {
      OCTO_ASSIGN_OR_RETURN(settings.cache_type_v, ParseKvCacheType("cache_type_v", request->cache_type_v()));
    }
    OCTO_ASSIGN_OR_RETURN(const ModelSummary model, runtime_.LoadModel(request->path(), settings));
    ToProto(model, response->mutable_model());  // the runtime logs loads
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* OctoService::UnloadModel(grpc::CallbackServerContext* context,
                                                   const v1::UnloadModelRequest* request, v1::UnloadModelResponse*) {
  return Blocking(context, Access::kAdmin, [this, request](const Caller&) -> absl::Status {
    return runtime_.UnloadModel(request->path());  // which logs it
  });
}

grpc::ServerUnaryReactor* OctoService::ListModels(grpc::CallbackServerContext* context,
                                                  const v1::ListModelsRequest*, v1::ListModelsResponse* response) {
  return Blocking(context, Access::kAnyCaller, [this, response](const Caller&) -> absl::Status {
    OCTO_ASSIGN_OR_RETURN(const std::vector<ModelSummary> models, runtime_.ListModels());
    for (const ModelSummary& model : models) ToProto(model, response->add_models());
    return absl::OkStatus();
  });
}

}  // namespace octo
