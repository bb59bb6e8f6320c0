// The Ollama routes over a scripted runtime: NDJSON streams, the final
// object's context and counters, load/unload requests, imports, model listings.
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/http/ollama_api.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

TEST_F(HttpApiTest, OllamaGenerateStreamsNdjsonAndReturnsContext) {
  runtime_.SetScript({.tokens = ScriptTokens({"Hello", " you"}), .finish_reason = "length",
                      .stats = {.prompt_tokens = 3, .generated_tokens = 2, .decode_seconds = 0.5}});
  const HttpReply reply = Post(port(), "/api/generate", {{"model", "m"}, {"prompt", "Hi"}, {"options", {{"temperature", 0}}}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, "application/x-ndjson");
  const std::vector<json> lines = reply.Lines();
  ASSERT_EQ(lines.size(), 3u) << reply.body;
  EXPECT_EQ(lines[0]["response"], "Hello");
  EXPECT_EQ(lines[0]["done"], false);
  EXPECT_EQ(lines[0]["model"], "m");
  EXPECT_EQ(lines[1]["response"], " you");
  const json& last = lines[2];
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["response"], "");
  // The fake tokenizes one token per byte after BOS (1): "Hi" -> 1 72 105; the reply's ids are 100, 101.
  EXPECT_EQ(last["context"], json({1, 72, 105, 100, 101}));
  EXPECT_EQ(last["eval_count"], 2);
  EXPECT_EQ(last["eval_duration"], 500000000);
  EXPECT_GT(last["total_duration"].get<int64_t>(), 0);
  EXPECT_EQ(runtime_.last_job().prompt_tokens, (std::vector<int32_t>{1, 72, 105}));
  EXPECT_EQ(runtime_.last_job().sampling.temperature, 0);
  EXPECT_EQ(runtime_.last_job().model, "m") << "the job runs only on the model it asked for";
}

