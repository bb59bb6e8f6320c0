// The HTTP transport: auth, routing, limits, keep-alive, a client that goes
// away mid-stream, many clients at once, and stopping with streams open.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

constexpr char kToken[] = "0123456789abcdef0123";
const json kCompletion = {{"model", "m"}, {"prompt", "x"}};

TEST_F(HttpApiTest, WithATokenEveryRequestNeedsIt) {
  StartServer(kToken);
  HttpReply reply = Get(port(), "/v1/models");
  EXPECT_EQ(reply.status, 401);
  EXPECT_EQ(reply.Json()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(reply.Json()["error"]["type"], "authentication_error");
  reply = Get(port(), "/v1/models", {{"Authorization", "Bearer wrong-token-wrong-token"}});
  EXPECT_EQ(reply.status, 401);
  reply = Post(port(), "/api/generate", {{"model", "m"}, {"prompt", "x"}});
  EXPECT_EQ(reply.status, 401);
  EXPECT_TRUE(reply.Json()["error"].is_string()) << "Ollama's error shape on /api: " << reply.body;
  EXPECT_EQ(runtime_.jobs_submitted(), 0);
  reply = Get(port(), "/v1/models", {{"Authorization", absl::StrCat("Bearer ", kToken)}});
  EXPECT_EQ(reply.status, 200) << reply.body;
  reply = Post(port(), "/v1/completions", kCompletion, {{"authorization", absl::StrCat("bearer ", kToken)}});
  EXPECT_EQ(reply.status, 200) << "header name and scheme are case-insensitive: " << reply.body;
}

TEST_F(HttpApiTest, UnknownRoutesAndMethods) {
  HttpReply reply = Get(port(), "/v1/nothing");
  EXPECT_EQ(reply.status, 404);
  EXPECT_TRUE(reply.Json()["error"].is_object()) << reply.body;
  reply = Get(port(), "/v1/chat/completions");
  EXPECT_EQ(reply.status, 405) << reply.body;
  reply = Request(port(), "DELETE", "/api/tags");
  EXPECT_EQ(reply.status, 405) << reply.body;
  reply = Request(port(), "HEAD", "/");
  EXPECT_EQ(reply.status, 200) << "Ollama's clients probe with HEAD /";
  EXPECT_EQ(reply.body, "");
}

TEST_F(HttpApiTest, OversizedBodyIs413) {
  const std::string huge(kMaxHttpBodyBytes + 1, 'x');
  const HttpReply reply = Request(port(), "POST", "/v1/completions", huge);
  EXPECT_EQ(reply.status, 413);
  EXPECT_NE(reply.body.find("limit"), std::string::npos) << reply.body;
}

TEST_F(HttpApiTest, GarbageIsABadRequestAndTheServerServesOn) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.Send("HELLO THERE\r\n\r\n"));
  EXPECT_NE(raw.ReadToEnd().find("400"), std::string::npos) << raw.received();
  EXPECT_EQ(Get(port(), "/api/version").status, 200);
}

TEST_F(HttpApiTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  RawConnection raw(port());
  const std::string body = kCompletion.dump();
  ASSERT_TRUE(raw.Send(RawPost("/v1/completions", body)));
  ASSERT_TRUE(raw.ReadUntil("\"text_completion\""));
  ASSERT_TRUE(raw.Send(RawPost("/v1/completions", body, /*keep_alive=*/false)));
  const std::string all = raw.ReadToEnd();
  size_t replies = 0;
  for (size_t at = all.find("HTTP/1.1 200"); at != std::string::npos; at = all.find("HTTP/1.1 200", at + 1)) ++replies;
  EXPECT_EQ(replies, 2u) << all;
  EXPECT_EQ(runtime_.jobs_submitted(), 2);
}

TEST_F(HttpApiTest, ClientGoneMidStreamCancelsTheJob) {
  runtime_.SetScript({.tokens = ScriptTokens({"a", "b"}), .hold = true});
  {
    RawConnection raw(port());
    json request = kCompletion;
    request["stream"] = true;
    ASSERT_TRUE(raw.Send(RawPost("/v1/completions", request.dump())));
    ASSERT_TRUE(raw.ReadUntil("\"b\""));  // the job now holds, waiting for a cancel
  }
  EXPECT_TRUE(runtime_.WaitFor([&] { return runtime_.jobs_cancelled() == 1 && runtime_.jobs_running() == 0; }));
  EXPECT_TRUE(runtime_.WaitFor([&] { return runtime_.sinks_alive() == 0; })) << "the job's sink is let go";
}

TEST_F(HttpApiTest, ClientGoneBeforeAnyTokenCancelsTheJob) {
  runtime_.SetScript({.tokens = {}, .hold = true});
  {
    RawConnection raw(port());
    ASSERT_TRUE(raw.Send(RawPost("/api/generate", json({{"model", "m"}, {"prompt", "x"}, {"stream", false}}).dump())));
    ASSERT_TRUE(runtime_.WaitFor([&] { return runtime_.jobs_running() == 1; }));
  }
  EXPECT_TRUE(runtime_.WaitFor([&] { return runtime_.jobs_cancelled() == 1 && runtime_.jobs_running() == 0; }))
      << "noticed while waiting, with nothing written yet";
}

TEST_F(HttpApiTest, ManyClientsAtOnce) {
  runtime_.SetScript({.tokens = ScriptTokens({"x", "y", "z"}), .token_delay = std::chrono::milliseconds(20)});
  constexpr int kClients = 16;
  std::vector<HttpReply> replies(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      json request = i % 2 == 0 ? json(kCompletion) : json({{"model", "m"}, {"prompt", "x"}});
      request["stream"] = true;
      replies[i] = Post(port(), i % 2 == 0 ? "/v1/completions" : "/api/generate", request);
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(replies[i].status, 200) << i;
    if (i % 2 == 0) {
      EXPECT_EQ(replies[i].Events().size(), 5u) << replies[i].body;
    } else {
      EXPECT_EQ(replies[i].Lines().size(), 4u) << replies[i].body;
    }
  }
  EXPECT_EQ(runtime_.jobs_submitted(), kClients);
}

TEST_F(HttpApiTest, StopEndsOpenStreamsAndIdleConnections) {
  runtime_.SetScript({.tokens = ScriptTokens({"a"}), .hold = true});
  RawConnection idle(port());
  RawConnection streaming(port());
  json request = kCompletion;
  request["stream"] = true;
  ASSERT_TRUE(streaming.Send(RawPost("/v1/completions", request.dump())));
  ASSERT_TRUE(streaming.ReadUntil("\"a\""));
  runtime_.Shutdown();  // as octod does first: the job ends UNAVAILABLE
  server_->Stop();
  const std::string rest = streaming.ReadToEnd();
  EXPECT_NE(rest.find("shutting down"), std::string::npos) << rest;
  EXPECT_NE(rest.find("[DONE]"), std::string::npos) << rest;
  EXPECT_EQ(idle.ReadToEnd(), "") << "closed without a word";
}

}  // namespace
}  // namespace octo::testing
