// octo-gen's logic (RunGen) in-process against the service over a real
// socket, with a FakeRuntime: what it prints, what it asks octod.
#include "client/gen_command.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "daemon/grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/server/test_server.h"

namespace octo {
namespace {

using testing::FakeScript;
using testing::ScriptTokens;

// A FILE* writing into a string.
class MemoryFile {
 public:
  MemoryFile() : file_(open_memstream(&data_, &size_)) {}
  ~MemoryFile() {
    std::fclose(file_);
    std::free(data_);
  }
  std::FILE* get() { return file_; }
  std::string str() {
    std::fflush(file_);
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

class GenCommandTest : public ::testing::Test {
 protected:
  GenCommandTest() {
    server_.runtime().SetModels({testing::FakeModel("tiny")}, /*load_first=*/true);
    ConnectOptions options;
    options.socket = server_.socket_path();
    client_ = *OctoClient::Connect(options);
  }

  // Parses `args` as octo-gen's flags would be (the sampling ones).
  GenFlags Flags(std::vector<std::string> args) {
    GenFlags flags;
    CLI::App app;
    app.add_option("prompt", flags.prompt);
    app.add_flag("--chat", flags.chat);
    app.add_option("--system", flags.system);
    app.add_option("--session", flags.session);
    app.add_flag("--json", flags.json);
    app.add_flag("--stats", flags.stats);
    AddSamplingFlags(&app, &flags.sampling);
    std::reverse(args.begin(), args.end());
    app.parse(args);
    return flags;
  }

  int Run(const GenFlags& flags, const std::string& input = "") {
    std::istringstream in(input);
    return RunGen(flags, *client_, in, out_.get(), err_.get());
  }

  testing::FakeRuntime& runtime() { return server_.runtime(); }

  testing::TestServer server_;
  std::unique_ptr<OctoClient> client_;
  MemoryFile out_, err_;
};

TEST_F(GenCommandTest, PromptStreamsTextAndTail) {
  FakeScript script;
  script.tokens = ScriptTokens({"Hello", ",", " world"});
  script.tail = "!";
  runtime().SetScript(script);
  EXPECT_EQ(Run(Flags({"Say hi"})), 0) << err_.str();
  EXPECT_EQ(out_.str(), "Hello, world!\n");
  EXPECT_EQ(runtime().last_job().prompt, "Say hi");
  EXPECT_FALSE(runtime().last_job().chat);
}

TEST_F(GenCommandTest, OnlyGivenSamplingFlagsAreSent) {
  const GenFlags flags = Flags({"x", "--temp", "0", "-n", "5", "--stop", "END", "--seed", "0"});
  v1::SamplingParams proto;
  SamplingToProto(flags.sampling, &proto);
  EXPECT_TRUE(proto.has_temperature());
  EXPECT_EQ(proto.temperature(), 0);
  EXPECT_TRUE(proto.has_max_tokens());
  EXPECT_EQ(proto.max_tokens(), 5);
  EXPECT_TRUE(proto.has_seed());
  EXPECT_EQ(proto.seed(), 0u);
  EXPECT_FALSE(proto.has_top_k());
  EXPECT_FALSE(proto.has_top_p());
  EXPECT_FALSE(proto.has_min_p());
  EXPECT_FALSE(proto.has_repeat_penalty());
  ASSERT_EQ(proto.stop_size(), 1);
  EXPECT_EQ(Run(flags), 0);
  const SamplingParams sent = runtime().last_job().sampling;
  EXPECT_EQ(sent.temperature, 0);
  EXPECT_EQ(sent.max_tokens, 5);
  EXPECT_EQ(sent.seed, std::optional<uint64_t>(0));
  EXPECT_EQ(sent.top_k, SamplingParams().top_k);
}

// --grammar sends the file's GBNF; --json-schema sends the schema's grammar
// (properties in the file's order); a schema the converter refuses is an
// error naming the flag and the keyword, and nothing is sent.
TEST_F(GenCommandTest, GrammarAndJsonSchemaFilesBecomeTheRequestsGrammar) {
  char dir_template[] = "/tmp/octo-gen-test-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string gbnf = dir + "/digits.gbnf", schema = dir + "/point.json", bad = dir + "/bad.json";
  std::ofstream(gbnf) << "root ::= [0-9]+";
  std::ofstream(schema) << R"({"type": "object", "properties": {"y": {"type": "integer"}, "x": {"type": "integer"}},
                              "required": ["y", "x"], "additionalProperties": false})";
  std::ofstream(bad) << R"({"type": "integer", "multipleOf": 4})";
  runtime().SetScript({});
  GenFlags flags = Flags({"x"});
  flags.grammar_file = gbnf;
  EXPECT_EQ(Run(flags), 0) << err_.str();
  EXPECT_EQ(runtime().last_job().grammar, "root ::= [0-9]+");
  flags.grammar_file.clear();
  flags.json_schema_file = schema;
  EXPECT_EQ(Run(flags), 0) << err_.str();
  const std::string sent = runtime().last_job().grammar;
  EXPECT_TRUE(absl::StartsWith(sent, "root ::= ")) << sent;
  const auto matches = [&](const std::string& text) {
    GrammarMatcher matcher(std::make_shared<const Grammar>(*Grammar::Parse(sent)));
    return matcher.Accept(text) && matcher.CanEnd();
  };
  EXPECT_TRUE(matches(R"({"y": 1, "x": 2})")) << sent;
  EXPECT_FALSE(matches(R"({"x": 2, "y": 1})")) << "the file's order: " << sent;
  flags.json_schema_file = bad;
  EXPECT_NE(Run(flags), 0);
  EXPECT_TRUE(absl::StrContains(err_.str(), "--json-schema")) << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "multipleOf")) << err_.str();
  EXPECT_EQ(runtime().last_job().grammar, sent) << "nothing sent";
  std::filesystem::remove_all(dir);
}

