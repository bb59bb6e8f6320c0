#include "daemon/server/auth.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/daemon/server/test_server.h"

namespace octo {
namespace {

constexpr char kToken[] = "s3cret-token-0123456789";

TEST(ConstantTimeEqualsTest, EqualOnlyForEqualStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(AuthorizerTest, UnixPeersNeedNoTokenTcpPeersNeedTheRightOne) {
  const Authorizer authorizer{std::string(kToken)};
  EXPECT_TRUE(authorizer.Check("unix:/run/octo/octod.sock", std::nullopt).ok());
  EXPECT_TRUE(authorizer.Check("unix:", std::nullopt).ok());
  EXPECT_EQ(authorizer.Check("ipv4:127.0.0.1:5000", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(authorizer.Check("ipv4:127.0.0.1:5000", "Bearer wrong").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(authorizer.Check("ipv4:127.0.0.1:5000", kToken).code(), absl::StatusCode::kUnauthenticated)
      << "the Bearer scheme is required";
  EXPECT_EQ(authorizer.Check("ipv6:[::1]:5000", absl::StrCat("Bearer ", kToken, "x")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(authorizer.Check("ipv6:[::1]:5000", absl::StrCat("Bearer ", kToken)).ok());
  const Authorizer no_token{std::nullopt};
  EXPECT_EQ(no_token.Check("ipv4:10.0.0.1:1", "Bearer ").code(), absl::StatusCode::kUnauthenticated);
}

// Over real sockets: TCP without, with a wrong and with the right token;
// the unix socket of the same server without one.
class AuthOverSocketsTest : public ::testing::Test {
 protected:
  AuthOverSocketsTest() : server_(testing::TestServerOptions{.tcp = true, .token = kToken}) {}

  grpc::Status Health(v1::Octo::Stub& stub, const std::optional<std::string>& authorization) {
    grpc::ClientContext context;
    if (authorization.has_value()) context.AddMetadata("authorization", *authorization);
    v1::HealthResponse response;
    return stub.Health(&context, v1::HealthRequest(), &response);
  }

  testing::TestServer server_;
};

TEST_F(AuthOverSocketsTest, TcpWithoutTokenIsRefused) {
  ASSERT_GT(server_.tcp_port(), 0);
  const grpc::Status status = Health(*server_.TcpStub(), std::nullopt);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

TEST_F(AuthOverSocketsTest, TcpWithWrongTokenIsRefused) {
  const grpc::Status status = Health(*server_.TcpStub(), "Bearer not-the-token-at-all");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(), "wrong token");
}

TEST_F(AuthOverSocketsTest, TcpWithRightTokenIsServed) {
  const grpc::Status status = Health(*server_.TcpStub(), absl::StrCat("Bearer ", kToken));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AuthOverSocketsTest, StreamsAreCheckedToo) {
  server_.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/true);
  grpc::ClientContext context;
  v1::GenerateRequest request;
  request.set_prompt("hi");
  auto reader = server_.TcpStub()->Generate(&context, request);
  v1::GenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server_.runtime().jobs_submitted(), 0);
}

TEST_F(AuthOverSocketsTest, UnixSocketNeedsNoToken) {
  const grpc::Status status = Health(*server_.UnixStub(), std::nullopt);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST(AuthWithoutTokenTest, TcpIsRefusedWhenNoTokenIsConfigured) {
  testing::TestServer server(testing::TestServerOptions{.tcp = true, .token = std::nullopt});
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer anything-at-all-really");
  v1::HealthResponse response;
  EXPECT_EQ(server.TcpStub()->Health(&context, v1::HealthRequest(), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace octo
