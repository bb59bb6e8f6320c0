// octod end to end, everything real: the daemon and its loader as processes,
// the unix socket, the shared-memory ring, octo-gen and octo-ctl as clients.
// What a user would check: the daemon's greedy tokens are the in-process
// engine's (octo-ctl run) on every model kind, whether layers are resident
// or streamed, and concurrent clients each get what they get alone while
// sharing forward passes.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon/server/octod_harness.h"
#include "tests/shared_data.h"

namespace octo::testing {
namespace {

constexpr char kPrompt[] = "Once upon a time";
constexpr int kTokens = 32;

std::vector<int> ServedTokens(const OctodProcess& octod, const std::string& prompt, int max_tokens) {
  const RunResult r = octod.Gen({prompt, "--temp", "0", "-n", std::to_string(max_tokens), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return TokenIds(r.out);
}

// One octod serves each ../shared model in turn (octo-ctl load), and a
// generated one; each gives octo-ctl run's greedy tokens.
TEST_F(OctodTest, EveryModelKindGivesTheEnginesGreedyTokens) {
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  const std::vector<std::pair<std::string, std::string>> shared = {
      {"stories260k-f32", "models/stories260K.gguf"},
      {"tinystories-q8_0", "models/TinyStories-656K-Q8_0.gguf"},
      {"llama-q4_k_m", "models/widened/llama-Q4_K_M-mix.gguf"},
      {"qwen2-q4_k_m", "models/widened/qwen2-Q4_K_M-mix.gguf"},
      {"moe-q4_k_m", "models/widened/moe-Q4_K_M-mix.gguf"},
  };
  std::vector<std::string> names;
  for (const auto& [name, file] : shared) {
    OCTO_REQUIRE_SHARED(file);
    ASSERT_TRUE(Decompose(SharedPath(file), ModelDir(name)));
    names.push_back(name);
  }
  MakeModel("generated", 4);
  names.push_back("generated");

  ASSERT_TRUE(octod_.Start(ServeArgs("")));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const RunResult load = octod_.Ctl("load", {name});
    ASSERT_EQ(load.exit_code, 0) << load.err;
    const std::vector<int> engine = EngineTokens(ModelDir(name), kPrompt, kTokens);
    ASSERT_FALSE(engine.empty());
    EXPECT_EQ(ServedTokens(octod_, kPrompt, kTokens), engine);
  }
}

// Residency set by octod's start flags: every layer resident, or every layer
// streamed through a one-layer ring. Same tokens, the engine's.
TEST_F(OctodTest, StreamedAndResidentDaemonsGiveTheEnginesTokens) {
  std::vector<std::string> names = {"generated"};
  MakeModel("generated", 8);
  if (HaveShared("models/widened/llama-Q4_K_M-mix.gguf")) {
    ASSERT_TRUE(Decompose(SharedPath("models/widened/llama-Q4_K_M-mix.gguf"), ModelDir("llama-q4_k_m")));
    names.push_back("llama-q4_k_m");
  }
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const std::vector<int> engine = EngineTokens(ModelDir(name), kPrompt, kTokens);
    ASSERT_FALSE(engine.empty());

    ASSERT_TRUE(octod_.Start(ServeArgs(name)));
    nlohmann::json status = octod_.Status();
    EXPECT_EQ(status["residency"]["streamed_layers"], 0) << status.dump();
    EXPECT_FALSE(status["loader"]["running"].get<bool>()) << "nothing to stream, no loader";
    EXPECT_EQ(ServedTokens(octod_, kPrompt, kTokens), engine) << "resident";
    ASSERT_TRUE(octod_.Stop());

    ASSERT_TRUE(octod_.Start(ServeArgs(name, StreamEveryLayer(name))));
    EXPECT_EQ(ServedTokens(octod_, kPrompt, kTokens), engine) << "streamed";
    status = octod_.Status();
    EXPECT_EQ(status["residency"]["resident_layers"], 0) << status.dump();
    EXPECT_EQ(status["residency"]["ring_slots"], 1) << status.dump();
    ASSERT_FALSE(status["layers"].empty());
    for (const auto& layer : status["layers"]) {
      EXPECT_GE(JsonU64(layer["loads"]), engine.size()) << "every pass reads every layer: " << layer.dump();
    }
    ASSERT_TRUE(octod_.Stop());
  }
}

// Two, then eight octo-gen processes at once, each with its own prompt: each
// gets exactly the tokens it gets alone, and they shared forward passes.
TEST_F(OctodTest, ConcurrentClientsGetTheirOwnTokensInSharedPasses) {
  MakeModel("m", 8);
  // Streamed: every pass waits on the loader, so the clients overlap surely.
  ASSERT_TRUE(octod_.Start(ServeArgs("m", StreamEveryLayer("m"))));
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "In a small town", "She opened",
                                            "One day", "The sun was hot", "Tom and Sam", "A big red ball"};
  constexpr int kConcurrentTokens = 24;
  std::vector<std::vector<int>> alone;
  for (const std::string& prompt : prompts) {
    alone.push_back(ServedTokens(octod_, prompt, kConcurrentTokens));
    ASSERT_FALSE(alone.back().empty()) << prompt;
  }

  for (size_t clients : {2u, 8u}) {
    SCOPED_TRACE(std::to_string(clients) + " clients");
    const uint64_t passes_before = JsonU64(octod_.Status()["passes"]);
    std::vector<std::vector<std::string>> runs;
    for (size_t i = 0; i < clients; ++i) {
      runs.push_back({prompts[i], "--temp", "0", "-n", std::to_string(kConcurrentTokens), "--json"});
    }
    const std::vector<RunResult> results = octod_.GenConcurrently(runs);
    const uint64_t passes = JsonU64(octod_.Status()["passes"]) - passes_before;

    int batch_peak = 0;
    uint64_t tokens = 0;
    for (size_t i = 0; i < clients; ++i) {
      ASSERT_EQ(results[i].exit_code, 0) << prompts[i] << ": " << results[i].err;
      EXPECT_EQ(TokenIds(results[i].out), alone[i]) << prompts[i];
      const nlohmann::json done = DoneEvent(results[i].out);
      ASSERT_TRUE(done.is_object()) << results[i].out;
      batch_peak = std::max(batch_peak, done["stats"]["batch_peak"].get<int>());
      tokens += alone[i].size();
    }
    EXPECT_GE(batch_peak, 2) << "no client shared a pass with another";
    // Alone, each token costs a pass (the first comes with the prompt's).
    EXPECT_LT(passes, tokens) << "the clients ran one after another";
  }
}

}  // namespace
}  // namespace octo::testing
