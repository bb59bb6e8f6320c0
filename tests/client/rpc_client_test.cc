// OctoClient against the service over real sockets (FakeRuntime behind it).
#include "client/rpc_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/daemon/server/test_server.h"

namespace octo {
namespace {

using testing::FakeScript;
using testing::ScriptTokens;

ConnectOptions Socket(const std::string& path) {
  ConnectOptions options;
  options.socket = path;
  options.connect_timeout = std::chrono::milliseconds(500);
  return options;
}

TEST(RpcClientTest, NoDaemonIsANamedUnavailableError) {
  testing::TempDir dir;
  const std::string path = dir.Path("octod.sock");
  absl::StatusOr<std::unique_ptr<OctoClient>> client = OctoClient::Connect(Socket(path));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(), "cannot reach octod at unix:" + path + ": is it running?");

  // A socket file left by a crashed daemon: the same answer, not a hang.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ::close(fd);
  const auto start = std::chrono::steady_clock::now();
  client = OctoClient::Connect(Socket(path));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(400));
}

TEST(RpcClientTest, UnaryCallsAndErrorsKeepTheirCodes) {
  testing::TestServer server;
  server.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/false);
  absl::StatusOr<std::unique_ptr<OctoClient>> client = OctoClient::Connect(Socket(server.socket_path()));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(), "unix:" + server.socket_path());
  absl::StatusOr<v1::HealthResponse> health = (*client)->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_FALSE(health->model_loaded());
  EXPECT_EQ((*client)->LoadModel("missing").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<v1::ModelInfo> model = (*client)->LoadModel("tiny");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->path(), "tiny");
  EXPECT_EQ((*client)->CloseSession("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*client)->UnloadModel().ok());
  EXPECT_EQ((*client)->UnloadModel().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RpcClientTest, TcpNeedsATokenFileAndSendsIt) {
  const std::string token = "tcp-token-0123456789abcdef";
  testing::TestServer server(testing::TestServerOptions{.tcp = true, .token = token});
  testing::TempDir dir;
  ConnectOptions options;
  options.host = "127.0.0.1:" + std::to_string(server.tcp_port());
  EXPECT_EQ(OctoClient::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);

  options.token_file = dir.Path("token");
  std::ofstream(options.token_file) << "wrong-token-0000000000000\n";
  absl::StatusOr<std::unique_ptr<OctoClient>> wrong = OctoClient::Connect(options);
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_EQ((*wrong)->Health().status().code(), absl::StatusCode::kUnauthenticated);

  std::ofstream(options.token_file) << token << "\n";
  absl::StatusOr<std::unique_ptr<OctoClient>> right = OctoClient::Connect(options);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_TRUE((*right)->Health().ok());
}

TEST(RpcClientTest, CancelFromAnotherThreadEndsTheStreamAndTheJob) {
  testing::TestServer server;
  server.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/true);
  FakeScript script;
  script.tokens = ScriptTokens({"a"});
  script.hold = true;
  server.runtime().SetScript(script);
  absl::StatusOr<std::unique_ptr<OctoClient>> client = OctoClient::Connect(Socket(server.socket_path()));
  ASSERT_TRUE(client.ok());
  std::thread canceller([&] {
    server.runtime().WaitFor([&] { return server.runtime().jobs_running() == 1; });
    (*client)->Cancel();
  });
  v1::GenerateRequest request;
  request.set_prompt("x");
  int messages = 0;
  const absl::Status status = (*client)->Generate(request, [&](const v1::GenerateResponse&) { ++messages; });
  canceller.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(server.runtime().WaitFor([&] { return server.runtime().jobs_cancelled() == 1; }));
  // Cancel is sticky: later calls end at once, except cleanup.
  EXPECT_EQ((*client)->Generate(request, [](const v1::GenerateResponse&) {}).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(server.runtime().jobs_submitted(), 1);
  EXPECT_EQ((*client)->CloseSession("nope").code(), absl::StatusCode::kNotFound) << "CloseSession still runs";
}

}  // namespace
}  // namespace octo
