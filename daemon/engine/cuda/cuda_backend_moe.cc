// CudaBackend's mixture-of-experts ops: the router's top-k, the routed and
// shared experts' matmuls and their combine, each signing its arguments and
// queuing its launch (step_graphs.h) or holding it for the op after it
// (cuda_backend.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/engine/cuda/cuda_backend.h"
#include "daemon/engine/cuda/held_launch.h"
#include "daemon/engine/cuda/op_signature.h"
#include "kernels/cuda/fused.h"
#include "kernels/op_checks.h"
#include "storage/status_macros.h"

namespace octo {

using held::Counted;
using held::HeldLaunch;
using held::InOrder;
using signature::SignOp;

absl::Status CudaBackend::MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                        const MatMulExpertsParams& p) {
  const std::optional<cuda::ActQ8Rule> rule = cuda::ExpertsRounding(w);
  const int64_t n_x = p.x_per_choice ? int64_t{p.n_tokens} * p.k : p.n_tokens;
  const size_t scratch = cuda::MatMulExpertsScratchBytes(w, p);
  if (rule && HeldRoundsFor(x, n_x * w.cols, *rule, scratch)) {
    // The held SiLU product rounds itself for these experts.
    auto launch = std::exchange(held_, Held{}).launch;
    OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(scratch));
    const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, *rule, n_x, w.cols);
    SignOp(*graphs_, "MatMulExperts (rounded)", w, expert_ids, x, out, p, exec);
    ExpertsLaunch experts = [launch = std::move(launch), w, expert_ids, x, out, p, exec, q8](
                                const cuda::CombineAfterExperts* tail,
                                const cuda::ActQ8Out* round_norm) mutable -> absl::Status {
      if (absl::Status s = launch(&q8); !s.ok()) return s;
      if (tail != nullptr) {
        return Op("MatMulExperts + MoeCombine + AddRmsNorm",
                  cuda::MatMulExpertsCombineNorm(w, expert_ids, x, out, p, *tail, exec, q8, round_norm));
      }
      return Op("MatMulExperts", cuda::MatMulExpertsGroup({&w, 1}, expert_ids, x, {&out, 1}, p, exec, &q8));
    };
    return HoldExperts(std::move(experts), out, p, w.rows / p.n_experts, nullptr);
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(cuda::MatMulExpertsScratchBytes(w, p)));
  SignOp(*graphs_, "MatMulExperts", w, expert_ids, x, out, p, exec);
  return graphs_->Queue([=] { return Op("MatMulExperts", cuda::MatMulExperts(w, expert_ids, x, out, p, exec)); });
}

absl::Status CudaBackend::MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids,
                                             const float* x, std::span<float* const> outs,
                                             const MatMulExpertsParams& p) {
  const auto alike = [&](const WeightMatrix& w) {
    return w.type == ws[0].type && w.rows == ws[0].rows && w.cols == ws[0].cols &&
           w.expert_stride == ws[0].expert_stride;
  };
  if (ws.size() < 2 || ws.size() > kMaxMatMulGroup || ws.size() != outs.size() || !cuda::ExpertsRounding(ws[0]) ||
      !std::all_of(ws.begin(), ws.end(), alike)) {
    return Backend::MatMulExpertsGroup(ws, expert_ids, x, outs, p);
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(cuda::MatMulExpertsScratchBytes(ws[0], p)));
  SignOp(*graphs_, "MatMulExpertsGroup", ws, expert_ids, x, outs, p, exec);
  return graphs_->Queue([ws = std::vector<WeightMatrix>(ws.begin(), ws.end()),
                         outs = std::vector<float*>(outs.begin(), outs.end()), expert_ids, x, p, exec] {
    return Op("MatMulExpertsGroup", cuda::MatMulExpertsGroup(ws, expert_ids, x, outs, p, exec));
  });
}

