// One Generate or Chat call: the job's events, as the core delivers them to
// a TokenSink on its scheduler thread, become GenerateResponse messages
// written to the client one at a time (the callback API allows one write in
// flight).
//
//   started -> token* -> done, then status OK    the job ended (any finish reason)
//   [started -> token*], then an error status    Submit refused the job, or it failed
//   CANCELLED                                    the client went away
//
// The client going away (OnCancel, or a failed write) cancels the job at
// once through its JobHandle. The sink may outlive the reactor: the core
// holds it until the job's OnDone, and events after the call ended are
// dropped.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"
#include "grpcpp/support/server_callback.h"
#include "octo.pb.h"

namespace octo {

class StreamSink;

class TokenStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Submits `job` to `runtime`; when `job` is an error, or Submit refuses
  // it, the call finishes with that error. The reactor deletes itself when
  // the call is done; the caller returns it to gRPC and keeps no pointer.
  static TokenStream* Start(Runtime& runtime, absl::StatusOr<GenerateJob> job);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  TokenStream();
  std::shared_ptr<StreamSink> sink_;
};

}  // namespace octo