TEST_F(HttpApiTest, OllamaGenerateContinuesAContext) {
  runtime_.SetScript({.tokens = ScriptTokens({"!"})});
  const HttpReply reply = Post(port(), "/api/generate", {{"model", "m"}, {"prompt", "A"}, {"context", {1, 72}}, {"stream", false}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["response"], "!");
  EXPECT_EQ(reply.Json()["context"], json({1, 72, 65, 100})) << "no second BOS before the new text";
}

TEST_F(HttpApiTest, OllamaGenerateUsesTheChatTemplateUnlessRaw) {
  ModelSummary chat_model = FakeModel("c");
  chat_model.chat_template = "chatml";
  runtime_.SetModels({chat_model}, true);
  ASSERT_EQ(Post(port(), "/api/generate", {{"model", "c"}, {"prompt", "Hi"}, {"system", "S"}, {"stream", false}}).status, 200);
  // The fake renders a chat as "role: content\n" per message.
  std::vector<int32_t> expected = {1};
  for (unsigned char c : std::string("system: S\nuser: Hi\n")) expected.push_back(c);
  EXPECT_EQ(runtime_.last_job().prompt_tokens, expected);
  ASSERT_EQ(Post(port(), "/api/generate", {{"model", "c"}, {"prompt", "Hi"}, {"raw", true}, {"stream", false}}).status, 200);
  EXPECT_EQ(runtime_.last_job().prompt_tokens, (std::vector<int32_t>{1, 72, 105}));
}

// A model summary always names the family it chats in (chatml for a
// model without a template of its own), so /api/generate's `system` reaches
// the prompt. A `template` naming a family does so on any model.
TEST_F(HttpApiTest, OllamaGenerateSystemGoesIntoThePrompt) {
  ASSERT_EQ(Post(port(), "/api/generate",
                 {{"model", "m"}, {"prompt", "Hi"}, {"system", "S"}, {"template", "chatml"}, {"stream", false}})
                .status,
            200);
  std::vector<int32_t> expected = {1};
  for (unsigned char c : std::string("system: S\nuser: Hi\n")) expected.push_back(c);
  EXPECT_EQ(runtime_.last_job().prompt_tokens, expected);
  EXPECT_EQ(runtime_.last_job().chat_template, "chatml");
  // raw: the prompt as is; system and template are ignored, as Ollama does.
  ASSERT_EQ(Post(port(), "/api/generate",
                 {{"model", "m"}, {"prompt", "Hi"}, {"system", "S"}, {"template", "chatml"}, {"raw", true},
                  {"stream", false}})
                .status,
            200);
  EXPECT_EQ(runtime_.last_job().prompt_tokens, (std::vector<int32_t>{1, 72, 105}));
}

TEST_F(HttpApiTest, OllamaShowNamesTheTemplateInUse) {
  ModelSummary plain = FakeModel("plain");
  plain.chat_template = "chatml";  // what the core reports for a model without a template
  runtime_.SetModels({plain}, true);
  const HttpReply reply = Post(port(), "/api/show", {{"model", "plain"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["template"], "chatml");
}

TEST_F(HttpApiTest, OllamaShowGivesTheGgufsOwnTemplateAndStopTokens) {
  ModelSummary m = FakeModel("llama3");
  m.chat_template = "llama3";
  m.chat_template_text = "{% for message in messages %}<|start_header_id|>{{ message['role'] }}{% endfor %}";
  m.stop = {"<|end_of_text|>", "<|eot_id|>"};
  runtime_.SetModels({m}, true);
  const json shown = Post(port(), "/api/show", {{"model", "llama3"}}).Json();
  EXPECT_EQ(shown["template"], m.chat_template_text);
  EXPECT_EQ(shown["parameters"], "stop \"<|end_of_text|>\"\nstop \"<|eot_id|>\"");
}

// Ollama's `template`: a family's name, or a template whose family octod
// recognises from its text; the job asks for that family.
TEST_F(HttpApiTest, OllamaChatTemplateFieldPicksTheFamily) {
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const std::pair<std::string, std::string> cases[] = {
      {"llama3", "llama3"},
      {"mistral", "mistral-v3"},  // an alias: its family's name
      {"{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n",
       "chatml"},
      {"<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>", "llama3"},
  };
  for (const auto& [field, family] : cases) {
    const HttpReply reply =
        Post(port(), "/api/chat", {{"model", "m"}, {"messages", messages}, {"template", field}, {"stream", false}});
    ASSERT_EQ(reply.status, 200) << field << " -> " << reply.body;
    EXPECT_EQ(runtime_.last_job().chat_template, family) << field;
  }
  ASSERT_EQ(Post(port(), "/api/chat", {{"model", "m"}, {"messages", messages}, {"stream", false}}).status, 200);
  EXPECT_EQ(runtime_.last_job().chat_template, "") << "no template: the model's own";
}

TEST_F(HttpApiTest, OllamaUnknownTemplateIsA400NamingTheField) {
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const std::string alpaca = "### Instruction:\n{{ .Prompt }}\n### Response:\n";
  for (const std::string& bad : {std::string("alpaca"), alpaca}) {
    const HttpReply reply = Post(port(), "/api/chat", {{"model", "m"}, {"messages", messages}, {"template", bad}});
    EXPECT_EQ(reply.status, 400) << reply.body;
    const std::string error = reply.Json()["error"];
    EXPECT_EQ(error.rfind("template: ", 0), 0u) << error;
    EXPECT_NE(error.find("chatml"), std::string::npos) << "lists the families: " << error;
    EXPECT_NE(error.find("llama3"), std::string::npos) << "lists the families: " << error;
  }
  HttpReply reply = Post(port(), "/api/generate", {{"model", "m"}, {"prompt", "Hi"}, {"template", 7}});
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_NE(reply.Json()["error"].get<std::string>().find("template: expected a string"), std::string::npos);
  const std::string huge = "<|im_start|>" + std::string(kMaxOllamaTemplateBytes, 'x');
  reply = Post(port(), "/api/chat", {{"model", "m"}, {"messages", messages}, {"template", huge}});
  EXPECT_EQ(reply.status, 400) << reply.body.substr(0, 200);
  EXPECT_NE(reply.Json()["error"].get<std::string>().find(absl::StrCat("at most ", kMaxOllamaTemplateBytes)),
            std::string::npos);
  EXPECT_EQ(runtime_.jobs_submitted(), 0);
}

TEST_F(HttpApiTest, OllamaChat) {
  runtime_.SetScript({.tokens = ScriptTokens({"Hey", "!"})});
  const json request = {{"model", "m:latest"},
                        {"messages", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi"}}}}};
  const HttpReply reply = Post(port(), "/api/chat", request);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::vector<json> lines = reply.Lines();
  ASSERT_EQ(lines.size(), 3u) << reply.body;
  EXPECT_EQ(lines[0]["message"], json({{"role", "assistant"}, {"content", "Hey"}}));
  EXPECT_EQ(lines[0]["model"], "m:latest");
  EXPECT_EQ(lines[2]["done"], true);
  EXPECT_EQ(lines[2]["done_reason"], "stop");
  EXPECT_FALSE(lines[2].contains("context"));
  json whole = request;
  whole["stream"] = false;
  EXPECT_EQ(Post(port(), "/api/chat", whole).Json()["message"]["content"], "Hey!");
}

TEST_F(HttpApiTest, OllamaLoadAndUnloadRequests) {
  HttpReply reply = Post(port(), "/api/generate", {{"model", "other"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["done_reason"], "load");
  EXPECT_EQ(runtime_.Report().model->path, "other");
  EXPECT_EQ(runtime_.jobs_submitted(), 0);
  reply = Post(port(), "/api/chat", {{"model", "other"}, {"keep_alive", 0}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["done_reason"], "unload");
  EXPECT_FALSE(runtime_.Report().model.has_value());
  EXPECT_EQ(Post(port(), "/api/chat", {{"model", "ghost"}, {"keep_alive", 0}}).status, 404);
}

// /api/create imports a GGUF as a new model, streaming the decomposition
// as Ollama streams its progress; "success" ends it. /api/pull is a 501
// that says what to do instead.
TEST_F(HttpApiTest, OllamaCreateStreamsTheImportThenSuccess) {
  HttpReply reply = Post(port(), "/api/create", {{"model", "new"}, {"from", "/models/x.gguf"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, "application/x-ndjson");
  const std::vector<json> expected = {{{"status", "decomposing"}, {"total", 200}, {"completed", 100}},
                                      {{"status", "decomposing"}, {"total", 200}, {"completed", 200}},
                                      {{"status", "success"}}};
  EXPECT_EQ(reply.Lines(), expected) << reply.body;
  EXPECT_EQ(Get(port(), "/api/tags").Json()["models"].back()["name"], "new");

  reply = Post(port(), "/api/create", {{"name", "old-style"}, {"modelfile", "# imported\nFROM /models/y.gguf\n"},
                                       {"stream", false}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json(), json({{"status", "success"}}));
  EXPECT_EQ(Post(port(), "/api/show", {{"model", "old-style"}}).status, 200);

  struct Case {
    json body;
    int status;
    std::string needle;
  };
  const std::vector<Case> refused = {
      {{{"model", "new"}, {"from", "/models/x.gguf"}}, 409, "exists"},
      {{{"from", "/models/x.gguf"}}, 400, "model: required"},
      {{{"model", "q"}, {"from", "/models/x.gguf"}, {"quantize", "q4_K_M"}}, 400, "quantize: not supported"},
      {{{"model", "q"}, {"modelfile", "FROM /x.gguf\nPARAMETER temperature 0"}}, 400, "only FROM is supported"},
      {{{"model", "q"}, {"modelfile", "# nothing"}}, 400, "no FROM line"},
      {{{"model", 7}}, 400, "model: expected a string"},
  };
  for (const Case& c : refused) {
    reply = Post(port(), "/api/create", c.body);
    EXPECT_EQ(reply.status, c.status) << c.body << ": " << reply.body;
    EXPECT_NE(reply.body.find(c.needle), std::string::npos) << c.body << ": " << reply.body;
  }
  reply = Post(port(), "/api/pull", {{"model", "llama3.2"}});
  EXPECT_EQ(reply.status, 501);
  EXPECT_NE(reply.body.find("no registry"), std::string::npos) << reply.body;
  EXPECT_NE(reply.body.find("/api/create"), std::string::npos) << reply.body;
}

// /api/copy and /api/delete on the root's models: 200 with an empty body,
// and the errors Ollama users meet.
TEST_F(HttpApiTest, OllamaCopyAndDeleteModels) {
  HttpReply reply = Post(port(), "/api/copy", {{"source", "other:latest"}, {"destination", "other-copy"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.body, "");
  EXPECT_EQ(Get(port(), "/api/tags").Json()["models"].back()["name"], "other-copy");
  EXPECT_EQ(Post(port(), "/api/copy", {{"source", "other"}, {"destination", "m"}}).status, 409);
  EXPECT_EQ(Post(port(), "/api/copy", {{"source", "ghost"}, {"destination", "x"}}).status, 404);
  EXPECT_EQ(Post(port(), "/api/copy", {{"source", "other"}}).status, 400) << "destination: required";

  reply = Request(port(), "DELETE", "/api/delete", json({{"model", "other-copy"}}).dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(Get(port(), "/api/tags").Json()["models"].size(), 2u);
  reply = Request(port(), "DELETE", "/api/delete", json({{"model", "m"}}).dump());
  EXPECT_EQ(reply.status, 409) << "the loaded model: " << reply.body;
  EXPECT_EQ(Request(port(), "DELETE", "/api/delete", json({{"model", "ghost"}}).dump()).status, 404);
  EXPECT_EQ(Post(port(), "/api/delete", {{"model", "other"}}).status, 405);
}

TEST_F(HttpApiTest, OllamaModelListings) {
  HttpReply reply = Get(port(), "/api/tags");
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_EQ(reply.Json()["models"].size(), 2u);
  EXPECT_EQ(reply.Json()["models"][1]["name"], "other");
  EXPECT_EQ(reply.Json()["models"][1]["details"]["family"], "qwen2");
  EXPECT_EQ(reply.Json()["models"][1]["size"], 3 << 20);
  reply = Post(port(), "/api/show", {{"model", "other"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["model_info"]["qwen2.block_count"], 6);
  EXPECT_EQ(Post(port(), "/api/show", {{"name", "m"}}).Json()["model_info"]["general.architecture"], "llama");
  reply = Post(port(), "/api/show", {{"model", "nope"}});
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(reply.Json(), json({{"error", "model 'nope' not found"}}));
  reply = Get(port(), "/api/ps");
  ASSERT_EQ(reply.Json()["models"].size(), 1u);
  EXPECT_EQ(reply.Json()["models"][0]["name"], "m");
  EXPECT_EQ(Get(port(), "/api/version").Json()["version"], "9.9.9");
  EXPECT_EQ(Get(port(), "/").body, "Octo is running");
}

TEST_F(HttpApiTest, OllamaErrorsAreOneMessage) {
  struct Case {
    std::string path, body;
    int status;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"/api/generate", "{not json", 400, "not valid JSON"},
      {"/api/generate", R"({"prompt": "x"})", 400, "model: required"},
      {"/api/generate", R"({"model": "m", "prompt": 5})", 400, "prompt: expected a string"},
      {"/api/generate", R"({"model": "m", "prompt": "x", "options": {"top_k": "many"}})", 400, "options.top_k"},
      {"/api/generate", R"({"model": "zz", "prompt": "x"})", 404, "model 'zz' not found"},
      {"/api/chat", R"({"model": "m", "messages": [{"role": "user"}], "format": {"type": "object", "not": {}}})", 400, "format: #: not is not supported"},
      {"/api/chat", R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", 400, "images"},
  };
  for (const Case& c : cases) {
    const HttpReply reply = Request(port(), "POST", c.path, c.body);
    EXPECT_EQ(reply.status, c.status) << c.body << " -> " << reply.body;
    ASSERT_TRUE(reply.Json()["error"].is_string()) << reply.body;
    EXPECT_NE(reply.Json()["error"].get<std::string>().find(c.needle), std::string::npos) << reply.body;
  }
  EXPECT_EQ(runtime_.jobs_submitted(), 0);
}

}  // namespace
}  // namespace octo::testing
