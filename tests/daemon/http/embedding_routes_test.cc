// The embedding routes over a scripted runtime: what each form passes to
// Runtime::Embed (inputs, dimensions, normalisation, truncation, context),
// the replies' shapes, base64, and the fields refused before any work.
#include <cstring>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

TEST_F(HttpApiTest, OpenAiEmbeddingsTakeEveryInputForm) {
  HttpReply reply = Post(port(), "/v1/embeddings", {{"model", "m"}, {"input", "hi"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  json body = reply.Json();
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "m");
  // The fake's vector for "hi": {3 tokens (BOS, h, i), BOS, 'i', 0}.
  EXPECT_EQ(body["data"][0]["embedding"], json({3.0, 1.0, 105.0, 0.0}));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EmbedJob job = runtime_.last_embed();
  EXPECT_EQ(job.texts, std::vector<std::string>{"hi"});
  EXPECT_EQ(job.model, "m");
  EXPECT_TRUE(job.normalize);
  EXPECT_FALSE(job.truncate) << "OpenAI refuses a long input";
  EXPECT_EQ(job.origin, "POST /v1/embeddings");

  ASSERT_EQ(Post(port(), "/v1/embeddings", {{"model", "m"}, {"input", {"a", "bc"}}, {"dimensions", 2}}).status, 200);
  job = runtime_.last_embed();
  EXPECT_EQ(job.texts, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(job.dimensions, 2);

  reply = Post(port(), "/v1/embeddings", {{"model", "m"}, {"input", {7, 8, 9}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(runtime_.last_embed().token_inputs, (std::vector<std::vector<int32_t>>{{7, 8, 9}}));
  reply = Post(port(), "/v1/embeddings", {{"model", "m"}, {"input", {{7, 8}, {9}}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(runtime_.last_embed().token_inputs, (std::vector<std::vector<int32_t>>{{7, 8}, {9}}));
  EXPECT_EQ(reply.Json()["data"][1]["index"], 1);
  EXPECT_EQ(reply.Json()["data"][1]["embedding"], json({1.0, 9.0, 9.0, 0.0}));
}

TEST_F(HttpApiTest, OpenAiEmbeddingsInBase64AreLittleEndianFloats) {
  const HttpReply reply = Post(port(), "/v1/embeddings", {{"model", "m"}, {"input", "hi"}, {"encoding_format", "base64"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(reply.Json()["data"][0]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), 4 * sizeof(float));
  float values[4];
  std::memcpy(values, bytes.data(), bytes.size());
  EXPECT_EQ(std::vector<float>(values, values + 4), (std::vector<float>{3, 1, 105, 0}));
}

TEST_F(HttpApiTest, OllamaEmbedTruncatesAndNormalisesByDefault) {
  HttpReply reply = Post(port(), "/api/embed", {{"model", "m"}, {"input", {"a", "b"}}, {"keep_alive", "10m"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json body = reply.Json();
  EXPECT_EQ(body["embeddings"].size(), 2u);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt_eval_count"], 4);
  EXPECT_TRUE(body.contains("total_duration"));
  EmbedJob job = runtime_.last_embed();
  EXPECT_TRUE(job.truncate);
  EXPECT_TRUE(job.normalize);

  ASSERT_EQ(Post(port(), "/api/embed", {{"model", "m"}, {"input", "a"}, {"truncate", false},
                                        {"options", {{"num_ctx", 64}}}, {"dimensions", 3}})
                .status,
            200);
  job = runtime_.last_embed();
  EXPECT_FALSE(job.truncate);
  EXPECT_EQ(job.context_length, 64);
  EXPECT_EQ(job.dimensions, 3);

  // The older form: one prompt, its raw vector.
  reply = Post(port(), "/api/embeddings", {{"model", "m"}, {"prompt", "hi"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["embedding"], json({3.0, 1.0, 105.0, 0.0}));
  EXPECT_FALSE(runtime_.last_embed().normalize);
}

TEST_F(HttpApiTest, BadEmbeddingRequestsAreRefusedNamingTheField) {
  const struct {
    const char* path;
    json body;
    const char* field;
  } cases[] = {
      {"/v1/embeddings", {{"input", "a"}}, "model"},
      {"/v1/embeddings", {{"model", "m"}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", json::array()}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", {"a", ""}}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", {{1}, json::array()}}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", {1, -2}}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", {{"x", 1}}}}, "input"},
      {"/v1/embeddings", {{"model", "m"}, {"input", "a"}, {"dimensions", 0}}, "dimensions"},
      {"/v1/embeddings", {{"model", "m"}, {"input", "a"}, {"dimensions", "8"}}, "dimensions"},
      {"/v1/embeddings", {{"model", "m"}, {"input", "a"}, {"encoding_format", "hex"}}, "encoding_format"},
      {"/v1/embeddings", {{"model", "m"}, {"input", std::vector<std::string>(2049, "a")}}, "input"},
      {"/api/embed", {{"model", "m"}, {"input", 5}}, "input"},
      {"/api/embed", {{"model", "m"}, {"input", "a"}, {"truncate", "yes"}}, "truncate"},
      {"/api/embed", {{"model", "m"}, {"input", "a"}, {"keep_alive", "later"}}, "keep_alive"},
      {"/api/embed", {{"model", "m"}, {"input", "a"}, {"keep_alive", {1}}}, "keep_alive"},
      {"/api/embed", {{"model", "m"}, {"input", "a"}, {"options", 3}}, "options"},
      {"/api/embed", {{"model", "m"}, {"input", "a"}, {"options", {{"num_ctx", -1}}}}, "options.num_ctx"},
      {"/api/embeddings", {{"model", "m"}, {"prompt", 3}}, "prompt"},
  };
  const int embeds = static_cast<int>(runtime_.last_embed().texts.size());
  for (const auto& c : cases) {
    const HttpReply reply = Post(port(), c.path, c.body);
    EXPECT_EQ(reply.status, 400) << c.path << " " << c.body.dump() << ": " << reply.body;
    EXPECT_NE(reply.body.find(c.field), std::string::npos) << c.path << " " << c.body.dump() << ": " << reply.body;
  }
  EXPECT_EQ(static_cast<int>(runtime_.last_embed().texts.size()), embeds) << "nothing reached the runtime";
  // A failed pass is the runtime's error, with its code.
  const HttpReply failed = Post(port(), "/api/embed", {{"model", "m"}, {"input", "fail"}});
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_NE(failed.body.find("checksum"), std::string::npos) << failed.body;
  EXPECT_EQ(Post(port(), "/v1/embeddings", {{"model", "ghost"}, {"input", "a"}}).status, 404);
}

}  // namespace
}  // namespace octo::testing