absl::Status CudaBackend::MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                                           const float* x, float* out, float* up_out, const MatMulExpertsParams& p) {
  if (!cuda::ExpertsRounding(gate) || gate.type != up.type || gate.rows != up.rows || gate.cols != up.cols ||
      gate.expert_stride != up.expert_stride || p.n_experts <= 0 || p.k <= 0 || p.n_tokens <= 0) {
    return Backend::MatMulExpertsGlu(gate, up, expert_ids, x, out, up_out, p);  // its checks name what is wrong
  }
  const int64_t width = gate.rows / p.n_experts, n_choices = int64_t{p.n_tokens} * p.k;
  // The scratch: out's 8-bit activations at the front (where the down
  // experts' launch reads them), x's after them -- rounded by the held op
  // (the router's launch) when it can, else by this launch's own quantize.
  const size_t front = cuda::ActQ8Bytes(n_choices, width);
  const size_t scratch = front + cuda::MatMulExpertsScratchBytes(gate, p);
  const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(gate);
  // A growth of the counters or the scratch launches the held op first
  // (plain, its pointers still valid): then this launch rounds x itself.
  OCTO_ASSIGN_OR_RETURN(uint32_t* const arrivals, Arrivals(static_cast<size_t>(n_choices * width / cuda::kQ8Chunk)));
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(scratch));
  OCTO_ASSIGN_OR_RETURN(HeldLaunch rounds_x, TakeRoundingOf(x, int64_t{p.n_tokens} * gate.cols, rule, scratch));
  exec.scratch = static_cast<uint8_t*>(exec.scratch) + front;
  exec.scratch_bytes -= front;
  const cuda::ActQ8Out x_q8 = cuda::ActQ8At(exec.scratch, rule, p.n_tokens, gate.cols);
  SignOp(*graphs_, rounds_x ? "MatMulExpertsGlu (rounded)" : "MatMulExpertsGlu", gate, up, expert_ids, x, out, p, exec,
         arrivals);
  return Hold(Held{.launch = [=, rounds_x = std::move(rounds_x)](const cuda::ActQ8Out* q8) mutable -> absl::Status {
                     if (rounds_x) OCTO_RETURN_IF_ERROR(rounds_x(&x_q8));
                     const std::optional<cuda::ActQ8Out> counted = Counted(q8, arrivals);
                     return Op("MatMulExpertsGlu",
                               cuda::MatMulExpertsGlu(gate, up, expert_ids, x, out, p, exec,
                                                      counted ? &*counted : nullptr, rounds_x ? &x_q8 : nullptr));
                   },
                   .out = out,
                   .elements = n_choices * width,
                   .rope = std::nullopt,
                   .norms = {},
                   .span = 0,
                   .free_scratch = front});
}

absl::Status CudaBackend::TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                                      int32_t* expert_ids, float* weights) {
  // The held router MatMul's whole output: one launch, held as a producer of
  // the router's x (cuda_backend.h).
  auto held_router = [&] {
    return held_.matmul && held_.matmul->router && held_error_.ok() && held_.matmul->out == router_logits &&
           held_.matmul->elements == int64_t{n_tokens} * n_experts;
  };
  // The counter first: its growth launches the held MatMul plain.
  uint32_t* arrival = nullptr;
  if (held_router()) {
    OCTO_ASSIGN_OR_RETURN(arrival, Arrivals(1));
  }
  if (held_router()) {
    const HeldMatMul m = *std::exchange(held_, Held{}).matmul;
    SignOp(*graphs_, "TopKExperts (router)", router_logits, n_tokens, n_experts, k, normalize, expert_ids, weights,
           arrival);
    const cuda::TopKExpertsOut top_k{k, normalize, expert_ids, weights, arrival};
    return Hold(Held{.launch = [r = *m.router, x = m.x, top_k](const cuda::ActQ8Out* q8) {
                       return Op("MatMul + TopKExperts", cuda::MatMulTopKExperts(r.w, x, r.logits, r.n_tokens, top_k,
                                                                                 r.exec, q8, r.gate ? &*r.gate : nullptr));
                     },
                     .out = m.x,  // the values it rounds for a consumer: its input
                     .elements = m.x_elements,
                     .rope = std::nullopt,
                     .norms = {},
                     .span = 0});
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "TopKExperts", router_logits, n_tokens, n_experts, k, normalize, expert_ids, weights);
  return graphs_->Queue([=, this] {
    return Op("TopKExperts",
              cuda::TopKExperts(router_logits, n_tokens, n_experts, k, normalize, expert_ids, weights, stream_.get()));
  });
}

