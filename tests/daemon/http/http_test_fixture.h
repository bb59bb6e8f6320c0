// octod's HTTP API over a scripted FakeRuntime (tests/daemon/server), on a
// real loopback port: what the route and transport tests share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "daemon/http/http_api.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_client.h"
#include "tests/daemon/server/fake_runtime.h"

namespace octo::testing {

class HttpApiTest : public ::testing::Test {
 protected:
  // Models "m" (loaded) and "other" under the fake's root; no token.
  void SetUp() override {
    runtime_.SetModels({FakeModel("m"), FakeModel("other", "qwen2", 6)}, /*load_first=*/true);
    StartServer(std::nullopt);
  }
  void StartServer(std::optional<std::string> token) {
    server_.reset();
    absl::StatusOr<std::unique_ptr<HttpServer>> server = StartHttpApi(
        runtime_, HttpApiOptions{.host = "127.0.0.1",
                                 .port = 0,
                                 .credentials = token.has_value() ? Credentials({*token}, std::nullopt) : Credentials(),
                                 .version = "9.9.9"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  int port() const { return server_->port(); }

  FakeRuntime runtime_;                  // outlives the server
  std::unique_ptr<HttpServer> server_;
};

}  // namespace octo::testing
