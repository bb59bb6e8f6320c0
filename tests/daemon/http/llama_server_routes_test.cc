// llama-server's /health, /tokenize and /detokenize over a scripted runtime
// (its tokenizer: one token per byte, BOS 1): their shapes, their errors,
// and /health as the one route open without a token.
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
  ASSERT_TRUE(runtime_.UnloadModel().ok());
  EXPECT_EQ(Get(port(), "/health").Json(), json({{"status", "ok"}, {"model", nullptr}}));
  runtime_.Shutdown();
  reply = Get(port(), "/health");
  EXPECT_EQ(reply.status, 503) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"status", "shutting down"}}));
}

}  // namespace
}  // namespace octo::testing
