// One request must never take octod down. The real octod, over HTTP, gets
// one request of each class of hostile input (issue 25), each on every JSON
// route where the class applies; each gets a 4xx that names what is wrong
// with a short message, and after each the daemon still answers a normal
// completion.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_client.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

using nlohmann::json;

// A value nested `depth` arrays deep around 1.
std::string Nested(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

// An error body is short whatever was sent: no echo of the value.
constexpr size_t kMaxErrorBody = 1024;

struct Hostile {
  std::string what;
  std::string path;
  std::string body;  // raw bytes
  int status;
  std::string needle;  // in the error body
};

class HttpHostileTest : public OctodTest {
 protected:
  void SetUp() override {
    MakeModel("tiny", 2);
    ASSERT_TRUE(octod_.Start(ServeArgs("tiny", {"--http-listen", "127.0.0.1:0"})));
    port_ = octod_.HttpPort();
    ASSERT_NE(port_, 0) << octod_.Log();
  }

  // Sends `c`, checks its answer, then checks that octod still serves.
  void Expect(const Hostile& c) {
    SCOPED_TRACE(c.what + " on " + c.path);
    const HttpReply reply = Request(port_, "POST", c.path, c.body, {{"Content-Type", "application/json"}});
    EXPECT_EQ(reply.status, c.status) << reply.body.substr(0, 300);
    EXPECT_NE(reply.body.find(c.needle), std::string::npos) << reply.body.substr(0, 300);
    EXPECT_LT(reply.body.size(), kMaxErrorBody) << reply.body.substr(0, 300);
    ExpectServing();
  }

  void ExpectServing() {
    ASSERT_TRUE(ProcessRuns(octod_.pid())) << "octod died:\n" << octod_.Log();
    const HttpReply reply = Post(port_, "/v1/completions",
                                 {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}, {"temperature", 0}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(reply.Json()["usage"]["completion_tokens"], 2);
  }

  // A chat body with `field` set to the raw JSON text `value`.
  static std::string ChatWith(const std::string& field, const std::string& value) {
    return absl::StrCat(R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], ")", field, "\": ", value,
                        "}");
  }
  static std::string CompletionWith(const std::string& field, const std::string& value) {
    return absl::StrCat(R"({"model": "tiny", "prompt": "x", ")", field, "\": ", value, "}");
  }
  static std::string OllamaWith(const std::string& field, const std::string& value) {
    return absl::StrCat(R"({"model": "tiny", "prompt": "x", ")", field, "\": ", value, "}");
  }

  int port_ = 0;
};

TEST_F(HttpHostileTest, NestingPastSixtyFourLevelsIsRefusedBeforeAnythingReadsIt) {
  const std::string deep = Nested(200000);
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/completions", CompletionWith("max_tokens", deep)},
           {"/v1/completions", absl::StrCat(R"({"model": "tiny", "prompt": )", deep, "}")},
           {"/v1/chat/completions", ChatWith("temperature", deep)},
           {"/api/generate", OllamaWith("context", deep)},
           {"/api/chat", absl::StrCat(R"({"model": "tiny", "messages": )", deep, "}")},
           {"/api/show", absl::StrCat(R"({"model": )", deep, "}")},
           {"/v1/completions", deep}}) {
    Expect({"200000 levels", path, body, 400, "deeper than 64 levels"});
  }
  // 64 levels are JSON like any other: the field's own check answers.
  Expect({"64 levels", "/v1/completions", CompletionWith("max_tokens", Nested(63)), 400,
          "max_tokens: expected an integer, got an array"});
  Expect({"64 levels in a token list", "/v1/completions",
          absl::StrCat(R"({"model": "tiny", "prompt": [)", Nested(62), "]}"), 400,
          "item 0: expected a token id, got an array of 1 item"});
}

