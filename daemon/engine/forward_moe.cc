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

// Router: which k experts each of the n rows of `in` goes to (s.expert_ids),
// and with what weight (s.expert_weights). With shared_gate, also the gated
// shared expert's gate logits (s.shared_gate), between the two: the CUDA
// backend computes that row in the router's launch.
absl::Status Route(const ModelConfig& c, const LayerWeights& w, const float* in, int n, RunState& s, Backend& backend,
                   bool shared_gate = false) {
  OCTO_RETURN_IF_ERROR(backend.MatMul(w.router, in, s.router_logits.data(), n));
  if (shared_gate) OCTO_RETURN_IF_ERROR(backend.MatMul(w.shexp_gate_inp, in, s.shared_gate.data(), n));
  return backend.TopKExperts(s.router_logits.data(), n, static_cast<int>(c.n_experts),
                             static_cast<int>(c.n_experts_used), NormalizesExpertWeights(c), s.expert_ids.data(),
                             s.expert_weights.data());
}

// The experts any row of the batch chose (s.expert_ids), ascending, once
// each: what a two-phase layer must read. The ids come to the host (on a
// GPU this waits for the router).
absl::StatusOr<std::vector<uint32_t>> ChosenExperts(const ModelConfig& c, int n, RunState& s, Backend& backend) {
  std::vector<int32_t> ids(static_cast<size_t>(n) * c.n_experts_used);
  OCTO_RETURN_IF_ERROR(backend.Download(ids.data(), s.expert_ids.data(), sizeof(int32_t) * ids.size()));
  std::vector<bool> chosen(c.n_experts, false);
  for (int32_t e : ids) {
    if (e >= 0 && static_cast<uint32_t>(e) < c.n_experts) chosen[e] = true;
  }
  std::vector<uint32_t> experts;
  for (uint32_t e = 0; e < c.n_experts; ++e) {
    if (chosen[e]) experts.push_back(e);
  }
  return experts;
}

}  // namespace

absl::Status PrefetchExperts(const ModelConfig& c, const LayerWeights& w, uint32_t layer, LayerSource& layers, int n,
                             RunState& s, Backend& backend) {
  OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.x.data(), w.ffn_norm, s.xb.data(), n, static_cast<int>(c.dim), c.norm_eps));
  OCTO_RETURN_IF_ERROR(Route(c, w, s.xb.data(), n, s, backend));
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint32_t> experts, ChosenExperts(c, n, s, backend));
  return layers.FetchExperts(layer, experts, /*routed=*/false);
}

absl::Status MoeFfn(const ModelConfig& c, const LayerWeights& w, uint32_t layer, LayerSource& layers, int n,
                    RunState& s, Backend& backend) {
  const int dim = static_cast<int>(c.dim);
  const int n_experts = static_cast<int>(c.n_experts);
  const int k = static_cast<int>(c.n_experts_used);
  const int width = static_cast<int>(w.gate_exps.rows / n_experts);  // expert_hidden_dim

  // qwen2moe's shared expert, on the same input, gated by sigmoid(gate_inp · x).
  const bool shared = w.shexp_gate.data != nullptr;
  const bool gated = shared && w.shexp_gate_inp.data != nullptr;
  // Router: which k experts each row goes to, and with what weight.
  OCTO_RETURN_IF_ERROR(Route(c, w, s.xb.data(), n, s, backend, gated));
  // A two-phase layer: read the experts the batch routed to (the union).
  if (layers.TwoPhase(layer)) {
    OCTO_ASSIGN_OR_RETURN(const std::vector<uint32_t> experts, ChosenExperts(c, n, s, backend));
    OCTO_RETURN_IF_ERROR(layers.FetchExperts(layer, experts, /*routed=*/true));
  }

  // Each chosen expert: gate, up (n, k, width); silu(gate) * up; down (n, k,
  // dim). The shared expert (its gate's logits came with the router's) after
  // each step, over its own rows (the CUDA backend runs each step of both in
  // one launch, and combines in the down's).
  OCTO_RETURN_IF_ERROR(s.hb.Grow(backend, static_cast<size_t>(n) * k * width));
  OCTO_RETURN_IF_ERROR(s.hb2.Grow(backend, static_cast<size_t>(n) * k * width));
  const MatMulExpertsParams shared_x{.n_experts = n_experts, .k = k, .n_tokens = n, .x_per_choice = false};
  const MatMulExpertsParams per_choice{.n_experts = n_experts, .k = k, .n_tokens = n, .x_per_choice = true};
  if (shared) {
    const size_t shared_width = static_cast<size_t>(w.shexp_gate.rows);
    OCTO_RETURN_IF_ERROR(s.shared_hb.Grow(backend, n * shared_width));
    OCTO_RETURN_IF_ERROR(s.shared_hb2.Grow(backend, n * shared_width));
    const Backend::SharedExpert se{.gate = w.shexp_gate,
                                   .up = w.shexp_up,
                                   .down = w.shexp_down,
                                   .hidden = s.shared_hb.data(),
                                   .hidden_up = s.shared_hb2.data(),
                                   .out = s.shared_out.data()};
    OCTO_RETURN_IF_ERROR(backend.MatMulExpertsGluShared(w.gate_exps, w.up_exps, s.expert_ids.data(), s.xb.data(),
                                                        s.hb.data(), s.hb2.data(), shared_x, se));
    OCTO_RETURN_IF_ERROR(backend.MatMulExpertsShared(w.down_exps, s.expert_ids.data(), s.hb.data(),
                                                     s.expert_out.data(), per_choice, se));
  } else {
    OCTO_RETURN_IF_ERROR(backend.MatMulExpertsGlu(w.gate_exps, w.up_exps, s.expert_ids.data(), s.xb.data(),
                                                  s.hb.data(), s.hb2.data(), shared_x));
    OCTO_RETURN_IF_ERROR(
        backend.MatMulExperts(w.down_exps, s.expert_ids.data(), s.hb.data(), s.expert_out.data(), per_choice));
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
