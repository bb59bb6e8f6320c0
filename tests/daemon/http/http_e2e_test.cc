// The HTTP API of the real octod, driven by the clients users have: the
// official `openai` npm package (Node) for the OpenAI routes and curl for the
// Ollama routes. Both must get the tokens octo-gen gets over gRPC.
//
// The Node client needs `npm ci` in tests/daemon/http/openai_client (.ci/run
// does it); without Node or that install the OpenAI-client test skips.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_e2e_fixture.h"
#include "tests/daemon/server/octod_harness.h"
#include "tests/storage/test_models.h"

namespace octo::testing {
namespace {

using nlohmann::json;

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++count;
  return count;
}

TEST_F(HttpE2eTest, TheOpenAiNpmClientGetsOctoGensTokens) {
  if (const std::string missing = NpmClientMissing("openai"); !missing.empty()) GTEST_SKIP() << missing;
  StartWithHttp();
  const Generated completion = GenTokens({kPrompt});
  const Generated chat = GenTokens({"--chat", "--chat-template", "chatml", kPrompt});
  ASSERT_EQ(completion.texts.size(), static_cast<size_t>(kTokens));
  ASSERT_EQ(chat.texts.size(), static_cast<size_t>(kTokens));
  for (const std::string mode : {"completion-stream", "completion", "chat-stream", "chat"}) {
    const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/openai_check.mjs", base_ + "/v1",
                                    "unused-key", mode, "tiny", kPrompt, std::to_string(kTokens)});
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    const json result = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(result.is_object() && !result.contains("error")) << mode << ": " << r.out;
    const Generated& expected = absl::StartsWith(mode, "chat") ? chat : completion;
    EXPECT_EQ(result["pieces"].get<std::vector<std::string>>(), expected.texts) << mode;
    EXPECT_EQ(result["text"].get<std::string>(), expected.text) << mode;
    EXPECT_EQ(result["finish_reason"], "length") << mode;
    EXPECT_EQ(result["usage"]["completion_tokens"], kTokens) << mode;
  }
}

TEST_F(HttpE2eTest, OllamaRoutesWithCurlGetOctoGensTokens) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  const Generated expected = GenTokens({kPrompt});
  // raw: the prompt as octo-gen sends it, no chat template; repeat_penalty
  // 1: octo-gen's default (Ollama's is 1.1).
  const json options = {{"temperature", 0}, {"num_predict", kTokens}, {"repeat_penalty", 1}};
  const json generate = {{"model", "tiny"}, {"prompt", kPrompt}, {"raw", true}, {"options", options}};
  auto [body, status] = CurlPost("/api/generate", generate.dump());
  ASSERT_EQ(status, 200) << body;
  std::vector<json> lines;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), static_cast<size_t>(kTokens + 1)) << body;
  for (int i = 0; i < kTokens; ++i) EXPECT_EQ(lines[i]["response"], expected.texts[i]) << i;
  const json& done = lines.back();
  EXPECT_EQ(done["done"], true);
  EXPECT_EQ(done["done_reason"], "length");
  EXPECT_EQ(done["eval_count"], kTokens);
  const std::vector<int> context = done["context"];
  ASSERT_GT(context.size(), expected.ids.size());
  EXPECT_EQ(std::vector<int>(context.end() - kTokens, context.end()), expected.ids) << "context ends with the reply's ids";

  const Generated chat_expected = GenTokens({"--chat", kPrompt});
  const json chat = {{"model", "tiny:latest"}, {"stream", false}, {"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                     {"options", options}};
  std::tie(body, status) = CurlPost("/api/chat", chat.dump());
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["message"]["content"], chat_expected.text);

  std::tie(body, status) = Curl("/api/tags");
  ASSERT_EQ(status, 200) << body;
  const json tag = json::parse(body)["models"][0];
  EXPECT_EQ(tag["name"], "tiny");
  EXPECT_EQ(tag["details"]["quantization_level"], "Q4_K_M") << tag;
  EXPECT_TRUE(std::regex_match(tag["details"]["parameter_size"].get<std::string>(), std::regex("[0-9]+\\.[0-9][KMB]")))
      << tag;
  std::tie(body, status) = CurlPost("/api/show", R"({"model": "tiny"})");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["model_info"]["llama.block_count"], 4);
}

