// The mixture-of-experts FFN, as llama.cpp's llm_build_moe_ffn computes it:
// router logits -> softmax -> top-k experts (weights renormalized for
// mixtral-style llama and qwen3moe, not for qwen2moe) -> for each chosen
// expert down(silu(gate x) * up x) * weight, summed in the order the
// experts were chosen; plus qwen2moe's gated shared expert.
//
// Rows are grouped by expert so each expert's matrices are walked once per
// pass, whatever the batch; a row's result does not depend on which other
// rows share its experts (MatMul is row-independent), so a token gets the
// same bits alone or batched.
#include <cmath>
#include <cstring>

#include "daemon/engine/forward.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// down(silu(gate · in) * (up · in)) for n rows of `in` (n, dim) into `out`
// (n, dim); hb/hb2 hold (n, width).
absl::Status SwiGlu(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                    const float* in, float* out, int n, RunState& s, const cpu::Exec& exec) {
  const size_t width = static_cast<size_t>(gate.rows);
  if (s.hb.size() < n * width) s.hb.resize(n * width);
  if (s.hb2.size() < n * width) s.hb2.resize(n * width);
  const WeightMatrix gate_up[] = {gate, up};
  float* const gate_up_out[] = {s.hb.data(), s.hb2.data()};
  OCTO_RETURN_IF_ERROR(cpu::MatMulGroup(gate_up, in, gate_up_out, n, exec));
  OCTO_RETURN_IF_ERROR(cpu::SiluMul(s.hb.data(), s.hb2.data(), s.hb.data(), static_cast<int64_t>(n) * width));
  return cpu::MatMul(down, s.hb.data(), out, n, exec);
}

// qwen2moe gives raw softmax weights; the others renormalize the top k.
bool NormalizesExpertWeights(const ModelConfig& c) { return c.architecture != "qwen2moe"; }

}  // namespace

absl::Status MoeFfn(const ModelConfig& c, const LayerWeights& w, int n, RunState& s, const cpu::Exec& exec) {
  const int dim = static_cast<int>(c.dim);
  const int n_experts = static_cast<int>(c.n_experts);
  const int k = static_cast<int>(c.n_experts_used);

  // Router: which k experts each row goes to, and with what weight.
  OCTO_RETURN_IF_ERROR(cpu::MatMul(w.router, s.xb.data(), s.router_logits.data(), n, exec));
  OCTO_RETURN_IF_ERROR(cpu::TopKExperts(s.router_logits.data(), n, n_experts, k, NormalizesExpertWeights(c),
                                        s.expert_ids.data(), s.expert_weights.data()));

  // Each expert over the rows routed to it; results land in expert_out[row][slot].
  for (int e = 0; e < n_experts; ++e) {
    int m = 0;
    for (int row = 0; row < n; ++row) {
      for (int j = 0; j < k; ++j) {
        if (s.expert_ids[static_cast<size_t>(row) * k + j] != e) continue;
        s.expert_rows[m] = row;
        s.expert_slots[m] = j;
        std::memcpy(&s.expert_in[static_cast<size_t>(m) * dim], &s.xb[static_cast<size_t>(row) * dim],
                    sizeof(float) * dim);
        ++m;
      }
    }
    if (m == 0) continue;
    float* out = s.x_out.data();  // (m, dim) scratch: x_out is only used after the last layer
    OCTO_RETURN_IF_ERROR(SwiGlu(ExpertSlice(w.gate_exps, n_experts, e), ExpertSlice(w.up_exps, n_experts, e),
                                ExpertSlice(w.down_exps, n_experts, e), s.expert_in.data(), out, m, s, exec));
    for (int i = 0; i < m; ++i) {
      std::memcpy(&s.expert_out[(static_cast<size_t>(s.expert_rows[i]) * k + s.expert_slots[i]) * dim],
                  &out[static_cast<size_t>(i) * dim], sizeof(float) * dim);
    }
  }

  // qwen2moe's shared expert, on the same input, gated by sigmoid(gate_inp · x):
  // into expert_in (free now), its gate logit into router_logits (free too).
  const bool shared = w.shexp_gate.data != nullptr;
  if (shared) {
    OCTO_RETURN_IF_ERROR(SwiGlu(w.shexp_gate, w.shexp_up, w.shexp_down, s.xb.data(), s.expert_in.data(), n, s, exec));
    if (w.shexp_gate_inp.data != nullptr) {
      OCTO_RETURN_IF_ERROR(cpu::MatMul(w.shexp_gate_inp, s.xb.data(), s.router_logits.data(), n, exec));
    }
  }

  // Weighted sum over the k choices, in choice order.
  for (int row = 0; row < n; ++row) {
    float* x = &s.xb[static_cast<size_t>(row) * dim];
    for (int j = 0; j < k; ++j) {
      const float weight = s.expert_weights[static_cast<size_t>(row) * k + j];
      const float* y = &s.expert_out[(static_cast<size_t>(row) * k + j) * dim];
      for (int i = 0; i < dim; ++i) x[i] = (j == 0 ? 0.0f : x[i]) + y[i] * weight;
    }
    if (shared) {
      const float gate = w.shexp_gate_inp.data == nullptr
                             ? 1.0f
                             : 1.0f / (1.0f + std::exp(-s.router_logits[row]));
      const float* y = &s.expert_in[static_cast<size_t>(row) * dim];
      for (int i = 0; i < dim; ++i) x[i] += y[i] * gate;
    }
  }
  return absl::OkStatus();
}

}  // namespace octo
