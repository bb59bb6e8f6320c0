// absl::Status <-> grpc::Status. The code mapping is written once, in
// ToGrpcCode; the client side's inverse is derived from it, so the two can
// never disagree. Messages travel unchanged.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace octo {

// The gRPC code for an absl code. Both follow the canonical code list, so
// each maps to its namesake; anything unknown becomes UNKNOWN.
grpc::StatusCode ToGrpcCode(absl::StatusCode code);

// The daemon's errors on the wire: same code (ToGrpcCode), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// A client's view of an RPC's status: the absl code whose ToGrpcCode is
// status.error_code() (UNKNOWN when none is), same message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace octo
