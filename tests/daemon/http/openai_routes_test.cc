// The OpenAI routes over a scripted runtime: response shapes, streams
// (SSE, role chunk, one chunk per token, finish, usage, [DONE]), errors.
#include "daemon/engine/context_limit.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

const json kChat = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"temperature", 0}};

TEST_F(HttpApiTest, ChatCompletionIsOneJsonReply) {
  runtime_.SetScript({.tokens = ScriptTokens({"Hello", ",", " world"}), .finish_reason = "length",
                      .stats = {.prompt_tokens = 4, .generated_tokens = 3}});
  const HttpReply reply = Post(port(), "/v1/chat/completions", kChat);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, "application/json");
  const json body = reply.Json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Hello, world"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][0]["logprobs"], nullptr);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  const GenerateJob job = runtime_.last_job();
  EXPECT_TRUE(job.chat);
  EXPECT_EQ(job.messages[0].content, "Hi");
  EXPECT_EQ(job.sampling.temperature, 0);
  EXPECT_EQ(job.model, "m") << "the job runs only on the model it asked for";
}

TEST_F(HttpApiTest, ChatStreamIsServerSentEvents) {
  runtime_.SetScript({.tokens = ScriptTokens({"Hello", ",", " world"}), .stats = {.prompt_tokens = 2, .generated_tokens = 3}});
  json request = kChat;
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  request["logprobs"] = true;
  request["top_logprobs"] = 2;
  const HttpReply reply = Post(port(), "/v1/chat/completions", request);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, "text/event-stream");
  const std::vector<std::string> events = reply.Events();
  // role, 3 tokens, finish, usage, [DONE]
  ASSERT_EQ(events.size(), 7u) << reply.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<json> chunks;
  for (size_t i = 0; i + 1 < events.size(); ++i) chunks.push_back(json::parse(events[i]));
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string text;
  for (size_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(chunks[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(chunks[i]["id"], chunks[0]["id"]) << "one id for the whole stream";
    EXPECT_EQ(chunks[i]["choices"][0]["finish_reason"], nullptr);
    EXPECT_EQ(chunks[i]["usage"], nullptr);
    const json& entry = chunks[i]["choices"][0]["logprobs"]["content"][0];
    EXPECT_EQ(entry["token"], chunks[i]["choices"][0]["delta"]["content"]);
    EXPECT_EQ(entry["top_logprobs"].size(), 2u);
    text += chunks[i]["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello, world");
  EXPECT_EQ(chunks[4]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[4]["choices"][0]["delta"], json::object());
  EXPECT_EQ(chunks[5]["choices"], json::array());
  EXPECT_EQ(chunks[5]["usage"]["total_tokens"], 5);
}

TEST_F(HttpApiTest, HeldBackTextComesBeforeTheFinish) {
  runtime_.SetScript({.tokens = ScriptTokens({"a", "b"}), .finish_reason = "length", .tail = "c"});
  json request = {{"model", "m"}, {"prompt", "x"}, {"stream", true}};
  const HttpReply reply = Post(port(), "/v1/completions", request);
  const std::vector<std::string> events = reply.Events();
  ASSERT_EQ(events.size(), 5u) << reply.body;  // a, b, tail c, finish, [DONE]
  EXPECT_EQ(json::parse(events[2])["choices"][0]["text"], "c");
  EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "length");
  request.erase("stream");
  EXPECT_EQ(Post(port(), "/v1/completions", request).Json()["choices"][0]["text"], "abc");
}

TEST_F(HttpApiTest, CompletionWithLogprobs) {
  runtime_.SetScript({.tokens = ScriptTokens({"He", "llo"})});
  const HttpReply reply = Post(port(), "/v1/completions", {{"model", "m"}, {"prompt", {5, 6}}, {"logprobs", 2}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json choice = reply.Json()["choices"][0];
  EXPECT_EQ(reply.Json()["object"], "text_completion");
  EXPECT_EQ(choice["text"], "Hello");
  EXPECT_EQ(choice["logprobs"]["tokens"], json({"He", "llo"}));
  EXPECT_EQ(choice["logprobs"]["text_offset"], json({0, 2}));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], json({-0.25, -0.5}));
  EXPECT_EQ(runtime_.last_job().prompt_tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(runtime_.last_job().sampling.top_logprobs, 2);
}

TEST_F(HttpApiTest, ModelsAreListed) {
  const HttpReply reply = Get(port(), "/v1/models");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json body = reply.Json();
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_EQ(body["data"][0]["id"], "m");
  EXPECT_EQ(body["data"][1]["id"], "other");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(Get(port(), "/v1/models/other").Json()["id"], "other");
  const HttpReply missing = Get(port(), "/v1/models/none");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.Json()["error"]["code"], "model_not_found");
}

TEST_F(HttpApiTest, AnotherModelOfTheRootIsLoadedFirst) {
  json request = kChat;
  request["model"] = "other";
  ASSERT_EQ(Post(port(), "/v1/chat/completions", request).status, 200);
  ASSERT_TRUE(runtime_.Report().model.has_value());
  EXPECT_EQ(runtime_.Report().model->path, "other");
}

TEST_F(HttpApiTest, BadRequestsGetOpenAiErrors) {
  struct Case {
    std::string body;
    int status;
    std::string param;  // "" for null
    std::string code;   // "" for null
  };
  const std::vector<Case> cases = {
      {"{\"model\": \"m\", ", 400, "", ""},
      {"[]", 400, "", ""},
      {R"({"model": "m", "messages": "hi"})", 400, "messages", ""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", 400, "temperature", ""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"})", 400, "max_tokens", ""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 7})", 400, "", ""},
      {R"({"model": "nope", "messages": [{"role": "user", "content": "x"}]})", 404, "model", "model_not_found"},
  };
  for (const Case& c : cases) {
    const HttpReply reply = Request(port(), "POST", "/v1/chat/completions", c.body);
    EXPECT_EQ(reply.status, c.status) << c.body << " -> " << reply.body;
    const json error = reply.Json()["error"];
    ASSERT_TRUE(error.is_object()) << reply.body;
    EXPECT_FALSE(error["message"].get<std::string>().empty());
    EXPECT_EQ(error["type"], "invalid_request_error");
    EXPECT_EQ(error["param"], c.param.empty() ? json(nullptr) : json(c.param)) << reply.body;
    EXPECT_EQ(error["code"], c.code.empty() ? json(nullptr) : json(c.code)) << reply.body;
  }
  EXPECT_EQ(runtime_.jobs_submitted(), 0) << "no bad request reached the scheduler";
}