// The official ollama npm client (ollama-js) against the same daemon: its
// streamed raw generation and its chat get octo-gen's tokens, its embed the
// vectors octo-gen --embed prints, and its list and show see the model.
TEST_F(HttpE2eTest, TheOllamaNpmClientGetsOctoGensTokensAndVectors) {
  if (const std::string missing = NpmClientMissing("ollama"); !missing.empty()) GTEST_SKIP() << missing;
  StartWithHttp();
  auto ollama = [&](const std::string& mode, const std::string& prompt) {
    const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/ollama_check.mjs", base_, mode,
                                    "tiny", prompt, std::to_string(kTokens)});
    EXPECT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    const json result = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(result.is_object() && !result.contains("error")) << mode << ": " << r.out;
    return result;
  };
  const Generated expected = GenTokens({kPrompt});
  const json streamed = ollama("generate-stream", kPrompt);
  EXPECT_EQ(streamed["pieces"].get<std::vector<std::string>>(), expected.texts);
  EXPECT_EQ(streamed["done_reason"], "length");
  EXPECT_EQ(streamed["eval_count"], kTokens);
  const std::vector<int> context = streamed["context"];
  ASSERT_GE(context.size(), expected.ids.size());
  EXPECT_EQ(std::vector<int>(context.end() - kTokens, context.end()), expected.ids);

  const json chat = ollama("chat", kPrompt);
  EXPECT_EQ(chat["text"], GenTokens({"--chat", kPrompt}).text);
  EXPECT_EQ(chat["eval_count"], kTokens);

  const json embed = ollama("embed", std::string(kPrompt) + "|The cat sat.");
  ASSERT_EQ(embed["embeddings"].size(), 2u) << embed;
  const RunResult grpc = octod_.Gen({"--embed", kPrompt});
  ASSERT_EQ(grpc.exit_code, 0) << grpc.err;
  EXPECT_EQ(embed["embeddings"][0].get<std::vector<float>>(), json::parse(grpc.out).get<std::vector<float>>());

  const json list = ollama("list", "");
  EXPECT_EQ(list["names"], json({"tiny"}));
  EXPECT_EQ(list["capabilities"], json({"completion", "embedding"}));
  EXPECT_EQ(list["family"], "llama");
}

