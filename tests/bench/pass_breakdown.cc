#include "tests/bench/matmul_breakdown.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo::bench {
namespace {

struct Role {
  const char* name;
  WeightMatrix LayerWeights::*matrix;
};
// In the order ForwardLlama multiplies them.
constexpr Role kLayerRoles[] = {
    {"wq", &LayerWeights::wq},         {"wk", &LayerWeights::wk},     {"wv", &LayerWeights::wv},
    {"wo", &LayerWeights::wo},         {"gate", &LayerWeights::w_gate}, {"up", &LayerWeights::w_up},
    {"down", &LayerWeights::w_down},
};
constexpr size_t kNumLayerRoles = sizeof(kLayerRoles) / sizeof(kLayerRoles[0]);

uint64_t MatrixBytes(const WeightMatrix& w) { return static_cast<uint64_t>(w.rows) * RowBytes(w.type, w.cols); }

void NoteType(MatMulRole& role, const WeightMatrix& w) {
  const std::string name(GgmlTypeName(w.type));
  if (role.types.empty()) {
    role.types = name;
  } else if (absl::StrCat("+", role.types, "+").find(absl::StrCat("+", name, "+")) == std::string::npos) {
    absl::StrAppend(&role.types, "+", name);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

absl::StatusOr<MatMulBreakdown> TimeMatMuls(WeightStore& store, int n_tokens, int n_out,
                                            const cpu::Exec& exec, int reps) {
  const ModelConfig& c = store.config();
  if (c.n_experts > 0) return absl::InvalidArgumentError("the MatMul breakdown covers dense models only");
  const size_t max_cols = std::max({c.dim, c.hidden_dim, c.n_heads * c.head_dim});
  const size_t max_rows = std::max({c.dim, c.hidden_dim, c.n_heads * c.head_dim});
  std::vector<float> x(static_cast<size_t>(n_tokens) * max_cols);
  std::vector<float> out(std::max(static_cast<size_t>(n_tokens) * max_rows, static_cast<size_t>(n_out) * c.vocab_size));
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f;
  }

  MatMulBreakdown result;
  result.roles.resize(kNumLayerRoles + 1);
  for (size_t r = 0; r < kNumLayerRoles; ++r) result.roles[r].role = kLayerRoles[r].name;
  MatMulRole& lm_head = result.roles.back();
  lm_head.role = "lm_head";

  using Clock = std::chrono::steady_clock;
  auto timed = [&](const WeightMatrix& w, int rows, double& seconds) -> absl::Status {
    const Clock::time_point start = Clock::now();
    absl::Status status = cpu::MatMul(w, x.data(), out.data(), rows, exec);
    seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return status;
  };
  std::vector<std::vector<double>> samples(result.roles.size());
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<double> seconds(result.roles.size(), 0.0);
    for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
      OCTO_ASSIGN_OR_RETURN(const LayerWeights* w, store.Acquire(layer));
      absl::Status status;
      for (size_t r = 0; r < kNumLayerRoles && status.ok(); ++r) {
        const WeightMatrix& m = w->*kLayerRoles[r].matrix;
        status = timed(m, n_tokens, seconds[r]);
        if (rep == 0) {
          result.roles[r].bytes += MatrixBytes(m);
          result.roles[r].elements += static_cast<uint64_t>(m.rows) * m.cols;
          NoteType(result.roles[r], m);
        }
      }
      store.Release(layer);
      OCTO_RETURN_IF_ERROR(Annotate(status, absl::StrCat("layer ", layer)));
    }
    OCTO_RETURN_IF_ERROR(Annotate(timed(store.globals().lm_head, n_out, seconds.back()), "lm_head"));
    for (size_t r = 0; r < seconds.size(); ++r) samples[r].push_back(seconds[r]);
  }
  lm_head.bytes = MatrixBytes(store.globals().lm_head);
  lm_head.elements = static_cast<uint64_t>(store.globals().lm_head.rows) * store.globals().lm_head.cols;
  NoteType(lm_head, store.globals().lm_head);
  for (size_t r = 0; r < result.roles.size(); ++r) {
    result.roles[r].seconds = Median(samples[r]);
    result.seconds += result.roles[r].seconds;
  }
  return result;
}

}  // namespace octo::bench
