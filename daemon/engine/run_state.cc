#include "daemon/engine/run_state.h"

#include <algorithm>

namespace octo {
namespace {

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

void RunState::Resize(const ModelConfig& c, int n) {
  const size_t rows = static_cast<size_t>(n);
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t ffn = std::max<size_t>(c.hidden_dim, c.n_experts > 0 ? c.expert_hidden_dim : 0);
  Grow(x, rows * c.dim);
  Grow(xb, rows * c.dim);
  Grow(q, rows * q_dim);
  Grow(k, rows * kv_dim);
  Grow(v, rows * kv_dim);
  Grow(att, rows * q_dim);
  Grow(hb, rows * ffn);
  Grow(hb2, rows * ffn);
  Grow(pos, rows);
  Grow(out_rows, rows);
  Grow(x_out, rows * c.dim);
  if (c.n_experts > 0) {
    Grow(router_logits, rows * c.n_experts);
    Grow(expert_ids, rows * c.n_experts_used);
    Grow(expert_weights, rows * c.n_experts_used);
    Grow(expert_in, rows * c.dim);
    Grow(expert_out, rows * c.n_experts_used * c.dim);
    Grow(expert_rows, rows);
    Grow(expert_slots, rows);
  }
}

}  // namespace octo
