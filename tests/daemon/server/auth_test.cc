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
  const Authorizer authorizer{Credentials({kToken}, std::nullopt)};
  EXPECT_EQ(authorizer.Identify("unix:/run/octo/octod.sock", std::nullopt)->credential, "unix");
  EXPECT_TRUE(authorizer.Identify("unix:", std::nullopt)->admin);
  EXPECT_EQ(authorizer.Identify("ipv4:127.0.0.1:5000", std::nullopt).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(authorizer.Identify("ipv4:127.0.0.1:5000", "Bearer wrong").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(authorizer.Identify("ipv4:127.0.0.1:5000", kToken).status().code(), absl::StatusCode::kUnauthenticated)
      << "the Bearer scheme is required";
  EXPECT_EQ(authorizer.Identify("ipv6:[::1]:5000", absl::StrCat("Bearer ", kToken, "x")).status().code(),
            absl::StatusCode::kUnauthenticated);
  const absl::StatusOr<Caller> caller = authorizer.Identify("ipv6:[::1]:5000", absl::StrCat("Bearer ", kToken));
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ(caller->credential, "token:1");
  EXPECT_FALSE(caller->admin);
  const Authorizer no_token{Credentials()};
  EXPECT_EQ(no_token.Identify("ipv4:10.0.0.1:1", "Bearer ").status().code(), absl::StatusCode::kUnauthenticated);
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

constexpr char kAdminToken[] = "admin-token-0123456789";
constexpr char kOtherToken[] = "other-token-0123456789";

// Over TCP, loading, unloading and residency need the admin token; the
// unix socket may do them.
TEST(AdminTest, ControlCallsNeedTheAdminTokenOverTcp) {
  testing::TestServer server(testing::TestServerOptions{.tcp = true, .token = kToken, .admin_token = kAdminToken});
  server.runtime().SetModels({testing::FakeModel("tiny"), testing::FakeModel("other")}, /*load_first=*/true);
  auto load = [](v1::Octo::Stub& stub, const std::string& token) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    v1::LoadModelRequest request;
    request.set_path("other");
    v1::LoadModelResponse response;
    return stub.LoadModel(&context, request, &response);
  };
  const grpc::Status refused = load(*server.TcpStub(), kToken);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("--admin-token-file"), std::string::npos) << refused.error_message();
  EXPECT_TRUE(load(*server.TcpStub(), kAdminToken).ok());
  EXPECT_TRUE(load(*server.UnixStub(), "").ok());
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  v1::UnloadModelResponse unloaded;
  EXPECT_EQ(server.TcpStub()->UnloadModel(&context, v1::UnloadModelRequest(), &unloaded).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// A session belongs to the credential that created it: another token can
// neither close it nor see it in status (only counted); the admin sees all.
TEST(SessionOwnerTest, AnotherCredentialCannotCloseOrSeeASession) {
  testing::TestServer server(testing::TestServerOptions{.tcp = true, .token = kToken, .admin_token = kAdminToken});
  server.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/true);
  auto with = [](const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
    return context;
  };
  v1::CreateSessionResponse created;
  ASSERT_TRUE(server.TcpStub()->CreateSession(with(kToken).get(), v1::CreateSessionRequest(), &created).ok());
  // The unix socket's caller is another credential: it cannot close it (the session does not exist for it).
  grpc::ClientContext unix_context;
  v1::CloseSessionRequest close;
  close.set_session_id(created.session_id());
  v1::CloseSessionResponse closed;
  EXPECT_EQ(server.UnixStub()->CloseSession(&unix_context, close, &closed).error_code(), grpc::StatusCode::NOT_FOUND);
  // Status over the admin token lists it with its owner.
  v1::GetStatusResponse admin_status;
  ASSERT_TRUE(server.TcpStub()->GetStatus(with(kAdminToken).get(), v1::GetStatusRequest(), &admin_status).ok());
  ASSERT_EQ(admin_status.sessions_size(), 1);
  EXPECT_EQ(admin_status.sessions(0).owner(), "token:1");
  EXPECT_EQ(admin_status.other_sessions(), 0u);
  // Its owner sees it; the owner's close works.
  v1::GetStatusResponse own_status;
  ASSERT_TRUE(server.TcpStub()->GetStatus(with(kToken).get(), v1::GetStatusRequest(), &own_status).ok());
  EXPECT_EQ(own_status.sessions_size(), 1);
  EXPECT_TRUE(server.TcpStub()->CloseSession(with(kToken).get(), close, &closed).ok());
}

TEST(SessionOwnerTest, StatusCountsOtherCredentialsSessions) {
  testing::TestServer server(testing::TestServerOptions{.tcp = true, .token = kOtherToken});
  server.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/true);
  grpc::ClientContext unix_context;
  v1::CreateSessionResponse created;
  ASSERT_TRUE(server.UnixStub()->CreateSession(&unix_context, v1::CreateSessionRequest(), &created).ok());
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kOtherToken));
  v1::GetStatusResponse status;
  ASSERT_TRUE(server.TcpStub()->GetStatus(&context, v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.sessions_size(), 0) << "another credential's session id is not shown";
  EXPECT_EQ(status.other_sessions(), 1u);
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