absl::Status CudaBackend::MoeCombine(const MoeCombineParams& p) {
  auto combine = [=, this](const cuda::ActQ8Out*) { return Op("MoeCombine", cuda::MoeCombine(p, stream_.get())); };
  if (held_.experts && !held_.combine && held_error_.ok() && held_.experts->out == p.expert_out &&
      held_.experts->p.n_tokens == p.n_rows && held_.experts->p.k == p.k && held_.experts->rows == p.dim &&
      (held_.experts->shared_out == nullptr || held_.experts->shared_out == p.shared)) {
    // The held down experts' whole output: held with them, for the norm
    // after, which their launch may do with this.
    SignOp(*graphs_, "MoeCombine (experts)", p);
    held_.combine = p;
    held_.launch = InOrder(std::move(held_.launch), combine);
    return absl::OkStatus();
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "MoeCombine", p);
  // Held: the norm after it may compute it in its own launch.
  return Hold(Held{.launch = combine,
                   .out = nullptr,  // not a producer that rounds (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .combine = p});
}

std::optional<absl::Status> CudaBackend::AddHeldCombineNorm(float* x, const float* delta, const float* weight,
                                                            float* out, int n_rows, int dim, float eps) {
  if (!held_.combine || !held_error_.ok()) return std::nullopt;
  const MoeCombineParams& c = *held_.combine;
  if (c.out != delta || out != delta || c.n_rows != n_rows || c.dim != dim ||
      !cuda::CheckCombineAddRmsNorm(c, x, weight, eps).ok()) {
    return std::nullopt;  // apart, the two launches
  }
  if (held_.experts) {
    // The down experts' launch before it: the combine and the norm in its
    // last block. The counter first: its growth launches what is held plain
    // (and the norm then launches apart).
    if (n_rows > cuda::kMaxNormAfterAddTokens) return std::nullopt;
    absl::StatusOr<uint32_t*> arrival = Arrivals(1);
    if (!arrival.ok()) return arrival.status();
    if (held_.experts) {
      Held held = std::exchange(held_, Held{});
      const cuda::CombineAfterExperts tail{*held.combine, x, weight, eps, *arrival};
      SignOp(*graphs_, "AddRmsNorm (experts)", x, weight, out, n_rows, dim, eps, *arrival);
      return Hold(Held{.launch = [experts = held.experts->launch, tail](
                                     const cuda::ActQ8Out* q8) { return (*experts)(&tail, q8); },
                       .out = out,
                       .elements = int64_t{n_rows} * dim,
                       .rope = std::nullopt,
                       .norms = {},
                       .span = 0,
                       .free_scratch = scratch_.size()});
    }
    return std::nullopt;
  }
  const MoeCombineParams combine = std::exchange(held_, Held{}).combine.value();
  auto launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("AddRmsNorm", cuda::CombineAddRmsNorm(combine, x, weight, eps, stream_.get(), q8));
  };
  if (n_rows > kMaxDecodeTokens) return graphs_->Queue([launch] { return launch(nullptr); });
  return Hold(Held{.launch = launch, .out = out, .elements = int64_t{n_rows} * dim, .rope = std::nullopt, .norms = {}});
}

absl::Status CudaBackend::HoldExperts(ExpertsLaunch launch, const float* out, const MatMulExpertsParams& p,
                                      int64_t rows, const float* shared_out) {
  if (p.n_tokens > cuda::kMaxNormAfterAddTokens) {
    return graphs_->Queue([launch = std::move(launch)]() mutable { return launch(nullptr, nullptr); });
  }
  // Held, for the MoeCombine and the norm after it.
  auto shared = std::make_shared<ExpertsLaunch>(std::move(launch));
  return Hold(Held{.launch = [shared](const cuda::ActQ8Out*) { return (*shared)(nullptr, nullptr); },
                   .out = nullptr,  // not a producer that rounds (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .experts = HeldExperts{shared, out, p, rows, shared_out}});
}

absl::Status CudaBackend::MatMulExpertsGluShared(const WeightMatrix& gate, const WeightMatrix& up,
                                                 const int32_t* expert_ids, const float* x, float* out,
                                                 float* up_out, const MatMulExpertsParams& p,
                                                 const SharedExpert& shared) {
  const WeightMatrix& shared_gate = shared.gate;
  const bool alike = cuda::ExpertsRounding(gate) && gate.type == up.type && gate.rows == up.rows &&
                     gate.cols == up.cols && gate.expert_stride == up.expert_stride && p.n_experts > 0 && p.k > 0 &&
                     p.n_tokens > 0 && p.n_tokens <= kMaxDecodeTokens && shared_gate.type == gate.type &&
                     shared.up.type == gate.type && shared_gate.cols == gate.cols && shared.up.cols == gate.cols &&
                     shared_gate.rows == shared.up.rows && shared_gate.rows % cuda::kQ8Chunk == 0;
  if (!alike) return Backend::MatMulExpertsGluShared(gate, up, expert_ids, x, out, up_out, p, shared);
  const int64_t width = gate.rows / p.n_experts, n_choices = int64_t{p.n_tokens} * p.k;
  // The scratch: the routed rows' 8-bit activations at the front (where the
  // down experts' launch reads them), the shared rows' after them, x's
  // after those -- rounded by the held op (the router's launch) when it
  // can, else by this launch's own quantize.
  const size_t front = cuda::ActQ8Bytes(n_choices, width) + cuda::ActQ8Bytes(p.n_tokens, shared_gate.rows);
  const size_t scratch = front + cuda::MatMulExpertsScratchBytes(gate, p);
  const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(gate);
  const size_t routed_counters = static_cast<size_t>(n_choices * width / cuda::kQ8Chunk);
  // A growth of the counters or the scratch launches the held op first
  // (plain, its pointers still valid): then this launch rounds x itself.
  OCTO_ASSIGN_OR_RETURN(uint32_t* const arrivals,
                        Arrivals(routed_counters + static_cast<size_t>(p.n_tokens * shared_gate.rows / cuda::kQ8Chunk)));
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(scratch));
  OCTO_ASSIGN_OR_RETURN(HeldLaunch rounds_x, TakeRoundingOf(x, int64_t{p.n_tokens} * gate.cols, rule, scratch));
  exec.scratch = static_cast<uint8_t*>(exec.scratch) + front;
  exec.scratch_bytes -= front;
  const cuda::ActQ8Out x_q8 = cuda::ActQ8At(exec.scratch, rule, p.n_tokens, gate.cols);
  SignOp(*graphs_, rounds_x ? "MatMulExpertsGluShared (rounded)" : "MatMulExpertsGluShared", gate, up, expert_ids, x,
         out, p, exec, arrivals, shared_gate, shared.up, shared.hidden);
  auto launch = std::make_shared<GluPairLaunch>(
      [=, shared_up = shared.up, hidden = shared.hidden, rounds_x = std::move(rounds_x)](
          const cuda::ActQ8Out* q8, const cuda::ActQ8Out* shared_q8) mutable -> absl::Status {
        if (rounds_x) OCTO_RETURN_IF_ERROR(rounds_x(&x_q8));
        const std::optional<cuda::ActQ8Out> counted = Counted(q8, arrivals);
        const std::optional<cuda::ActQ8Out> shared_counted = Counted(shared_q8, arrivals + routed_counters);
        const cuda::SharedExpertGlu glu{shared_gate, shared_up, hidden, shared_counted ? &*shared_counted : nullptr};
        return Op("MatMulExpertsGlu (shared)",
                  cuda::MatMulExpertsGlu(gate, up, expert_ids, x, out, p, exec, counted ? &*counted : nullptr,
                                         rounds_x ? &x_q8 : nullptr, &glu));
      });
  return Hold(Held{.launch = [launch](const cuda::ActQ8Out*) { return (*launch)(nullptr, nullptr); },
                   .out = nullptr,  // not a producer of one output (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .shared_glu = HeldSharedGlu{launch, out, n_choices * width, shared.hidden,
                                               int64_t{p.n_tokens} * shared_gate.rows}});
}

absl::Status CudaBackend::MatMulExpertsShared(const WeightMatrix& w, const int32_t* expert_ids, const float* x,
                                              float* out, const MatMulExpertsParams& p, const SharedExpert& shared) {
  const WeightMatrix& down = shared.down;
  const std::optional<cuda::ActQ8Rule> rule = cuda::ExpertsRounding(w);
  const int64_t n_x = int64_t{p.n_tokens} * p.k;
  // The held MatMulExpertsGluShared whose two outputs these read, rounding
  // them by this launch's one type's rule.
  auto takes_glu = [&] {
    if (!held_.shared_glu || !held_error_.ok() || !rule || !p.x_per_choice || down.type != w.type) return false;
    const HeldSharedGlu& g = *held_.shared_glu;
    return g.out == x && g.elements == n_x * w.cols && g.shared_out == shared.hidden &&
           g.shared_elements == int64_t{p.n_tokens} * down.cols;
  };
  if (!takes_glu()) return Backend::MatMulExpertsShared(w, expert_ids, x, out, p, shared);
  const size_t routed_bytes = cuda::ActQ8Bytes(n_x, w.cols);
  const size_t scratch =
      std::max(cuda::MatMulExpertsScratchBytes(w, p), routed_bytes + cuda::ActQ8Bytes(p.n_tokens, down.cols));
  // The scratch first: a growth launches the held op plain.
  OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(scratch));
  if (!takes_glu()) return Backend::MatMulExpertsShared(w, expert_ids, x, out, p, shared);
  std::shared_ptr<GluPairLaunch> glu = std::exchange(held_, Held{}).shared_glu->launch;
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, *rule, n_x, w.cols);
  const cuda::ActQ8Out shared_q8 =
      cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + routed_bytes, *rule, p.n_tokens, down.cols);
  SignOp(*graphs_, "MatMulExpertsShared (rounded)", w, expert_ids, x, out, p, exec, down, shared.hidden, shared.out);
  ExpertsLaunch experts = [glu, w, expert_ids, x, out, p, exec, q8, shared_q8, down, hidden = shared.hidden,
                           shared_out = shared.out](const cuda::CombineAfterExperts* tail,
                                                    const cuda::ActQ8Out* round_norm) -> absl::Status {
    OCTO_RETURN_IF_ERROR((*glu)(&q8, &shared_q8));
    if (tail != nullptr) {
      const cuda::SharedExpertDown shared_down{down, hidden, shared_q8, shared_out};
      return Op("MatMulExperts + shared + MoeCombine + AddRmsNorm",
                cuda::MatMulExpertsCombineNorm(w, expert_ids, x, out, p, *tail, exec, q8, round_norm, &shared_down));
    }
    OCTO_RETURN_IF_ERROR(
        Op("MatMulExperts", cuda::MatMulExpertsGroup({&w, 1}, expert_ids, x, {&out, 1}, p, exec, &q8)));
    float* const outs[] = {shared_out};
    return Op("MatMul", cuda::MatMulGroup({&down, 1}, hidden, outs, p.n_tokens, exec, shared_q8));
  };
  return HoldExperts(std::move(experts), out, p, w.rows / p.n_experts, shared.out);
}

}  // namespace octo