// A GGUF imported with curl, as `ollama create` does: the decomposition
// streams its bytes (the first and last step at least), then "success";
// the new model answers as the folder it came from, and a refused import
// leaves nothing behind.
TEST_F(HttpE2eTest, AGgufImportedWithCurlStreamsItsDecompositionThenServes) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  auto [health, health_status] = Curl("/health");
  EXPECT_EQ(health_status, 200) << health;
  EXPECT_EQ(json::parse(health, nullptr, false), json({{"status", "ok"}, {"model", "tiny"}}));
  const std::string gguf = dir_.Path("tiny.gguf");
  const json create = {{"model", "team/imported"}, {"from", gguf}};
  auto [body, status] = CurlPost("/api/create", create.dump());
  ASSERT_EQ(status, 200) << body;
  std::vector<json> lines;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) lines.push_back(json::parse(line));
  ASSERT_GE(lines.size(), 3u) << body;
  EXPECT_EQ(lines.front()["status"], "decomposing") << body;
  const uint64_t total = lines.front()["total"];
  const uint64_t file_size = std::filesystem::file_size(gguf);
  EXPECT_TRUE(total > file_size / 2 && total <= file_size) << "the tensor bytes: " << body;
  EXPECT_EQ(lines[lines.size() - 2]["completed"], total) << body;
  EXPECT_EQ(lines.back(), json({{"status", "success"}})) << body;
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "created model team/imported from " + gguf)) << octod_.Log();
  EXPECT_EQ(RunCommand({OctoCtlPath(), "verify", ModelDir("team/imported")}).exit_code, 0);

  const json options = {{"temperature", 0}, {"num_predict", 8}, {"repeat_penalty", 1}};
  auto generate = [&](const std::string& model) {
    const json request = {
        {"model", model}, {"prompt", kPrompt}, {"raw", true}, {"stream", false}, {"options", options}};
    auto [reply, code] = CurlPost("/api/generate", request.dump());
    EXPECT_EQ(code, 200) << reply;
    return json::parse(reply, nullptr, false).value("response", "");
  };
  const std::string imported = generate("team/imported");
  EXPECT_FALSE(imported.empty());
  EXPECT_EQ(imported, generate("tiny")) << "the same weights give the same text";

  std::tie(body, status) = CurlPost("/api/create", create.dump());
  EXPECT_EQ(status, 409) << body;
  // Copied, then the original deleted (unloaded first: it is idle).
  std::tie(body, status) = CurlPost("/api/copy", R"({"source": "team/imported", "destination": "team/copy"})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(RunCommand({OctoCtlPath(), "verify", ModelDir("team/copy")}).exit_code, 0);
  EXPECT_EQ(generate("team/copy"), imported);
  std::tie(body, status) = Curl("/api/delete", {"-X", "DELETE", "--data-binary", R"({"model": "team/imported"})"});
  EXPECT_EQ(status, 200) << body;
  EXPECT_FALSE(std::filesystem::exists(ModelDir("team/imported")));
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "unloading team/imported to delete it")) << octod_.Log();
  EXPECT_EQ(generate("team/copy"), imported) << "the copy serves on";
  std::tie(body, status) = CurlPost("/api/create", json({{"model", "bad"}, {"from", dir_.Path("token")}}).dump());
  EXPECT_EQ(status, 404) << body;
  std::ofstream(dir_.Path("not.gguf")) << "this is no GGUF file";
  std::tie(body, status) = CurlPost("/api/create", json({{"model", "bad"}, {"from", dir_.Path("not.gguf")}}).dump());
  EXPECT_EQ(status, 400) << body;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.Path("root"))) {
    EXPECT_NE(entry.path().filename().string().rfind(".bad", 0), 0u) << "left behind: " << entry.path();
  }
  EXPECT_FALSE(std::filesystem::exists(ModelDir("bad")));
}

// Long prompts, through real octod: one of 6000 tokens on a model trained
// for 8192 is served whole (not cut to --session-context); one past the
// context is a 400 context_length_exceeded naming both sizes (OpenAI), or
// cut as Ollama cuts it to the request's num_ctx (Ollama).
TEST_F(HttpE2eTest, LongPromptsUseTheWholeContextAndAreRefusedOrCutPastIt) {
  const std::string gguf = dir_.Path("long.gguf");
  GenerateModel(gguf, "tiny", "Q4_K_M", [](ModelShape& s) {
    s.n_layers = 2;
    s.context_length = 8192;
  });
  ASSERT_TRUE(CachedDecompose(gguf, ModelDir("long")));
  StartWithHttp({"--session-context", "4096"}, "long");
  auto ids = [](int n) {
    json tokens = json::array();
    for (int i = 0; i < n; ++i) tokens.push_back(5 + (i * 11) % 400);
    return tokens;
  };
  json request = {{"model", "long"}, {"prompt", ids(6000)}, {"max_tokens", 2}, {"temperature", 0}};
  auto [body, status] = CurlPost("/v1/completions", request.dump());
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["usage"]["prompt_tokens"], 6000) << body;

  request["prompt"] = ids(8193);
  std::tie(body, status) = CurlPost("/v1/completions", request.dump());
  EXPECT_EQ(status, 400) << body;
  const json error = json::parse(body, nullptr, false)["error"];
  EXPECT_EQ(error["code"], "context_length_exceeded") << body;
  EXPECT_NE(error["message"].get<std::string>().find("8193 tokens; the context holds 8192"), std::string::npos)
      << body;

  const json generate = {{"model", "long"},
                         {"prompt", "x"},
                         {"raw", true},
                         {"context", ids(3000)},
                         {"stream", false},
                         {"options", {{"num_ctx", 2048}, {"num_predict", 4}, {"temperature", 0}}}};
  std::tie(body, status) = CurlPost("/api/generate", generate.dump());
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["prompt_eval_count"], 2044) << "2048 less room for 4 tokens: " << body;
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "truncating input prompt (POST /api/generate): context 2048"))
      << octod_.Log();
  EXPECT_EQ(octod_.Ctl("health").exit_code, 0);
}

