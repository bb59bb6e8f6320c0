// What the end-to-end tests of octod's HTTP API share: octod with its HTTP
// listener on a free loopback port, curl and Node found on PATH, and
// octo-gen's greedy tokens over gRPC to compare the HTTP clients with.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {

inline constexpr char kOpenAiClientDir[] = OCTO_SOURCE_DIR "/tests/daemon/http/openai_client";
inline constexpr char kToken[] = "http-e2e-token-0123456789";
inline constexpr int kTokens = 24;
inline constexpr char kPrompt[] = "Once upon a time";

// The texts of octo-gen --json's token events, in order.
inline std::vector<std::string> TokenTexts(const std::string& json_lines) {
  std::vector<std::string> texts;
  for (absl::string_view line : absl::StrSplit(json_lines, '\n', absl::SkipEmpty())) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == "token") texts.push_back(event["text"]);
  }
  return texts;
}

// The executable `name` on PATH (RunCommand does not search it), or "".
inline std::string FindCommand(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "/usr/bin:/bin" : path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

inline const std::string& CurlPath() {
  static const std::string path = FindCommand("curl");
  return path;
}
inline const std::string& NodePath() {
  static const std::string path = FindCommand("node");
  return path;
}

// Why the npm client `package` (openai, ollama) cannot run here -- node or
// the package missing (a user's clone before `npm ci`) -- or "" when it can:
// its tests skip with that reason.
inline std::string NpmClientMissing(const std::string& package) {
  if (NodePath().empty()) return "node is not installed";
  if (!std::filesystem::exists(std::string(kOpenAiClientDir) + "/node_modules/" + package)) {
    return "the " + package + " npm client is not installed: run `npm ci` in " + kOpenAiClientDir + " (.ci/run does)";
  }
  return "";
}

// Overwrites the value of the string key `key` in the GGUF at `path` with
// `text` padded with spaces to the value's length, in place: the file keeps
// its size and layout. Blank (text ""), a chat template reads as "the
// model has none".
inline void ReplaceGgufString(const std::string& path, const std::string& key, const std::string& text) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file) << path;
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof(v)); };  // little-endian
  // A KV pair: key (u64 length, bytes), value type (u32; 8 = string), value (u64 length, bytes).
  const size_t at = bytes.find(u64(key.size()) + key);
  ASSERT_NE(at, std::string::npos) << key << " is not in " << path;
  size_t pos = at + sizeof(uint64_t) + key.size();
  uint32_t type = 0;
  uint64_t length = 0;
  ASSERT_LE(pos + sizeof(type) + sizeof(length), bytes.size());
  std::memcpy(&type, bytes.data() + pos, sizeof(type));
  std::memcpy(&length, bytes.data() + pos + sizeof(type), sizeof(length));
  ASSERT_EQ(type, 8u) << key << " is not a string";
  ASSERT_LE(text.size(), length) << "the new value must fit the old one";
  pos += sizeof(type) + sizeof(length);
  ASSERT_LE(pos + length, bytes.size());
  file.seekp(static_cast<std::streamoff>(pos));
  file << text << std::string(length - text.size(), ' ');
  ASSERT_TRUE(file.flush()) << path;
}

inline void BlankGgufString(const std::string& path, const std::string& key) { ReplaceGgufString(path, key, ""); }

class HttpE2eTest : public OctodTest {
 protected:
  void SetUp() override { MakeModel("tiny", 4); }

  // octod with the HTTP API on a free loopback port (read from its log),
  // serving `model`.
  void StartWithHttp(std::vector<std::string> extra = {}, const std::string& model = "tiny") {
    std::vector<std::string> args = ServeArgs(model, {"--http-listen", "127.0.0.1:0"});
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(octod_.Start(args));
    port_ = octod_.HttpPort();
    ASSERT_NE(port_, 0) << octod_.Log();
    base_ = absl::StrCat("http://127.0.0.1:", port_);
  }

  // curl's body and status: `curl -sS -N --max-time 60 -w '\n%{http_code}' [args] URL`.
  std::pair<std::string, int> Curl(const std::string& path, std::vector<std::string> args = {}) const {
    std::vector<std::string> argv = {CurlPath(), "-sS", "-N", "--max-time", "60", "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(base_ + path);
    const RunResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t last = r.out.rfind('\n');
    if (last == std::string::npos) return {r.out, 0};
    return {r.out.substr(0, last), std::atoi(r.out.c_str() + last + 1)};
  }
  std::pair<std::string, int> CurlPost(const std::string& path, const std::string& body,
                                       std::vector<std::string> args = {}) const {
    args.insert(args.end(), {"-H", "Content-Type: application/json", "--data-binary", body});
    return Curl(path, args);
  }

  // octo-gen's greedy generation over gRPC.
  struct Generated {
    std::vector<std::string> texts;  // each token's
    std::vector<int> ids;
    std::string text;  // the whole reply: the token texts and the held-back tail
  };
  Generated GenTokens(std::vector<std::string> args) const {
    args.insert(args.end(), {"--temp", "0", "-n", std::to_string(kTokens), "--json"});
    const RunResult r = octod_.Gen(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    Generated generated{TokenTexts(r.out), TokenIds(r.out), ""};
    generated.text = absl::StrJoin(generated.texts, "") + DoneEvent(r.out).value("tail", "");
    return generated;
  }

  int port_ = 0;
  std::string base_;
};

}  // namespace octo::testing