TEST_F(HttpApiTest, AJobThatFailsMidStreamEndsWithAnErrorEvent) {
  runtime_.SetScript({.tokens = ScriptTokens({"a"}), .failure = absl::DataLossError("layer_003.bin: checksum mismatch")});
  json request = kChat;
  request["stream"] = true;
  const HttpReply stream = Post(port(), "/v1/chat/completions", request);
  ASSERT_EQ(stream.status, 200);
  const std::vector<std::string> events = stream.Events();
  ASSERT_GE(events.size(), 3u) << stream.body;
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2]);
  EXPECT_EQ(error["error"]["type"], "server_error");
  EXPECT_NE(error["error"]["message"].get<std::string>().find("layer_003.bin"), std::string::npos);
  request.erase("stream");
  const HttpReply whole = Post(port(), "/v1/chat/completions", request);
  EXPECT_EQ(whole.status, 500);
  EXPECT_NE(whole.Json()["error"]["message"].get<std::string>().find("checksum"), std::string::npos);
}

// A prompt past the context is a 400 with OpenAI's code; load octod sheds
// (a full KV budget) is a 429 with Retry-After, and nothing else is.
TEST_F(HttpApiTest, ContextExceededIs400AndShedLoadIs429WithRetryAfter) {
  runtime_.SetScript({.failure = ContextExceededError(9000, 8192)});
  HttpReply reply = Post(port(), "/v1/chat/completions", kChat);
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_EQ(reply.Json()["error"]["code"], "context_length_exceeded") << reply.body;
  EXPECT_EQ(reply.Json()["error"]["message"], "the prompt has 9000 tokens; the context holds 8192");
  EXPECT_EQ(reply.retry_after, "");
  runtime_.SetScript({.failure = absl::ResourceExhaustedError("the KV cache budget is full")});
  reply = Post(port(), "/v1/chat/completions", kChat);
  EXPECT_EQ(reply.status, 429) << reply.body;
  EXPECT_EQ(reply.Json()["error"]["type"], "rate_limit_error");
  EXPECT_EQ(reply.retry_after, "1");
}

TEST_F(HttpApiTest, WithNoModelLoadedTheNamedOneIsLoaded) {
  runtime_.SetModels({FakeModel("m")}, /*load_first=*/false);
  runtime_.SetScript({.tokens = ScriptTokens({"a"})});
  const HttpReply reply = Post(port(), "/v1/chat/completions", kChat);
  EXPECT_EQ(reply.status, 200) << "the named model is loaded on demand: " << reply.body;
}

}  // namespace
}  // namespace octo::testing