// The samples of a Prometheus text exposition, by "name{labels}"; a line
// that is neither a comment nor "name{labels} value" fails the test.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> samples;
  const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) ([-+0-9.eE]+|NaN|[+-]Inf))");
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# HELP ") || absl::StartsWith(line, "# TYPE ")) continue;
    std::cmatch m;
    EXPECT_TRUE(std::regex_match(line.begin(), line.end(), m, sample)) << "not a sample: " << line;
    if (!m.empty()) samples[m[1].str()] = std::strtod(m[3].str().c_str(), nullptr);
  }
  return samples;
}

// /metrics through real octod: it parses, its counters move with a request,
// and --no-http-metrics turns it off.
TEST_F(HttpE2eTest, MetricsParseAndMoveWithARequest) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  auto [body, status] = Curl("/metrics");
  ASSERT_EQ(status, 200) << body;
  std::map<std::string, double> before = ParseMetrics(body);
  const auto info = before.lower_bound("octo_model_info{model=\"tiny\",architecture=\"llama\",backend=\"cpu");
  ASSERT_NE(info, before.end()) << body;
  EXPECT_TRUE(absl::StartsWith(info->first, "octo_model_info{model=\"tiny\",architecture=\"llama\",backend=\"cpu"))
      << body;
  EXPECT_EQ(info->second, 1) << body;
  EXPECT_GT(before["octo_layer_bytes{model=\"tiny\",tier=\"resident\"}"], 0) << body;
  const json request = {{"model", "tiny"}, {"prompt", kPrompt}, {"raw", true}, {"stream", false},
                        {"options", {{"temperature", 0}, {"num_predict", 5}}}};
  std::tie(body, status) = CurlPost("/api/generate", request.dump());
  ASSERT_EQ(status, 200) << body;
  std::tie(body, status) = Curl("/metrics");
  std::map<std::string, double> after = ParseMetrics(body);
  EXPECT_EQ(after["octo_http_requests_total{route=\"/api/generate\",code=\"200\"}"], 1) << body;
  EXPECT_EQ(after["octo_http_requests_total{route=\"/metrics\",code=\"200\"}"], 1) << body;
  EXPECT_EQ(after["octo_requests_total{outcome=\"ok\"}"] - before["octo_requests_total{outcome=\"ok\"}"], 1);
  EXPECT_EQ(after["octo_generated_tokens_total"] - before["octo_generated_tokens_total"], 5) << body;
  EXPECT_GT(after["octo_prompt_tokens_total"], before["octo_prompt_tokens_total"]);
  EXPECT_EQ(after["octo_time_to_first_token_seconds_count"], 1) << body;
  EXPECT_EQ(after["octo_time_to_first_token_seconds_bucket{le=\"+Inf\"}"], 1) << body;
  EXPECT_EQ(after["octo_inter_token_latency_seconds_count"], 4) << "one per gap: " << body;
  EXPECT_GT(after["octo_passes_total"], before["octo_passes_total"]);
  ASSERT_TRUE(octod_.Stop());

  StartWithHttp({"--no-http-metrics"});
  std::tie(body, status) = Curl("/metrics");
  EXPECT_EQ(status, 404) << body;
}

