// Several models through the real octod over HTTP: two clients using two
// models alternately get each model's tokens with nothing dropped, a full
// octod unloads the least recently used idle model, keep_alive 0 unloads a
// model once its request ends, and /api/ps and octo-ctl status list them.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "tests/daemon/http/http_e2e_fixture.h"

namespace octo::testing {
namespace {

using json = nlohmann::json;

class HttpModelsE2eTest : public HttpE2eTest {
 protected:
  void SetUp() override {
    HttpE2eTest::SetUp();  // "tiny"
    MakeModel("other", 4, "Q4_K_M", "tiny", 7);
    MakeModel("third", 4, "Q4_K_M", "tiny", 9);
  }

  // Ollama's /api/generate, not streamed: the reply text, or "" on an error.
  std::string Generate(const std::string& model, const json& extra = json::object()) const {
    json request = {{"model", model},
                    {"prompt", kPrompt},
                    {"raw", true},
                    {"stream", false},
                    {"options", {{"temperature", 0}, {"num_predict", kTokens}, {"repeat_penalty", 1}}}};
    request.update(extra);
    const auto [body, status] = CurlPost("/api/generate", request.dump());
    EXPECT_EQ(status, 200) << model << ": " << body;
    return json::parse(body, nullptr, false).value("response", "");
  }

  // The models /api/ps lists.
  std::vector<std::string> Running() const {
    const auto [body, status] = Curl("/api/ps");
    EXPECT_EQ(status, 200) << body;
    std::vector<std::string> names;
    for (const json& m : json::parse(body, nullptr, false).value("models", json::array())) names.push_back(m["name"]);
    return names;
  }
};

TEST_F(HttpModelsE2eTest, TwoClientsOnTwoModelsGetEachModelsTokens) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  const std::string tiny = GenTokens({"--model", "tiny", kPrompt}).text;
  const std::string other = GenTokens({"--model", "other", kPrompt}).text;
  ASSERT_NE(tiny, other) << "different weights";
  // Two clients at once, each alternating between the models.
  std::vector<std::string> first, second;
  std::thread client([&] {
    for (const char* model : {"tiny", "other", "tiny"}) first.push_back(Generate(model));
  });
  for (const char* model : {"other", "tiny", "other"}) second.push_back(Generate(model));
  client.join();
  EXPECT_EQ(first, (std::vector<std::string>{tiny, other, tiny}));
  EXPECT_EQ(second, (std::vector<std::string>{other, tiny, other}));
  EXPECT_FALSE(absl::StrContains(octod_.Log(), "unloading")) << octod_.Log();
  // Both listed, by /api/ps, octo-ctl status and its JSON.
  EXPECT_EQ(Running(), (std::vector<std::string>{"other", "tiny"}));
  const json status = octod_.Status();
  ASSERT_EQ(status["models"].size(), 2u) << status.dump();
  const RunResult text = octod_.Ctl("status");
  EXPECT_TRUE(absl::StrContains(text.out, "loaded      2 models")) << text.out;
  // Unloaded by name; the other keeps serving.
  EXPECT_EQ(octod_.Ctl("unload").exit_code, 1) << "two are loaded: a name is needed";
  const RunResult unload = octod_.Ctl("unload", {"other"});
  EXPECT_EQ(unload.exit_code, 0) << unload.err;
  EXPECT_EQ(Running(), std::vector<std::string>{"tiny"});
  EXPECT_EQ(Generate("tiny"), tiny);
}

TEST_F(HttpModelsE2eTest, AFullOctodUnloadsTheLeastRecentlyUsedAndKeepAliveZeroUnloads) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp({"--max-loaded-models", "2"});
  const std::string tiny = Generate("tiny");
  Generate("other");
  EXPECT_EQ(Generate("tiny"), tiny);  // "other" is now the least recently used
  EXPECT_FALSE(Generate("third").empty());
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "unloading other (least recently used) to make room for third"))
      << octod_.Log();
  EXPECT_EQ(Running(), (std::vector<std::string>{"third", "tiny"}));
  // keep_alive 0: the model goes once its request is answered.
  EXPECT_EQ(Generate("third", {{"keep_alive", 0}}).empty(), false);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    const std::vector<std::string> running = Running();
    gone = running == std::vector<std::string>{"tiny"};
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << octod_.Log();
  // A load request's keep_alive shows as /api/ps's expires_at.
  const auto [body, status] = CurlPost("/api/generate", R"({"model": "tiny", "keep_alive": "1h"})");
  EXPECT_EQ(status, 200) << body;
  const auto [ps, ps_status] = Curl("/api/ps");
  const json listed = json::parse(ps, nullptr, false);
  ASSERT_EQ(listed["models"].size(), 1u) << ps;
  EXPECT_NE(listed["models"][0]["expires_at"], "9999-12-31T23:59:59Z") << ps;  // not "forever"
  EXPECT_GT(listed["models"][0]["size"].get<uint64_t>(), 0u) << ps;
}

}  // namespace
}  // namespace octo::testing