TEST_F(HttpHostileTest, NumbersOutsideADoubleOrTheFieldsRangeAreNamed) {
  for (const std::string& number : {std::string("1e999"), std::string("-1e400"), "1" + std::string(400, '0') + ".5"}) {
    Expect({"a float past a double", "/v1/chat/completions", ChatWith("temperature", number), 400,
            "number overflow"});
    Expect({"a float past a double", "/api/generate",
            absl::StrCat(R"({"model": "tiny", "prompt": "x", "options": {"top_p": )", number, "}}"), 400,
            "number overflow"});
  }
  // Integers past 64 bits parse as doubles; the field's range check names them.
  Expect({"an integer past uint64", "/v1/completions", CompletionWith("max_tokens", "123456789012345678901234567890"),
          400, "max_tokens: expected an integer"});
  Expect({"an integer past int64", "/v1/completions", CompletionWith("seed", "18446744073709551615"), 400,
          "seed: 18446744073709551615 is out of range"});
  Expect({"a negative past int64", "/api/generate",
          R"({"model": "tiny", "prompt": "x", "options": {"num_predict": -99999999999999999999}})", 400,
          "options.num_predict: expected an integer"});
  Expect({"a token id past int32", "/v1/completions", R"({"model": "tiny", "prompt": [4294967296]})", 400,
          "item 0: expected a token id, got 4294967296"});
  Expect({"a token id past uint64", "/api/generate",
          R"({"model": "tiny", "prompt": "x", "context": [1e300]})", 400, "expected a token id, got 1e+300"});
}

TEST_F(HttpHostileTest, AFieldOfTheWrongTypeIsA400WhereverItSits) {
  // Inside values the handlers look into: nlohmann's value() and get() throw on these.
  Expect({"response_format.type a number", "/v1/chat/completions", ChatWith("response_format", R"({"type": 5})"), 400,
          "response_format"});
  Expect({"a content part's type an object", "/v1/chat/completions",
          R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]}]})", 400,
          "messages[0].content[0]"});
  Expect({"a content part's text a number", "/v1/chat/completions",
          R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})", 400,
          "messages[0].content[0]"});
  Expect({"stream_options an array", "/v1/completions", CompletionWith("stream_options", "[true]"), 400,
          "stream_options"});
  Expect({"options a string", "/api/generate", OllamaWith("options", "\"fast\""), 400, "options: expected an object"});
  Expect({"keep_alive an object", "/api/generate", OllamaWith("keep_alive", R"({"m": 5})"), 400, "keep_alive"});
  Expect({"a message a number", "/api/chat", R"({"model": "tiny", "messages": [3]})", 400, "messages[0]"});
  Expect({"the model an array", "/api/show", R"({"model": ["tiny"]})", 400, "model"});
  Expect({"the body an array", "/v1/completions", "[1, 2]", 400, "must be a JSON object"});
}

TEST_F(HttpHostileTest, ErrorMessagesQuoteAShortPrefixOfWhatWasSent) {
  const std::string long_text(1 << 20, 'q');
  Expect({"a megabyte model name", "/v1/completions", CompletionWith("model", json(long_text).dump()), 404,
          "model 'qqqq"});
  Expect({"a megabyte model name", "/api/chat",
          absl::StrCat(R"({"model": )", json(long_text).dump(), R"(, "messages": []})"), 404, "not found"});
  Expect({"a megabyte role", "/v1/chat/completions",
          absl::StrCat(R"({"model": "tiny", "messages": [{"role": )", json(long_text).dump(), R"(, "content": "x"}]})"),
          400, "is not system, user, assistant or tool"});
  Expect({"a megabyte string for an integer", "/v1/completions", CompletionWith("max_tokens", json(long_text).dump()),
          400, "max_tokens: expected an integer, got a string"});
  Expect({"a megabyte unterminated string", "/v1/completions", "{\"model\": \"" + long_text, 400,
          "not valid JSON"});
}

TEST_F(HttpHostileTest, BytesThatAreNotJsonAreA400) {
  Expect({"invalid UTF-8 in a string", "/v1/completions", CompletionWith("stop", "\"\xff\xfe\""), 400,
          "not valid JSON"});
  Expect({"a lone surrogate", "/api/generate", OllamaWith("system", R"("\ud800")"), 400, "not valid JSON"});
  Expect({"NaN", "/v1/chat/completions", ChatWith("temperature", "NaN"), 400, "not valid JSON"});
  Expect({"a NUL byte", "/v1/completions", std::string("{\"model\": \"tiny\"\0}", 18), 400, "not valid JSON"});
  Expect({"two values", "/api/chat", R"({"model": "tiny"} {"model": "tiny"})", 400, "not valid JSON"});
  Expect({"an empty body", "/v1/completions", "", 400, "not valid JSON"});
}

}  // namespace
}  // namespace octo::testing
