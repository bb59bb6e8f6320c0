// llama-server's /health, /tokenize and /detokenize over a scripted runtime
// (its tokenizer: one token per byte, BOS 1): their shapes, their errors,
// and /health as the one route open without a token; and CORS.
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

TEST_F(HttpApiTest, TokenizeAndDetokenizeAsLlamaServer) {
  HttpReply reply = Post(port(), "/tokenize", {{"content", "Hi"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"tokens", {72, 105}}}));
  reply = Post(port(), "/tokenize", {{"content", "Hi"}, {"add_special", true}, {"with_pieces", true}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["tokens"],
            json({{{"id", 1}, {"piece", "<s>"}}, {{"id", 72}, {"piece", "H"}}, {{"id", 105}, {"piece", "i"}}}));
  reply = Post(port(), "/detokenize", {{"tokens", {72, 105, 33}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"content", "Hi!"}}));

  struct Case {
    std::string path;
    json body;
    std::string needle;
  };
  const std::vector<Case> refused = {
      {"/tokenize", json::object(), "content: required"},
      {"/tokenize", {{"content", 5}}, "content: expected a string"},
      {"/detokenize", json::object(), "tokens: required"},
      {"/detokenize", {{"tokens", "Hi"}}, "tokens: expected an array of token ids"},
      {"/detokenize", {{"tokens", {1, -2}}}, "tokens: item 1: expected a token id, got -2"},
      {"/detokenize", {{"tokens", {1, 4294967296}}}, "item 1: expected a token id, got 4294967296"},
      {"/detokenize", {{"tokens", {300}}}, "token 300 is not in the vocabulary"},
  };
  for (const Case& c : refused) {
    reply = Post(port(), c.path, c.body);
    EXPECT_EQ(reply.status, 400) << c.path << " " << c.body << ": " << reply.body;
    EXPECT_NE(reply.body.find(c.needle), std::string::npos) << c.path << " " << c.body << ": " << reply.body;
  }
}

TEST_F(HttpApiTest, HealthNeedsNoTokenAndNamesTheModel) {
  StartServer("health-test-token-0123456789");
  HttpReply reply = Get(port(), "/health");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"status", "ok"}, {"model", "m"}}));
  EXPECT_EQ(Post(port(), "/tokenize", {{"content", "Hi"}}).status, 401) << "only /health is open";
  EXPECT_EQ(Post(port(), "/health", json::object()).status, 401) << "only its GET";
  ASSERT_TRUE(runtime_.UnloadModel("").ok());
  EXPECT_EQ(Get(port(), "/health").Json(), json({{"status", "ok"}, {"model", nullptr}}));
  runtime_.Shutdown();
  reply = Get(port(), "/health");
  EXPECT_EQ(reply.status, 503) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"status", "shutting down"}}));
}

// CORS (cors.h) with a token configured: an admitted origin's preflight is
// answered without the token and its replies name it; another origin's
// preflight is refused and its replies carry no CORS header.
TEST_F(HttpApiTest, CorsAdmitsLocalPagesAndRefusesOthers) {
  constexpr char kToken[] = "cors-test-token-0123456789";
  StartServer(kToken);
  const std::map<std::string, std::string> preflight = {{"Origin", "http://localhost:5173"},
                                                         {"Access-Control-Request-Method", "POST"},
                                                         {"Access-Control-Request-Headers", "authorization, content-type"}};
  HttpReply reply = Request(port(), "OPTIONS", "/v1/chat/completions", "", preflight);
  EXPECT_EQ(reply.status, 204) << reply.body;
  EXPECT_EQ(reply.headers["access-control-allow-origin"], "http://localhost:5173");
  EXPECT_EQ(reply.headers["access-control-allow-headers"], "authorization, content-type");
  EXPECT_NE(reply.headers["access-control-allow-methods"].find("POST"), std::string::npos);

  const std::string bearer = std::string("Bearer ") + kToken;
  reply = Get(port(), "/v1/models", {{"Origin", "http://localhost:5173"}, {"Authorization", bearer}});
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.headers["access-control-allow-origin"], "http://localhost:5173");
  EXPECT_EQ(reply.headers["vary"], "Origin");
  reply = Get(port(), "/v1/models", {{"Origin", "http://localhost:5173"}});
  EXPECT_EQ(reply.status, 401) << "CORS is no token";
  EXPECT_EQ(reply.headers["access-control-allow-origin"], "http://localhost:5173") << "the page may read the 401";

  std::map<std::string, std::string> evil = preflight;
  evil["Origin"] = "https://evil.example.com";
  reply = Request(port(), "OPTIONS", "/v1/chat/completions", "", evil);
  EXPECT_EQ(reply.status, 403) << reply.body;
  EXPECT_EQ(reply.headers.count("access-control-allow-origin"), 0u);
  reply = Get(port(), "/v1/models", {{"Origin", "https://evil.example.com"}, {"Authorization", bearer}});
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(Get(port(), "/v1/models", {{"Authorization", bearer}}).headers.count("access-control-allow-origin"), 0u);
}

}  // namespace
}  // namespace octo::testing
