// octod's service over a FakeRuntime on a real unix socket (and TCP on a
// free localhost port when asked), for tests of the skin and the clients.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "daemon/server/service.h"
#include "grpcpp/server.h"
#include "octo.grpc.pb.h"
#include "tests/daemon/server/fake_runtime.h"
#include "tests/temp_dir.h"

namespace octo::testing {

struct TestServerOptions {
  bool tcp = false;                  // also listen on 127.0.0.1:<free port>
  std::optional<std::string> token{};        // what TCP callers must present ("token:1")
  std::optional<std::string> admin_token{};  // ... or this ("admin")
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions options = {});
  ~TestServer();  // as octod stops: runtime Shutdown, then the server

  FakeRuntime& runtime() { return runtime_; }
  const std::string& socket_path() const { return socket_path_; }
  int tcp_port() const { return tcp_port_; }
  std::unique_ptr<v1::Octo::Stub> UnixStub() const;
  std::unique_ptr<v1::Octo::Stub> TcpStub() const;
  // Stops the server now (the destructor then does nothing more).
  void Stop();

 private:
  TempDir dir_;
  std::string socket_path_;
  FakeRuntime runtime_;
  std::unique_ptr<OctoService> service_;
  std::unique_ptr<grpc::Server> server_;
  int tcp_port_ = 0;
};

}  // namespace octo::testing
