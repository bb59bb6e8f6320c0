#include "daemon/server/status_map.h"

#include "gtest/gtest.h"

namespace octo {
namespace {

// The codes the API documents (proto/octo.proto) keep their meaning on the wire.
TEST(StatusMapTest, DocumentedCodesArriveAsTheirGrpcNamesakes) {
  const std::pair<absl::Status, grpc::StatusCode> cases[] = {
      {absl::InvalidArgumentError("temperature -1"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("no session 'x'"), grpc::StatusCode::NOT_FOUND},
      {absl::FailedPreconditionError("no model loaded"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::ResourceExhaustedError("KV budget full"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::DataLossError("layer 3 checksum"), grpc::StatusCode::DATA_LOSS},
      {absl::UnavailableError("loader down"), grpc::StatusCode::UNAVAILABLE},
      {absl::CancelledError("client left"), grpc::StatusCode::CANCELLED},
      {absl::UnauthenticatedError("wrong token"), grpc::StatusCode::UNAUTHENTICATED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& [status, code] : cases) {
    const grpc::Status wire = ToGrpcStatus(status);
    EXPECT_EQ(wire.error_code(), code) << status;
    EXPECT_EQ(wire.error_message(), status.message());
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(StatusMapTest, EveryCodeSurvivesTheRoundTrip) {
  for (int i = 0; i <= 16; ++i) {
    const absl::Status status(static_cast<absl::StatusCode>(i), i == 0 ? "" : "message " + std::to_string(i));
    EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(status)), status) << i;
  }
}

TEST(StatusMapTest, UnknownCodesBecomeUnknown) {
  EXPECT_EQ(ToGrpcCode(static_cast<absl::StatusCode>(42)), grpc::StatusCode::UNKNOWN);
  const absl::Status status = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(99), "odd"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(status.message(), "odd");
}

}  // namespace
}  // namespace octo
