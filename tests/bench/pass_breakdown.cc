#include "tests/bench/pass_breakdown.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "daemon/engine/cpu_backend.h"
#include "daemon/engine/forward.h"
#include "storage/status_macros.h"

namespace octo::bench {
namespace {

struct Role {
  const char* name;
  WeightMatrix LayerWeights::*matrix;
};
// In the order ForwardLlama multiplies them.
constexpr Role kLayerRoles[] = {
    {"wq", &LayerWeights::wq},       {"wk", &LayerWeights::wk},       {"wv", &LayerWeights::wv},
    {"wo", &LayerWeights::wo},       {"gate", &LayerWeights::w_gate}, {"up", &LayerWeights::w_up},
    {"down", &LayerWeights::w_down},
};
constexpr size_t kNumLayerRoles = sizeof(kLayerRoles) / sizeof(kLayerRoles[0]);

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Describe(MatMulRole& role, const WeightMatrix& w) {
  role.bytes += static_cast<uint64_t>(w.rows) * RowBytes(w.type, w.cols);
  role.elements += static_cast<uint64_t>(w.rows) * w.cols;
  const std::string name(GgmlTypeName(w.type));
  if (absl::StrCat("+", role.types, "+").find(absl::StrCat("+", name, "+")) == std::string::npos) {
    role.types = role.types.empty() ? name : absl::StrCat(role.types, "+", name);
  }
}

// Every matrix of one pass multiplied alone: n_rows rows of x through the
// layers, n_out through the lm_head. Adds each role's time to seconds.
absl::Status TimeMatMuls(WeightStore& store, const cpu::Exec& exec, int n_rows, int n_out, const std::vector<float>& x,
                         std::vector<float>& out, std::vector<double>& seconds) {
  auto timed = [&](const WeightMatrix& w, int rows, double& s) {
    const Clock::time_point start = Clock::now();
    absl::Status status = cpu::MatMul(w, x.data(), out.data(), rows, exec);
    s += SecondsSince(start);
    return status;
  };
  for (uint32_t layer = 0; layer < store.config().n_layers; ++layer) {
    OCTO_ASSIGN_OR_RETURN(const LayerWeights* w, store.Acquire(layer));
    absl::Status status;
    for (size_t r = 0; r < kNumLayerRoles && status.ok(); ++r)
      status = timed(w->*kLayerRoles[r].matrix, n_rows, seconds[r]);
    store.Release(layer);
    OCTO_RETURN_IF_ERROR(Annotate(status, absl::StrCat("layer ", layer)));
  }
  return Annotate(timed(store.globals().lm_head, n_out, seconds.back()), "lm_head");
}

// The store as the pass sees it, timing each layer from Acquire to Release.
class TimedLayers : public LayerSource {
 public:
  explicit TimedLayers(WeightStore& store) : store_(store), seconds_(store.config().n_layers) {}
  absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) override {
    start_ = Clock::now();
    return store_.Acquire(layer);
  }
  void Release(uint32_t layer) override {
    store_.Release(layer);
    seconds_[layer] = SecondsSince(start_);
  }
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  WeightStore& store_;
  std::vector<double> seconds_;
  Clock::time_point start_;
};

// cpu::Attention alone for every layer and sequence, the new tokens' queries
// (any values) over the caches the pass filled. Returns the seconds.
absl::StatusOr<double> TimeAttention(const ModelConfig& c, const cpu::Exec& exec,
                                     const std::vector<std::unique_ptr<KvCache>>& caches, int prompt_tokens,
                                     int tokens_per_seq, const std::vector<float>& q, std::vector<float>& out) {
  const AttentionParams p{.n_tokens = tokens_per_seq,
                          .first_pos = prompt_tokens,
                          .n_heads = static_cast<int>(c.n_heads),
                          .n_kv_heads = static_cast<int>(c.n_kv_heads),
                          .head_dim = static_cast<int>(c.head_dim),
                          .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  const Clock::time_point start = Clock::now();
  for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
    for (const auto& kv : caches) {
      const int l = static_cast<int>(layer);
      OCTO_RETURN_IF_ERROR(cpu::Attention(q.data(), kv->keys(l), kv->values(l), out.data(), p, exec));
    }
  }
  return SecondsSince(start);
}

}  // namespace

