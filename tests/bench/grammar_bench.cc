// grammar_bench: what constrained output costs per decoded token, on a
// Qwen-sized vocabulary (151,936 tokens, the generator's byte-level BPE):
// the fast path (the sampled token checked and taken) and the full mask (the
// trie walked when the sampled token is refused), over replies in JSON mode
// and held to three schemas. With no constraint the cost is nil (no check).
// Two requests in turn share the model's mask cache. Prints each figure
// beside the issue's target, in the same run; with --decode-model, also
// beside the decode step it rides on: that model's batch-1 decode step on
// the CPU engine, timed in the same run (grammar_bench.sh makes a
// Qwen3-0.6B-shaped model for it).
//
//   grammar_bench [--vocab N] [--tokens N] [--seed S] [--decode-model DIR] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "daemon/engine/model.h"
#include "daemon/grammar/grammar_matcher.h"
#include "daemon/grammar/json_grammar.h"
#include "daemon/grammar/json_schema.h"
#include "tests/tools/model_presets.h"

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// The median time of one batch-1 decode step (one token through every
// layer and the lm_head) of the model in `dir`, after an 8-token prompt.
absl::StatusOr<double> DecodeStepMs(const std::string& dir, int threads, int steps) {
  octo::ModelOptions options;
  options.n_threads = threads;
  absl::StatusOr<std::unique_ptr<octo::Model>> model = octo::Model::Open(dir, options);
  if (!model.ok()) return model.status();
  const uint32_t vocab = (*model)->config().vocab_size;
  auto kv = (*model)->NewCache(8 + steps);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 8; ++i) prompt.push_back(static_cast<int32_t>((1000 + 7919 * i) % vocab));
  octo::SequenceStep step{.kv = kv.get(), .tokens = prompt};
  std::vector<float> logits;
  if (absl::Status s = (*model)->Forward(std::span<const octo::SequenceStep>(&step, 1), logits); !s.ok()) return s;
  std::vector<double> ms;
  for (int t = 0; t < steps; ++t) {
    const int32_t next = static_cast<int32_t>((31 + 104729 * t) % vocab);
    step.tokens = std::span<const int32_t>(&next, 1);
    const auto start = Clock::now();
    if (absl::Status s = (*model)->Forward(std::span<const octo::SequenceStep>(&step, 1), logits); !s.ok()) return s;
    ms.push_back(Micros(Clock::now() - start) / 1000);
  }
  return Percentile(ms, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grammar_bench: the constrained-output mask's cost per token"};
  uint32_t vocab_size = 151936;
  int tokens = 400;
  uint64_t seed = 1;
  app.add_option("--vocab", vocab_size, "Vocabulary size");
  app.add_option("--tokens", tokens, "Tokens of the simulated reply");
  app.add_option("--seed", seed, "Which allowed token each step takes");
  std::string decode_model;
  int threads = 0;
  app.add_option("--decode-model", decode_model, "A model directory whose decode step to time beside the mask");
  app.add_option("--threads", threads, "The engine's threads for the decode step (0: all cores)");
  CLI11_PARSE(app, argc, argv);

  double step_ms = 0;
  if (!decode_model.empty()) {
    absl::StatusOr<double> timed = DecodeStepMs(decode_model, threads, 16);
    if (!timed.ok()) {
      std::fprintf(stderr, "grammar_bench: %s: %s\n", decode_model.c_str(), std::string(timed.status().message()).c_str());
      return 1;
    }
    step_ms = *timed;
    std::printf("decode-step: %s batch=1 median=%.1f ms (CPU engine, this machine)\n", decode_model.c_str(), step_ms);
  }

  absl::StatusOr<octo::testing::ModelShape> shape = octo::testing::FindPreset("qwen3-8b");  // Qwen's tokenizer
  if (!shape.ok()) return 1;
  shape->vocab_size = vocab_size;
  absl::StatusOr<octo::testing::GeneratedVocab> vocab = octo::testing::MakeVocab(*shape);
  if (!vocab.ok()) {
    std::fprintf(stderr, "grammar_bench: %s\n", std::string(vocab.status().message()).c_str());
    return 1;
  }
  // Byte-level BPE's characters back to bytes; control tokens stay empty.
  std::map<std::string, char> byte_of;
  const std::vector<std::string>& unicode = octo::testing::Gpt2ByteToUnicode();
  for (int b = 0; b < 256; ++b) byte_of[unicode[b]] = static_cast<char>(b);
  std::vector<std::string> bytes(vocab->tokens.size());
  for (size_t id = 0; id < vocab->tokens.size(); ++id) {
    if (vocab->token_types[id] != 1) continue;  // normal tokens only
    const std::string& t = vocab->tokens[id];
    for (size_t i = 0; i < t.size();) {
      size_t n = 1;
      while (i + n < t.size() && (static_cast<unsigned char>(t[i + n]) & 0xC0) == 0x80) ++n;
      bytes[id] += byte_of[t.substr(i, n)];
      i += n;
    }
  }
  const auto built = Clock::now();
  const octo::TokenTrie trie(bytes);
  const double trie_ms = Micros(Clock::now() - built) / 1000;

  std::printf("grammar-bench: vocab=%u trie-nodes=%zu trie-build=%.0f ms steps=%d per grammar\n", vocab_size,
              trie.nodes(), trie_ms, tokens);
  // JSON mode, then schemas of the kinds clients send (json_schema_test's corpus has more).
  const std::vector<std::pair<std::string, std::string>> constraints = {
      {"json-mode", ""},
      {"person", R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"}},"required":["name","age","email"],"additionalProperties":false})"},
      {"recipe", R"({"type":"object","properties":{"title":{"type":"string"},"steps":{"type":"array","items":{"type":"object","properties":{"text":{"type":"string"},"minutes":{"type":"number","minimum":0,"maximum":600}},"required":["text","minutes"]}},"tags":{"type":"array","items":{"enum":["quick","vegan","spicy"]},"maxItems":3}},"required":["title","steps"]})"},
      {"tool-call", R"({"anyOf":[{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"]}},"required":["name","arguments"]},{"type":"object","properties":{"name":{"const":"search"},"arguments":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}},"required":["name","arguments"]}]})"},
  };
  for (const auto& [label, schema] : constraints) {
    std::string text = octo::kJsonObjectGrammar;
    if (!schema.empty()) {
      absl::StatusOr<std::string> converted = octo::JsonSchemaToGrammar(nlohmann::ordered_json::parse(schema));
      if (!converted.ok()) {
        std::fprintf(stderr, "grammar_bench: %s: %s\n", label.c_str(), std::string(converted.status().message()).c_str());
        return 1;
      }
      text = *converted;
    }
    auto grammar = std::make_shared<const octo::Grammar>(*octo::Grammar::Parse(text));
    // Two requests in turn, sharing the model's mask cache as octod's
    // generations do: the second finds the first's masks.
    octo::MaskCache shared(64);
    std::vector<uint8_t> allowed;
    std::vector<double> mask_us, fast_us;
    std::vector<size_t> slow_by_request;
    for (int request = 0; request < 2; ++request) {
      std::mt19937_64 rng(seed);
      octo::GrammarMatcher matcher(grammar);
      size_t slow = 0;
      for (int step = 0; step < tokens; ++step) {
        auto start = Clock::now();
        matcher.FillMask(trie, allowed, &shared);
        const double us = Micros(Clock::now() - start);
        mask_us.push_back(us);
        slow += us > 1000;
        std::vector<int32_t> ok;
        for (size_t id = 0; id < allowed.size(); ++id) {
          if (allowed[id] != 0) ok.push_back(static_cast<int32_t>(id));
        }
        if (ok.empty() || matcher.CanEnd()) {
          matcher = octo::GrammarMatcher(grammar);  // a whole value: start the next
          continue;
        }
        // The fast path: a sampled token the grammar takes, checked and taken.
        const int32_t pick = ok[rng() % ok.size()];
        start = Clock::now();
        const bool took = matcher.Accept(bytes[pick]);
        fast_us.push_back(Micros(Clock::now() - start));
        if (!took) return 1;
      }
      slow_by_request.push_back(slow);
    }
    std::printf("grammar-mask: %-9s median=%.0f us (target <= 50) p99=%.0f us (target <= 1000) max=%.0f us; masks over "
                "1 ms (a state's first trie walk): first request %zu, second %zu\n",
                label.c_str(), Percentile(mask_us, 0.5), Percentile(mask_us, 0.99), Percentile(mask_us, 1.0),
                slow_by_request[0], slow_by_request[1]);
    std::printf("grammar-fast-path: %-9s median=%.1f us p99=%.1f us (target < 20)\n", label.c_str(),
                Percentile(fast_us, 0.5), Percentile(fast_us, 0.99));
    if (step_ms > 0) {
      // A step that draws a refused token pays the mask; one whose draw the
      // grammar takes pays the fast path.
      std::printf("grammar-vs-decode: %-9s mask median %.4f%% and p99 %.3f%% of the %.1f ms decode step; fast path "
                  "median %.5f%%\n",
                  label.c_str(), 100 * Percentile(mask_us, 0.5) / 1000 / step_ms,
                  100 * Percentile(mask_us, 0.99) / 1000 / step_ms, step_ms,
                  100 * Percentile(fast_us, 0.5) / 1000 / step_ms);
    }
  }
  return 0;
}
