#include "daemon/engine/run_state.h"

#include <algorithm>

#include "storage/status_macros.h"

namespace octo {

absl::Status RunState::Resize(Backend& backend, const ModelConfig& c, int n) {
  const size_t rows = static_cast<size_t>(n);
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t ffn = std::max<size_t>(c.hidden_dim, static_cast<size_t>(c.n_experts_used) * c.expert_hidden_dim);
  OCTO_RETURN_IF_ERROR(x.Grow(backend, rows * c.dim));
  OCTO_RETURN_IF_ERROR(xb.Grow(backend, rows * c.dim));
  OCTO_RETURN_IF_ERROR(q.Grow(backend, rows * q_dim));
  OCTO_RETURN_IF_ERROR(k.Grow(backend, rows * kv_dim));
  OCTO_RETURN_IF_ERROR(v.Grow(backend, rows * kv_dim));
  OCTO_RETURN_IF_ERROR(att.Grow(backend, rows * q_dim));
  OCTO_RETURN_IF_ERROR(hb.Grow(backend, rows * ffn));
  OCTO_RETURN_IF_ERROR(hb2.Grow(backend, rows * ffn));
  OCTO_RETURN_IF_ERROR(pos.Grow(backend, 2 * rows));
  OCTO_RETURN_IF_ERROR(tree_mask.Grow(backend, rows));
  OCTO_RETURN_IF_ERROR(x_out.Grow(backend, rows * c.dim));
  if (c.n_experts > 0) {
    OCTO_RETURN_IF_ERROR(router_logits.Grow(backend, rows * c.n_experts));
    OCTO_RETURN_IF_ERROR(expert_ids.Grow(backend, rows * c.n_experts_used));
    OCTO_RETURN_IF_ERROR(expert_weights.Grow(backend, rows * c.n_experts_used));
    OCTO_RETURN_IF_ERROR(expert_out.Grow(backend, rows * c.n_experts_used * c.dim));
    OCTO_RETURN_IF_ERROR(shared_out.Grow(backend, rows * c.dim));
    OCTO_RETURN_IF_ERROR(shared_gate.Grow(backend, rows));
  }
  if (IsHybridArchitecture(c.architecture)) {
    const size_t key_dim = size_t{c.ssm_k_heads} * c.ssm_head_dim, value_dim = size_t{c.ssm_v_heads} * c.ssm_head_dim;
    OCTO_RETURN_IF_ERROR(qg.Grow(backend, rows * 2 * q_dim));
    OCTO_RETURN_IF_ERROR(gate.Grow(backend, rows * q_dim));
    OCTO_RETURN_IF_ERROR(dn_qkv.Grow(backend, rows * (2 * key_dim + value_dim)));
    OCTO_RETURN_IF_ERROR(dn_conv.Grow(backend, rows * (2 * key_dim + value_dim)));
    OCTO_RETURN_IF_ERROR(dn_z.Grow(backend, rows * value_dim));
    OCTO_RETURN_IF_ERROR(dn_b.Grow(backend, rows * 2 * c.ssm_v_heads));
    OCTO_RETURN_IF_ERROR(dn_a.Grow(backend, rows * c.ssm_v_heads));
    OCTO_RETURN_IF_ERROR(dn_o.Grow(backend, rows * value_dim));
  }
  if (x_host.size() < rows * c.dim) x_host.resize(rows * c.dim);
  if (pos_host.size() < 2 * rows) pos_host.resize(2 * rows);
  if (tree_mask_host.size() < rows) tree_mask_host.resize(rows);
  if (out_rows.size() < rows) out_rows.resize(rows);
  return absl::OkStatus();
}

}  // namespace octo