// A GGUF without a chat template chats in chatml, as llama.cpp does; octod
// says so in its log once, and /api/show names the template in use.
TEST_F(HttpE2eTest, AModelWithoutAChatTemplateChatsInChatml) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  const std::string gguf = dir_.Path("plain.gguf");
  std::filesystem::copy_file(dir_.Path("tiny.gguf"), gguf);
  BlankGgufString(gguf, "tokenizer.chat_template");
  ASSERT_TRUE(Decompose(gguf, ModelDir("plain")));
  StartWithHttp({}, "plain");
  auto [body, status] = CurlPost("/api/show", R"({"model": "plain"})");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["template"], "chatml") << body;

  const Generated expected = GenTokens({"--chat", "--chat-template", "chatml", kPrompt});
  const json options = {{"temperature", 0}, {"num_predict", kTokens}, {"repeat_penalty", 1}};
  const json chat = {{"model", "plain"}, {"stream", false}, {"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                     {"options", options}};
  for (int i = 0; i < 2; ++i) {
    std::tie(body, status) = CurlPost("/api/chat", chat.dump());
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(json::parse(body)["message"]["content"], expected.text) << "the chatml prompt";
  }
  const json generate = {{"model", "plain"}, {"prompt", kPrompt}, {"system", "Be brief."}, {"stream", false},
                         {"options", options}};
  std::tie(body, status) = CurlPost("/api/generate", generate.dump());
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["response"],
            GenTokens({"--chat", "--chat-template", "chatml", "--system", "Be brief.", kPrompt}).text)
      << "system and prompt as a chatml chat";
  const std::string log = octod_.Log();
  EXPECT_EQ(Occurrences(log, "it chats in chatml"), 1u) << log;
  EXPECT_TRUE(absl::StrContains(log, "plain: the model has no chat template")) << log;
}

TEST_F(HttpE2eTest, BadRequestsGetTheRightCodeAndOctodStaysUp) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  const std::string token_file = dir_.Path("token");
  std::ofstream(token_file) << kToken << "\n";
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  StartWithHttp({"--token-file", token_file});
  const std::vector<std::string> auth = {"-H", absl::StrCat("Authorization: Bearer ", kToken)};
  struct Case {
    std::string path, body;
    int status;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [)", 400, "not valid JSON"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", 400,
       "\"param\":\"temperature\""},
      {"/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": -3})", 400, "max_tokens"},
      {"/v1/completions", R"({"model": "tiny", "prompt": [99999999]})", 400, "vocabulary"},
      {"/v1/completions", R"({"model": "llama-9000", "prompt": "x"})", 404, "model_not_found"},
      {"/api/generate", R"({"model": "tiny", "prompt": 7})", 400, "prompt: expected a string"},
      {"/api/chat", R"({"model": "nope", "messages": []})", 404, "model 'nope' not found"},
      {"/api/generate", R"({"model": "../tiny", "prompt": "x"})", 404, "not found"},
  };
  for (const Case& c : cases) {
    const auto [body, status] = CurlPost(c.path, c.body, auth);
    EXPECT_EQ(status, c.status) << c.body << " -> " << body;
    EXPECT_NE(body.find(c.needle), std::string::npos) << c.body << " -> " << body;
  }
  auto [body, status] = CurlPost("/v1/completions", R"({"model": "tiny", "prompt": "x"})");
  EXPECT_EQ(status, 401) << body;
  EXPECT_NE(body.find("invalid_api_key"), std::string::npos) << body;
  std::tie(body, status) = Curl("/api/tags", {"-H", "Authorization: Bearer not-the-token-at-all"});
  EXPECT_EQ(status, 401) << body;

  EXPECT_EQ(octod_.Ctl("health").exit_code, 0) << "octod is up";
  // Greedy: an unseeded draw could pick the end token first and finish with 0.
  std::tie(body, status) =
      CurlPost("/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 3, "temperature": 0})", auth);
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["usage"]["completion_tokens"], 3);
}

