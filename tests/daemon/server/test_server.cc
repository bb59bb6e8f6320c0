#include "tests/daemon/server/test_server.h"

#include <chrono>

#include "daemon/server/endpoint.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace octo::testing {

TestServer::TestServer(TestServerOptions options) : socket_path_(dir_.Path("octod.sock")) {
  ServiceOptions service_options;
  service_options.version = "test";
  std::vector<std::string> tokens;
  if (options.token.has_value()) tokens.push_back(*options.token);
  service_options.credentials = Credentials(std::move(tokens), options.admin_token);
  service_ = std::make_unique<OctoService>(runtime_, service_options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(UnixTarget(socket_path_), grpc::InsecureServerCredentials());
  if (options.tcp) builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tcp_port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  EXPECT_NE(server_, nullptr) << "cannot listen on " << socket_path_;
}

TestServer::~TestServer() { Stop(); }

void TestServer::Stop() {
  if (server_ == nullptr) return;
  runtime_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_.reset();
}

std::unique_ptr<v1::Octo::Stub> TestServer::UnixStub() const {
  return v1::Octo::NewStub(grpc::CreateChannel(UnixTarget(socket_path_), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<v1::Octo::Stub> TestServer::TcpStub() const {
  return v1::Octo::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(tcp_port_), grpc::InsecureChannelCredentials()));
}

}  // namespace octo::testing