absl::StatusOr<PassBreakdown> BreakDownPass(WeightStore& store, const cpu::Exec& exec, int n_seqs, int tokens_per_seq,
                                            int prompt_tokens, int reps) {
  const ModelConfig& c = store.config();
  if (c.n_experts > 0) return absl::InvalidArgumentError("the pass breakdown covers dense models only");
  const int n_rows = n_seqs * tokens_per_seq;

  // The roles, described from layer 0's shapes and every layer's types.
  PassBreakdown result;
  result.roles.resize(kNumLayerRoles + 1);
  for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
    OCTO_ASSIGN_OR_RETURN(const LayerWeights* w, store.Acquire(layer));
    for (size_t r = 0; r < kNumLayerRoles; ++r) Describe(result.roles[r], w->*kLayerRoles[r].matrix);
    store.Release(layer);
  }
  Describe(result.roles.back(), store.globals().lm_head);
  for (size_t r = 0; r < kNumLayerRoles; ++r) {
    result.roles[r].role = kLayerRoles[r].name;
    result.roles[r].n_rows = n_rows;
  }
  result.roles.back().role = "lm_head";
  result.roles.back().n_rows = n_seqs;

  // Inputs for the MatMuls alone: any values do, the cost does not depend on them.
  const size_t max_cols = std::max({c.dim, c.hidden_dim, c.n_heads * c.head_dim});
  const size_t max_rows = std::max({c.dim, c.hidden_dim, c.n_heads * c.head_dim});
  std::vector<float> x(static_cast<size_t>(n_rows) * max_cols);
  std::vector<float> out(std::max(static_cast<size_t>(n_rows) * max_rows, static_cast<size_t>(n_seqs) * c.vocab_size));
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f;
  }

  // The sequences, with their prompts in the caches.
  TimedLayers timed_layers(store);
  const ModelView view{.config = &c, .token_embd = &store.globals().token_embd, .globals = &store.globals(),
                       .layers = &timed_layers};
  auto backend = std::make_shared<CpuBackend>(exec);
  RunState run_state;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<SequenceStep> steps;
  std::vector<float> logits;
  for (int b = 0; b < n_seqs; ++b) {
    caches.push_back(std::make_unique<KvCache>(c, prompt_tokens + tokens_per_seq, backend));
    tokens.emplace_back(std::max(prompt_tokens, tokens_per_seq));
    for (size_t t = 0; t < tokens[b].size(); ++t)
      tokens[b][t] = static_cast<int32_t>((b * 7919 + t * 104729 + 1) % c.vocab_size);
  }
  if (prompt_tokens > 0) {
    for (int b = 0; b < n_seqs; ++b) {
      steps.push_back({.kv = caches[b].get(), .tokens = std::span<const int32_t>(tokens[b].data(), prompt_tokens)});
    }
    OCTO_RETURN_IF_ERROR(ForwardLlama(view, steps, run_state, *backend, logits));
    steps.clear();
  }
  for (int b = 0; b < n_seqs; ++b) {
    steps.push_back({.kv = caches[b].get(), .tokens = std::span<const int32_t>(tokens[b].data(), tokens_per_seq)});
  }

  // Pass and MatMuls in turn, reps times.
  std::vector<double> pass_samples;
  std::vector<double> attention_samples;
  std::vector<std::vector<double>> role_samples(result.roles.size());
  for (int rep = 0; rep < reps; ++rep) {
    for (auto& kv : caches) kv->Truncate(prompt_tokens).IgnoreError();  // attention-only models: always OK
    const Clock::time_point start = Clock::now();
    OCTO_RETURN_IF_ERROR(ForwardLlama(view, steps, run_state, *backend, logits));
    pass_samples.push_back(SecondsSince(start));
    std::vector<double> seconds(result.roles.size(), 0.0);
    OCTO_RETURN_IF_ERROR(TimeMatMuls(store, exec, n_rows, n_seqs, x, out, seconds));
    for (size_t r = 0; r < seconds.size(); ++r) role_samples[r].push_back(seconds[r]);
    OCTO_ASSIGN_OR_RETURN(double attention_s, TimeAttention(c, exec, caches, prompt_tokens, tokens_per_seq, x, out));
    attention_samples.push_back(attention_s);
  }
  result.pass_seconds = Median(pass_samples);
  result.layer_seconds = timed_layers.seconds();
  result.attention_seconds = Median(attention_samples);
  // Token t of a sequence sees prompt_tokens + t + 1 positions; per head and
  // position, q.k and att.v are head_dim multiply-adds each.
  double positions = 0;
  for (int t = 0; t < tokens_per_seq; ++t) positions += prompt_tokens + t + 1;
  result.attention_flops = 4.0 * c.head_dim * c.n_heads * c.n_layers * n_seqs * positions;
  for (size_t r = 0; r < result.roles.size(); ++r) {
    result.roles[r].seconds = Median(role_samples[r]);
    result.matmul_seconds += result.roles[r].seconds;
  }
  return result;
}

}  // namespace octo::bench