TEST_F(GenCommandTest, StopTakesOneStringPerFlag) {
  const GenFlags flags = Flags({"--stop", "END", "the prompt", "--stop", "\n"});
  EXPECT_EQ(flags.prompt, "the prompt");
  EXPECT_EQ(flags.sampling.stop, (std::vector<std::string>{"END", "\n"}));
}

TEST_F(GenCommandTest, JsonLinesStartTokensDone) {
  FakeScript script;
  script.tokens = ScriptTokens({"a", "b"});
  script.tail = "c";
  script.finish_reason = "length";
  runtime().SetScript(script);
  ASSERT_EQ(Run(Flags({"x", "--json"})), 0);
  std::istringstream lines(out_.str());
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(lines, line);) events.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["event"], "started");
  EXPECT_EQ(events[1]["event"], "token");
  EXPECT_EQ(events[1]["id"], 100);
  EXPECT_EQ(events[1]["text"], "a");
  EXPECT_FALSE(events[1].contains("logprob")) << "only with --logprobs";
  EXPECT_EQ(events[3]["event"], "done");
  EXPECT_EQ(events[3]["finish_reason"], "length");
  EXPECT_EQ(events[3]["text"], "abc");
  EXPECT_EQ(events[3]["stats"]["generated_tokens"], 2);
}

TEST_F(GenCommandTest, JsonWithLogprobsCarriesThem) {
  ASSERT_EQ(Run(Flags({"x", "--json", "--logprobs", "2"})), 0);
  std::istringstream lines(out_.str());
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  const nlohmann::json token = nlohmann::json::parse(line);
  EXPECT_EQ(token["logprob"], -0.25);
  ASSERT_EQ(token["top"].size(), 2u);
  EXPECT_EQ(token["top"][1]["id"], 7);
  EXPECT_EQ(runtime().last_job().sampling.top_logprobs, 2);
}

