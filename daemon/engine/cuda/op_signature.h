// The signature of a CudaBackend op for StepGraphs: every argument that
// decides what the op launches, field by field (never a struct's raw bytes:
// its padding is indeterminate). A pointer counts as its address, never the
// data behind it.
#pragma once

#include <span>
#include <type_traits>
#include <vector>

#include "daemon/engine/cuda/step_graphs.h"
#include "kernels/ops.h"

namespace octo::signature {

template <typename T>
  requires(std::is_arithmetic_v<T> || std::is_pointer_v<T> || std::is_enum_v<T>)
void Sign(StepGraphs& g, T value) {
  g.Sign(value);
}
inline void Sign(StepGraphs& g, const WeightMatrix& w) {
  g.Sign(w.type);
  g.Sign(w.data);
  g.Sign(w.rows);
  g.Sign(w.cols);
  g.Sign(w.expert_stride);
}
inline void Sign(StepGraphs& g, const KvCacheTypes& t) {
  g.Sign(t.k);
  g.Sign(t.v);
}
inline void Sign(StepGraphs& g, const RopeParams& p) {
  for (int v : {p.n_heads, p.head_dim, p.rope_dim}) g.Sign(v);
  g.Sign(p.freq_base);
  g.Sign(p.neox);
  g.Sign(p.freq_factors);
}
inline void Sign(StepGraphs& g, const AttentionParams& p) {
  for (int v : {p.n_tokens, p.first_pos, p.n_heads, p.n_kv_heads, p.head_dim, p.tree_base, p.max_ctx}) g.Sign(v);
  g.Sign(p.scale);
  g.Sign(p.tree_mask);
  g.Sign(p.causal);
  Sign(g, p.types);
  g.Sign(p.first_pos_at);
}
inline void Sign(StepGraphs& g, const MatMulExpertsParams& p) {
  for (int v : {p.n_experts, p.k, p.n_tokens}) g.Sign(v);
  g.Sign(p.x_per_choice);
}
inline void Sign(StepGraphs& g, const MoeCombineParams& p) {
  for (const float* v : {p.expert_out, p.weights, p.shared, p.shared_gate_logits}) g.Sign(v);
  g.Sign(p.out);
  for (int v : {p.n_rows, p.k, p.dim}) g.Sign(v);
}
inline void Sign(StepGraphs& g, const DeltaNetConvParams& p) {
  for (int v : {p.n_tokens, p.channels, p.kernel}) g.Sign(v);
}
inline void Sign(StepGraphs& g, const GatedDeltaRuleParams& p) {
  for (int v : {p.n_tokens, p.k_heads, p.v_heads, p.head_dim, p.chunk}) g.Sign(v);
  for (int64_t v : {p.qkv_stride, p.ba_stride, p.first_position}) g.Sign(v);
  g.Sign(p.grouped_heads);
  g.Sign(p.grouped_ba);
  g.Sign(p.eps);
}
inline void Sign(StepGraphs& g, const cuda::Exec& e) {
  g.Sign(e.scratch);
  g.Sign(e.scratch_bytes);
}
template <typename T>
void Sign(StepGraphs& g, std::span<T> values) {
  g.Sign(values.size());
  for (const auto& v : values) Sign(g, v);
}
template <typename T>
void Sign(StepGraphs& g, const std::vector<T>& values) {
  Sign(g, std::span<const T>(values));
}

// op, then each argument.
template <typename... A>
void SignOp(StepGraphs& g, const char* op, const A&... args) {
  g.Sign(op);
  (Sign(g, args), ...);
}

}  // namespace octo::signature