TEST_F(HttpE2eTest, ADraftModelsWorkShowsInTheUsageCounts) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp({"--draft-model", "tiny"});  // the model drafting for itself: always right
  const Generated plain = GenTokens({kPrompt, "--draft-model", "none"});
  const json request = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", kTokens}, {"temperature", 0}};
  const auto [body, status] = CurlPost("/v1/completions", request.dump());
  ASSERT_EQ(status, 200) << body;
  const json reply = json::parse(body);
  EXPECT_EQ(reply["choices"][0]["text"], plain.text) << "the text without a draft";
  const json& usage = reply["usage"];
  EXPECT_EQ(usage["completion_tokens"], kTokens);
  EXPECT_GT(usage["completion_tokens_details"]["accepted_prediction_tokens"].get<int>(), kTokens / 2) << usage;
  EXPECT_EQ(usage["completion_tokens_details"]["rejected_prediction_tokens"], 0) << usage;
}

TEST_F(HttpE2eTest, HttpAndGrpcClientsShareForwardPasses) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  MakeModel("slow", 8);
  StartWithHttp();
  ASSERT_EQ(octod_.Ctl("load", {"slow"}).exit_code, 0);
  constexpr int kClients = 4;
  constexpr int kEach = 48;
  const uint64_t passes_before = JsonU64(octod_.Status()["passes"]);
  std::vector<std::pair<std::string, int>> replies(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const json request = {{"model", "slow"}, {"prompt", absl::StrCat("Story ", i)}, {"stream", true},
                            {"options", {{"temperature", 0}, {"num_predict", kEach}}}};
      replies[i] = CurlPost("/api/generate", request.dump());
    });
  }
  const RunResult grpc = octod_.Gen({"Story g", "--temp", "0", "-n", std::to_string(kEach), "--json"});
  for (std::thread& client : clients) client.join();
  ASSERT_EQ(grpc.exit_code, 0) << grpc.err;
  EXPECT_EQ(TokenIds(grpc.out).size(), static_cast<size_t>(kEach));
  for (const auto& [body, status] : replies) {
    ASSERT_EQ(status, 200) << body;
    EXPECT_NE(body.find(absl::StrCat("\"eval_count\":", kEach)), std::string::npos) << body;
  }
  const uint64_t passes = JsonU64(octod_.Status()["passes"]) - passes_before;
  // Alone, 5 jobs of 48 tokens take at least 5 * 48 passes.
  EXPECT_LT(passes, uint64_t{(kClients + 1) * kEach}) << "the five generations shared passes";
}

TEST_F(HttpE2eTest, ACurlKilledMidStreamStopsItsGeneration) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp(StreamEveryLayer("tiny"));  // slower: every layer read through the loader
  const json request = {{"model", "tiny"}, {"prompt", kPrompt}, {"stream", true},
                        {"options", {{"temperature", 0}, {"num_predict", 100000}}}};
  const pid_t curl = StartCommand({CurlPath(), "-sS", "-N", "-H", "Content-Type: application/json", "--data-binary",
                                   request.dump(), base_ + "/api/generate"});
  ASSERT_TRUE(WaitFor([&] { return JsonU64(octod_.Status()["generated_tokens"]) >= 8; }, std::chrono::seconds(30)))
      << octod_.Status().dump();
  ::kill(curl, SIGKILL);
  WaitCommand(curl);
  ASSERT_TRUE(WaitFor([&] { return octod_.Status()["sessions"].empty(); }, std::chrono::seconds(10)))
      << "its temporary session is gone: " << octod_.Status().dump();
  const uint64_t generated = JsonU64(octod_.Status()["generated_tokens"]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(JsonU64(octod_.Status()["generated_tokens"]), generated) << "nothing generates any more";
  EXPECT_LT(generated, 1900u) << "stopped long before the context (2048) was full";
}

}  // namespace
}  // namespace octo::testing