TEST_F(GenCommandTest, StatsGoToStderr) {
  FakeScript script;
  script.tokens = ScriptTokens({"a", "b", "c", "d"});
  script.stats.decode_seconds = 2;
  script.stats.load_wait_seconds = 0.75;
  runtime().SetScript(script);
  ASSERT_EQ(Run(Flags({"x", "--stats"})), 0);
  const std::string err = err_.str();
  EXPECT_NE(err.find("generated 4 tokens in 2.000 s, 2.0 tokens/s"), std::string::npos) << err;
  EXPECT_NE(err.find("waiting on the loader 0.750 s"), std::string::npos) << err;
  EXPECT_EQ(out_.str(), "abcd\n");
}

TEST_F(GenCommandTest, ErrorsArePrintedInWordsWithoutTheirCode) {
  EXPECT_EQ(Run(Flags({"x", "--top-p", "2"})), 1);
  EXPECT_TRUE(absl::StartsWith(err_.str(), "octo-gen: sampling parameter top_p = 2 is out of range")) << err_.str();
  EXPECT_EQ(out_.str(), "") << "no stray newline before an error";
}

TEST_F(GenCommandTest, ConversationKeepsOneSessionAndSendsOnlyNewTurns) {
  FakeScript script;
  script.tokens = ScriptTokens({"ok"});
  runtime().SetScript(script);
  const GenFlags flags = Flags({"--chat", "--system", "Be brief."});
  ASSERT_EQ(Run(flags, "first line\n\n   \nsecond line\n/exit\nnever sent\n"), 0) << err_.str();
  EXPECT_EQ(out_.str(), "ok\nok\n");
  EXPECT_EQ(runtime().jobs_submitted(), 2);
  const GenerateJob last = runtime().last_job();
  EXPECT_TRUE(last.chat);
  EXPECT_FALSE(last.session_id.empty());
  ASSERT_EQ(last.messages.size(), 1u) << "the system message went with the first turn only";
  EXPECT_EQ(last.messages[0].role, "user");
  EXPECT_EQ(last.messages[0].content, "second line");
  // The conversation's session was closed at the end.
  EXPECT_EQ(client_->CloseSession(last.session_id).code(), absl::StatusCode::kNotFound);
}

TEST_F(GenCommandTest, ConversationEndsAtEndOfInput) {
  ASSERT_EQ(Run(Flags({"--chat"}), "only line"), 0);
  EXPECT_EQ(runtime().jobs_submitted(), 1);
}

TEST_F(GenCommandTest, OneChatTurnWithSystemMessage) {
  ASSERT_EQ(Run(Flags({"--chat", "--system", "Be brief.", "Hi"})), 0);
  const GenerateJob job = runtime().last_job();
  ASSERT_EQ(job.messages.size(), 2u);
  EXPECT_EQ(job.messages[0].role, "system");
  EXPECT_EQ(job.messages[1].content, "Hi");
  EXPECT_TRUE(job.session_id.empty()) << "one-shot";
}

TEST_F(GenCommandTest, SessionFlagContinuesASession) {
  absl::StatusOr<v1::CreateSessionResponse> session = client_->CreateSession(0);
  ASSERT_TRUE(session.ok());
  ASSERT_EQ(Run(Flags({"more", "--session", session->session_id()})), 0);
  EXPECT_EQ(runtime().last_job().session_id, session->session_id());
  // A name is opened on first use; an id octod never made is refused.
  ASSERT_EQ(Run(Flags({"more", "--session", "notes"})), 0);
  EXPECT_EQ(runtime().last_job().session_id, "notes");
  EXPECT_EQ(Run(Flags({"more", "--session", "s0123456789abcdef0123456789abcdef"})), 1);
  EXPECT_NE(err_.str().find("s0123456789abcdef0123456789abcdef"), std::string::npos) << err_.str();
  EXPECT_EQ(err_.str().find("NOT_FOUND"), std::string::npos) << err_.str();
}

TEST_F(GenCommandTest, FlagCombinationsAreChecked) {
  EXPECT_FALSE(CheckGenFlags(Flags({})).ok());
  EXPECT_FALSE(CheckGenFlags(Flags({"x", "--system", "s"})).ok());
  EXPECT_TRUE(CheckGenFlags(Flags({"--chat"})).ok());
  EXPECT_TRUE(CheckGenFlags(Flags({"x"})).ok());
}

}  // namespace
}  // namespace octo
