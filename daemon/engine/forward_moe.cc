// The mixture-of-experts FFN, as llama.cpp's llm_build_moe_ffn computes it:
// router logits -> softmax -> top-k experts (weights renormalized for
// mixtral-style llama and qwen3moe, not for qwen2moe) -> for each chosen
// expert down(silu(gate x) * up x) * weight, summed in the order the
// experts were chosen; plus qwen2moe's gated shared expert.
//
// The expert matmuls take the chosen ids as they are, in backend memory
// (MatMulExperts), so the host never waits for the router: on the CPU the
// op gathers the rows routed to each expert, so each expert's matrices are
// walked once per pass. A row's result does not depend on which other rows
// share its experts, so a token gets the same bits alone or batched.
#include "daemon/engine/forward.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// qwen2moe gives raw softmax weights; the others renormalize the top k.
bool NormalizesExpertWeights(const ModelConfig& c) { return c.architecture != "qwen2moe"; }

}  // namespace

absl::Status MoeFfn(const ModelConfig& c, const LayerWeights& w, int n, RunState& s, Backend& backend) {
  const int dim = static_cast<int>(c.dim);
  const int n_experts = static_cast<int>(c.n_experts);
  const int k = static_cast<int>(c.n_experts_used);
  const int width = static_cast<int>(w.gate_exps.rows / n_experts);  // expert_hidden_dim

  // Router: which k experts each row goes to, and with what weight.
  OCTO_RETURN_IF_ERROR(backend.MatMul(w.router, s.xb.data(), s.router_logits.data(), n));
  OCTO_RETURN_IF_ERROR(backend.TopKExperts(s.router_logits.data(), n, n_experts, k, NormalizesExpertWeights(c),
                                           s.expert_ids.data(), s.expert_weights.data()));

  // Each chosen expert: gate, up (n, k, width); silu(gate) * up; down (n, k, dim).
  OCTO_RETURN_IF_ERROR(s.hb.Grow(backend, static_cast<size_t>(n) * k * width));
  OCTO_RETURN_IF_ERROR(s.hb2.Grow(backend, static_cast<size_t>(n) * k * width));
  const MatMulExpertsParams shared_x{.n_experts = n_experts, .k = k, .n_tokens = n, .x_per_choice = false};
  OCTO_RETURN_IF_ERROR(backend.MatMulExperts(w.gate_exps, s.expert_ids.data(), s.xb.data(), s.hb.data(), shared_x));
  OCTO_RETURN_IF_ERROR(backend.MatMulExperts(w.up_exps, s.expert_ids.data(), s.xb.data(), s.hb2.data(), shared_x));
  OCTO_RETURN_IF_ERROR(backend.SiluMul(s.hb.data(), s.hb2.data(), s.hb.data(), static_cast<int64_t>(n) * k * width));
  const MatMulExpertsParams per_choice{.n_experts = n_experts, .k = k, .n_tokens = n, .x_per_choice = true};
  OCTO_RETURN_IF_ERROR(
      backend.MatMulExperts(w.down_exps, s.expert_ids.data(), s.hb.data(), s.expert_out.data(), per_choice));

  // qwen2moe's shared expert, on the same input, gated by sigmoid(gate_inp · x).
  const bool shared = w.shexp_gate.data != nullptr;
  const bool gated = shared && w.shexp_gate_inp.data != nullptr;
  if (shared) {
    OCTO_RETURN_IF_ERROR(SwiGlu(w.shexp_gate, w.shexp_up, w.shexp_down, s.xb.data(), s.shared_out.data(), n, s, backend));
    if (gated) OCTO_RETURN_IF_ERROR(backend.MatMul(w.shexp_gate_inp, s.xb.data(), s.shared_gate.data(), n));
  }

  // Weighted sum over the k choices, in choice order, plus the shared expert.
  return backend.MoeCombine(MoeCombineParams{.expert_out = s.expert_out.data(),
                                             .weights = s.expert_weights.data(),
                                             .shared = shared ? s.shared_out.data() : nullptr,
                                             .shared_gate_logits = gated ? s.shared_gate.data() : nullptr,
                                             .out = s.xb.data(),
                                             .n_rows = n,
                                             .k = k,
                                             .dim = dim});
}

}  // namespace octo
