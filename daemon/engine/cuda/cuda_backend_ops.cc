// CudaBackend's op table: each op signs its arguments and queues its launch
// (step_graphs.h), or holds it for the op after it (cuda_backend.h).
#include <algorithm>
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

using signature::SignOp;

using held::Counted;
using held::HeldLaunch;
using held::InOrder;

absl::Status CudaBackend::GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "GetRows", w, ids, n, out);
  return graphs_->Queue([=, this] { return Op("GetRows", cuda::GetRows(w, ids, n, out, stream_.get())); });
}

absl::Status CudaBackend::RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) {
  OCTO_RETURN_IF_ERROR(Op("RmsNorm", CheckRmsNormArgs(x, weight, out, n_rows, dim, eps)));
  SignOp(*graphs_, "RmsNorm", x, weight, out, n_rows, dim, eps);
  auto launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("RmsNorm", q8 == nullptr ? cuda::RmsNorm(x, weight, out, n_rows, dim, eps, stream_.get())
                                       : cuda::RmsNorm(x, weight, out, n_rows, dim, eps, stream_.get(), *q8));
  };
  const bool head_wide = out == x && dim <= kMaxCudaHeadDim;
  const HeadNormCall call{out, weight, n_rows, dim, eps};
  if (head_wide && held_.qkv && held_error_.ok() && !held_.rope && held_.norms.size() < 2) {
    // q's norm, then k's, of the held q, k and v: held with it, for RoPE.
    const HeldQkv& qkv = *held_.qkv;
    const bool q_norm = held_.norms.empty();  // else k's
    const bool alike = q_norm || (held_.norms[0].dim == dim && held_.norms[0].eps == eps);
    const float* normed = q_norm ? qkv.q() : qkv.outs[1];
    const int64_t elements = q_norm ? qkv.q_elements() : qkv.n_tokens * qkv.ws[1].rows;
    if (x == normed && int64_t{n_rows} * dim == elements && alike) {
      held_.norms.push_back(call);
      held_.launch = InOrder(std::move(held_.launch), launch);
      return absl::OkStatus();
    }
  }
  if (head_wide && held_.norms.size() == 1 && !held_.rope && !held_.qkv && held_.norms[0].dim == dim &&
      held_.norms[0].eps == eps) {
    // A second head norm (k's after q's): the two wait for RopeQK together.
    Held first = std::exchange(held_, Held{});
    return Hold(Held{.launch = InOrder(std::move(first.launch), launch),
                     .out = nullptr,
                     .elements = 0,
                     .rope = std::nullopt,
                     .norms = {first.norms[0], call}});
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (n_rows > kMaxDecodeTokens && !head_wide) return graphs_->Queue([launch] { return launch(nullptr); });
  return Hold(Held{.launch = launch,
                   .out = out,
                   .elements = int64_t{n_rows} * dim,
                   .rope = std::nullopt,
                   .norms = head_wide ? std::vector<HeadNormCall>{call} : std::vector<HeadNormCall>{}});
}

absl::Status CudaBackend::AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows,
                                     int dim, float eps) {
  OCTO_RETURN_IF_ERROR(Op("AddRmsNorm", CheckRmsNormArgs(x, weight, out, n_rows, dim, eps)));
  SignOp(*graphs_, "AddRmsNorm", x, delta, weight, out, n_rows, dim, eps);
  const int64_t n = int64_t{n_rows} * dim;
  if (!Overlaps(x, n * 4, out, n * 4)) {  // AddRmsNorm's own rule (AddHeldMatMulInto checks x against delta)
    // delta is a held MatMul's output: it adds it into x, and for a few
    // tokens norms x in its last block; else the norm of x after.
    if (std::optional<absl::Status> normed = AddHeldMatMulNorm(x, delta, weight, out, n_rows, dim, eps)) {
      return *normed;
    }
    if (std::optional<absl::Status> added = AddHeldMatMulInto(x, delta, n)) {
      OCTO_RETURN_IF_ERROR(*added);
      return RmsNorm(x, weight, out, n_rows, dim, eps);
    }
  }
  // delta is a held MoE combine's output: the norm's launch combines it.
  if (std::optional<absl::Status> fused = AddHeldCombineNorm(x, delta, weight, out, n_rows, dim, eps)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  auto launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("AddRmsNorm", q8 == nullptr
                                ? cuda::AddRmsNorm(x, delta, weight, out, n_rows, dim, eps, stream_.get())
                                : cuda::AddRmsNorm(x, delta, weight, out, n_rows, dim, eps, stream_.get(), *q8));
  };
  if (n_rows > kMaxDecodeTokens || delta == nullptr) return graphs_->Queue([launch] { return launch(nullptr); });
  return Hold(Held{.launch = launch, .out = out, .elements = int64_t{n_rows} * dim, .rope = std::nullopt, .norms = {}});
}

absl::Status CudaBackend::LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows,
                                    int dim, float eps) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "LayerNorm", x, weight, bias, out, n_rows, dim, eps);
  return graphs_->Queue(
      [=, this] { return Op("LayerNorm", cuda::LayerNorm(x, weight, bias, out, n_rows, dim, eps, stream_.get())); });
}

absl::Status CudaBackend::MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) {
  if (std::optional<absl::Status> joined = JoinRouterGate(w, x, out, n_tokens)) return *joined;
  if (std::optional<absl::Status> fused = FusedMatMul({&w, 1}, x, {&out, 1}, n_tokens)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  // The launches: runs of `n` rows from `row`, each cuda::MatMul in one call
  // (n > kMaxDecodePathTokens takes the cuBLAS path) or in decode launches
  // of kMaxDecodeTokens. Consecutive short sequences share decode launches;
  // a long one runs alone.
  struct Run {
    int row, n;
    bool decode;
  };
  std::vector<Run> runs;
  if (row_groups_sum_ != n_tokens || n_tokens <= kMaxDecodePathTokens) {
    runs.push_back({0, n_tokens, n_tokens <= kMaxDecodePathTokens});
  } else {
    int row = 0, decode_from = 0;
    for (int g : row_groups_) {
      if (g <= kMaxDecodePathTokens) {
        row += g;
        continue;
      }
      if (row > decode_from) runs.push_back({decode_from, row - decode_from, true});
      runs.push_back({row, g, false});
      row += g;
      decode_from = row;
    }
    if (row > decode_from) runs.push_back({decode_from, row - decode_from, true});
  }
  size_t scratch = 0;
  for (const Run& r : runs) {
    scratch = std::max(scratch, cuda::MatMulScratchBytes(w, r.decode ? std::min(r.n, kMaxDecodeTokens) : r.n));
  }
  OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(scratch));
  SignOp(*graphs_, "MatMul", w, x, out, n_tokens, exec);
  if (n_tokens <= kMaxDecodeTokens) {
    // One decode launch: held, for the residual add after it, or (a MoE
    // router's) the top-k experts of its output.
    std::optional<RouterArgs> router;
    if (cuda::RoutesInOneLaunch(w.type)) router = RouterArgs{w, out, n_tokens, exec};
    return HoldMatMul(
        [=](float* residual, const cuda::NormAfterAdd* norm, const cuda::ActQ8Out* round_norm) {
          if (norm != nullptr) {
            return Op("MatMul + AddRmsNorm",
                      cuda::MatMulAddRmsNorm(w, x, out, residual, n_tokens, *norm, exec, nullptr, round_norm));
          }
          return Op("MatMul", residual == nullptr ? cuda::MatMul(w, x, out, n_tokens, exec)
                                                  : cuda::MatMulAdd(w, x, out, residual, n_tokens, exec));
        },
        x, int64_t{n_tokens} * w.cols, out, int64_t{n_tokens} * w.rows, n_tokens, router);
  }
  for (const Run& r : runs) SignOp(*graphs_, "run", r.row, r.n, r.decode);
  return graphs_->Queue([=, runs = std::move(runs)]() -> absl::Status {
    for (const Run& r : runs) {
      const int step = r.decode ? kMaxDecodeTokens : r.n;
      for (int t = r.row; t < r.row + r.n; t += step) {
        const int m = std::min(step, r.row + r.n - t);
        OCTO_RETURN_IF_ERROR(Op("MatMul", cuda::MatMul(w, x + int64_t{t} * w.cols, out + int64_t{t} * w.rows, m, exec)));
      }
    }
    return absl::OkStatus();
  });
}

std::optional<absl::Status> CudaBackend::JoinRouterGate(const WeightMatrix& w, const float* x, float* out,
                                                        int n_tokens) {
  if (!held_.matmul || !held_.matmul->router || held_.matmul->router->gate || !held_error_.ok()) return std::nullopt;
  RouterArgs& r = *held_.matmul->router;
  if (held_.matmul->x != x || r.n_tokens != n_tokens || w.rows != 1 || w.type != r.w.type || w.cols != r.w.cols ||
      out == nullptr || Overlaps(out, int64_t{n_tokens} * 4, r.logits, int64_t{n_tokens} * r.w.rows * 4)) {
    return std::nullopt;
  }
  SignOp(*graphs_, "MatMul (shared gate)", w, x, out, n_tokens);
  r.gate = cuda::SharedGateRow{w, out};
  const cuda::Exec exec = r.exec;  // a float row: no scratch
  held_.launch = InOrder(std::move(held_.launch), [=](const cuda::ActQ8Out*) {
    return Op("MatMul", cuda::MatMul(w, x, out, n_tokens, exec));
  });
  return absl::OkStatus();
}

absl::Status CudaBackend::MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                                      int n_tokens) {
  if (n_tokens > kMaxDecodePathTokens || ws.size() > kMaxMatMulGroup) {
    OCTO_RETURN_IF_ERROR(LaunchHeld());
    return Backend::MatMulGroup(ws, x, outs, n_tokens);
  }
  return DecodeGroup(ws, {}, x, outs, n_tokens);
}

absl::Status CudaBackend::MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                          const float* x, std::span<float* const> outs, int n_tokens) {
  if (n_tokens > kMaxDecodePathTokens || ws.size() > kMaxMatMulGroup || biases.size() != ws.size()) {
    return Backend::MatMulGroupBias(ws, biases, x, outs, n_tokens);
  }
  return DecodeGroup(ws, biases, x, outs, n_tokens);
}

absl::Status CudaBackend::DecodeGroup(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                      const float* x, std::span<float* const> outs, int n_tokens) {
  if (std::optional<absl::Status> fused = FusedMatMul(ws, x, outs, n_tokens, biases)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec, ExecWithScratch(cuda::MatMulGroupScratchBytes(ws, n_tokens)));
  SignOp(*graphs_, "MatMulGroup", ws, x, outs, n_tokens, exec, biases);
  return QueueOrHoldGroup(
      [ws = std::vector<WeightMatrix>(ws.begin(), ws.end()), outs = std::vector<float*>(outs.begin(), outs.end()),
       biases = std::vector<const float*>(biases.begin(), biases.end()), x, n_tokens,
       exec](const cuda::HeadsAfterQkv* heads) {
        if (heads != nullptr) {
          return Op("MatMulGroup + RopeQK + KvAppend",
                    cuda::MatMulGroupRopeAppend(ws, biases, x, outs, n_tokens, exec, *heads));
        }
        return Op("MatMulGroup", cuda::MatMulGroupBias(ws, biases, x, outs, n_tokens, exec));
      },
      ws, outs, n_tokens);
}

absl::Status CudaBackend::MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                                    float* up_out, int n_tokens) {
  const WeightMatrix ws[] = {gate, up};
  const std::optional<cuda::ActQ8Rule> rule = cuda::SharedRounding(ws, n_tokens);
  if (!rule || gate.type != up.type || gate.rows != up.rows || gate.cols != up.cols) {
    return Backend::MatMulGlu(gate, up, x, out, up_out, n_tokens);
  }
  // The scratch: out's 8-bit activations at the front (where the down
  // projection's decode launch reads them), x's after them.
  const size_t front = cuda::ActQ8Bytes(n_tokens, gate.rows);
  const size_t x_bytes = cuda::MatMulScratchBytes(gate, n_tokens);
  // The counters and scratch first: a growth launches the held op plain
  // (its pointers still valid), and this launch then rounds x itself.
  OCTO_ASSIGN_OR_RETURN(uint32_t* const arrivals, Arrivals(static_cast<size_t>(gate.rows / cuda::kQ8Chunk)));
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(front + x_bytes));
  // The held producer of x, rounding it for gate and up.
  OCTO_ASSIGN_OR_RETURN(HeldLaunch produce_x,
                        TakeRoundingOf(x, int64_t{n_tokens} * gate.cols, *rule, front + x_bytes));
  exec.scratch = static_cast<uint8_t*>(exec.scratch) + front;
  exec.scratch_bytes -= front;
  const cuda::ActQ8Out x_q8 = cuda::ActQ8At(exec.scratch, *rule, n_tokens, gate.cols);
  SignOp(*graphs_, "MatMulGlu", gate, up, x, out, n_tokens, exec, arrivals, static_cast<bool>(produce_x));
  return Hold(Held{.launch = [=, produce_x = std::move(produce_x)](const cuda::ActQ8Out* q8) mutable -> absl::Status {
                     if (produce_x) OCTO_RETURN_IF_ERROR(produce_x(&x_q8));
                     const std::optional<cuda::ActQ8Out> counted = Counted(q8, arrivals);
                     return Op("MatMulGlu", cuda::MatMulGlu(gate, up, x, out, n_tokens, exec, produce_x ? &x_q8 : nullptr,
                                                            counted ? &*counted : nullptr));
                   },
                   .out = out,
                   .elements = int64_t{n_tokens} * gate.rows,
                   .rope = std::nullopt,
                   .norms = {},
                   .span = 0,
                   .free_scratch = front});
}

absl::Status CudaBackend::Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "Rope", x, positions, n_tokens, p);
  return graphs_->Queue([=, this] { return Op("Rope", cuda::Rope(x, positions, n_tokens, p, stream_.get())); });
}

absl::Status CudaBackend::RopeQK(float* q, float* k, const int32_t* positions, int n_tokens,
                                 const RopeParams& q_params, int k_heads) {
  RopeParams k_params = q_params;
  k_params.n_heads = k_heads;
  OCTO_RETURN_IF_ERROR(Op("RopeQK", CheckRopeArgs(q, positions, n_tokens, q_params)));
  OCTO_RETURN_IF_ERROR(Op("RopeQK", CheckRopeArgs(k, positions, n_tokens, k_params)));
  SignOp(*graphs_, "RopeQK", q, k, positions, n_tokens, q_params, k_heads);
  auto rope = [=, this](const cuda::ActQ8Out*) {
    return Op("RopeQK", cuda::RopeQK(q, k, positions, n_tokens, q_params, k_heads, stream_.get()));
  };
  HeldRope held{q, k, positions, n_tokens, q_params, k_heads, {}};
  // The held q, k and v (and their head norms, if any): held with them, for
  // the KvAppend after.
  if (held_.qkv && held_error_.ok() && !held_.rope && held_.qkv->q() == q && held_.qkv->outs[1] == k &&
      held_.qkv->n_tokens == n_tokens &&
      (held_.norms.empty() || (held_.norms.size() == 2 && held_.norms[0].dim == q_params.head_dim))) {
    if (held_.norms.size() == 2) {
      held.norms = cuda::HeadNorms{held_.norms[0].weight, held_.norms[1].weight, held_.norms[0].eps};
    }
    held_.rope = held;
    held_.launch = InOrder(std::move(held_.launch), rope);
    return absl::OkStatus();
  }
  // The held norms of exactly this q and k, head by head: folded in.
  if (held_.norms.size() == 2 && !held_.rope && !held_.qkv) {
    const HeadNormCall& qn = held_.norms[0];
    const HeadNormCall& kn = held_.norms[1];
    if (qn.x == q && qn.n_rows == n_tokens * q_params.n_heads && qn.dim == q_params.head_dim && kn.x == k &&
        kn.n_rows == n_tokens * k_heads && kn.dim == q_params.head_dim && kn.eps == qn.eps) {
      held.norms = cuda::HeadNorms{qn.weight, kn.weight, qn.eps};
      Held norms = std::exchange(held_, Held{});
      return Hold(Held{.launch = InOrder(std::move(norms.launch), rope),
                       .out = nullptr,
                       .elements = 0,
                       .rope = held,
                       .norms = {}});
    }
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Hold(Held{.launch = rope, .out = nullptr, .elements = 0, .rope = held, .norms = {}});
}

absl::Status CudaBackend::KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                                   void* v_cache, int first_pos, KvCacheTypes types, const int32_t* first_pos_at) {
  SignOp(*graphs_, "KvAppend", k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types, first_pos_at);
  if (std::optional<absl::Status> appended =
          AppendHeldQkv(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types, first_pos_at)) {
    return *appended;
  }
  if (held_.rope && !held_.qkv && held_error_.ok() && held_.rope->k == k && held_.rope->n_tokens == n_tokens &&
      int64_t{held_.rope->k_heads} * held_.rope->p.head_dim == kv_dim) {
    const HeldRope r = *std::exchange(held_, Held{}).rope;
    return graphs_->Queue([=, this] {
      return Op("RopeQK + KvAppend", cuda::RopeQKAppend(r.q, r.k, r.positions, r.n_tokens, r.p, r.k_heads, v, k_cache,
                                                        v_cache, first_pos, types, stream_.get(), first_pos_at,
                                                        r.norms));
    });
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return graphs_->Queue([=, this] {
    return Op("KvAppend",
              cuda::KvAppend(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types, stream_.get(), first_pos_at));
  });
}

std::optional<absl::Status> CudaBackend::AppendHeldQkv(const float* k, const float* v, int n_tokens, int kv_dim,
                                                       void* k_cache, void* v_cache, int first_pos, KvCacheTypes types,
                                                       const int32_t* first_pos_at) {
  auto held_for_this = [&] {
    return held_.qkv && held_.rope && held_error_.ok() && held_.qkv->outs[1] == k && held_.qkv->outs[2] == v &&
           held_.qkv->n_tokens == n_tokens && held_.qkv->ws[1].rows == kv_dim;
  };
  if (!held_for_this()) return std::nullopt;
  // The counters first: a growth launches the held ops plain (then the
  // append below is KvAppend's own).
  const HeldRope& r = *held_.rope;
  absl::StatusOr<uint32_t*> arrivals = Arrivals(static_cast<size_t>(cuda::QkvHeadCounters(r.p, r.k_heads)));
  if (!arrivals.ok()) return arrivals.status();
  if (!held_for_this()) return std::nullopt;
  const Held held = std::exchange(held_, Held{});
  const HeldRope rope = *held.rope;
  const std::optional<HeldQkv::Split> split = held.qkv->split;
  const cuda::HeadsAfterQkv heads{.positions = rope.positions, .p = rope.p, .k_heads = rope.k_heads,
                                  .norms = rope.norms, .k_cache = k_cache, .v_cache = v_cache,
                                  .first_pos = first_pos, .first_pos_at = first_pos_at, .types = types,
                                  .arrivals = *arrivals, .q_split = split ? split->q : nullptr,
                                  .gate = split ? split->gate : nullptr};
  std::shared_ptr<QkvLaunch> group = held.qkv->launch;
  const float* qg = held.qkv->outs[0];
  if (cuda::CheckMatMulGroupRopeAppend(held.qkv->ws, held.qkv->outs, n_tokens, heads).ok()) {
    SignOp(*graphs_, "MatMulGroup + RopeQK + KvAppend", *arrivals);
    return graphs_->Queue([group, heads] { return (*group)(&heads); });
  }
  // Apart: the group, the split, then the rope (its norms folded in) and
  // the append.
  return graphs_->Queue([=, this]() -> absl::Status {
    OCTO_RETURN_IF_ERROR((*group)(nullptr));
    if (split) {
      OCTO_RETURN_IF_ERROR(Op("SplitGatedQuery", cuda::SplitGatedQuery(qg, split->q, split->gate, n_tokens,
                                                                      split->n_heads, split->head_dim, stream_.get())));
    }
    return Op("RopeQK + KvAppend", cuda::RopeQKAppend(rope.q, rope.k, rope.positions, rope.n_tokens, rope.p,
                                                      rope.k_heads, v, k_cache, v_cache, first_pos, types,
                                                      stream_.get(), first_pos_at, rope.norms));
  });
}

absl::Status CudaBackend::Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                                    const AttentionParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  const int64_t width = int64_t{p.n_heads} * p.head_dim;
  if (p.n_tokens <= 0 || p.n_tokens > kMaxDecodeTokens || width <= 0 || width % cuda::kQ8Chunk != 0) {
    OCTO_ASSIGN_OR_RETURN(const cuda::Exec exec,
                          ExecWithScratch(cuda::AttentionScratchBytes(p, attention_scratch_budget_)));
    SignOp(*graphs_, "Attention", q, k_cache, v_cache, out, p, exec);
    return graphs_->Queue([=] { return Op("Attention", cuda::Attention(q, k_cache, v_cache, out, p, exec)); });
  }
  // Held for the output projection: the 8-bit activations it would round go
  // at the scratch's front (where its decode launch reads them), the
  // attention's records after them.
  const size_t front = cuda::ActQ8Bytes(p.n_tokens, width);
  OCTO_ASSIGN_OR_RETURN(uint32_t* const arrivals, Arrivals(static_cast<size_t>(p.n_tokens * width / cuda::kQ8Chunk)));
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec,
                        ExecWithScratch(front + cuda::AttentionScratchBytes(p, attention_scratch_budget_)));
  exec.scratch = static_cast<uint8_t*>(exec.scratch) + front;
  exec.scratch_bytes -= front;
  SignOp(*graphs_, "Attention", q, k_cache, v_cache, out, p, exec, arrivals);
  const HeldAttention held{q, k_cache, v_cache, out, p, exec, arrivals};
  return Hold(Held{.launch = AttentionLaunch(held),
                   .out = out,
                   .elements = p.n_tokens * width,
                   .rope = std::nullopt,
                   .norms = {},
                   .attention = held,
                   .span = p.head_dim,
                   .free_scratch = front});
}

absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)> CudaBackend::AttentionLaunch(const HeldAttention& a) {
  return [a](const cuda::ActQ8Out* q8) {
    const std::optional<cuda::ActQ8Out> counted = Counted(q8, a.arrivals);
    return Op("Attention", cuda::Attention(a.q, a.k_cache, a.v_cache, a.out, a.p, a.exec,
                                           counted ? &*counted : nullptr, a.gate));
  };
}

absl::Status CudaBackend::SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  if (std::optional<absl::Status> fused = HeldNormSiluMul(gate, up, out, n)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(Op("SiluMul", CheckSiluMulArgs(gate, up, out, n)));
  SignOp(*graphs_, "SiluMul", gate, up, out, n);
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out* q8) {
                     return Op("SiluMul", q8 == nullptr ? cuda::SiluMul(gate, up, out, n, stream_.get())
                                                        : cuda::SiluMul(gate, up, out, n, stream_.get(), *q8));
                   },
                   .out = out,
                   .elements = n,
                   .rope = std::nullopt,
                   .norms = {}});
}

std::optional<absl::Status> CudaBackend::HeldNormSiluMul(const float* gate, const float* up, float* out, int64_t n) {
  if (held_.norms.size() != 1 || held_.rope || held_.qkv || !held_error_.ok()) return std::nullopt;
  const HeadNormCall norm = held_.norms[0];
  if (norm.x != up || out != up || int64_t{norm.n_rows} * norm.dim != n || gate == nullptr ||
      Overlaps(gate, n * 4, out, n * 4)) {
    return std::nullopt;
  }
  SignOp(*graphs_, "RmsNorm + SiluMul", gate, up, out, n);
  // Taken before Arrivals, whose growth would launch it (FlushStretch).
  held_ = Held{};
  OCTO_ASSIGN_OR_RETURN(uint32_t* const arrivals, Arrivals(static_cast<size_t>(n / cuda::kQ8Chunk)));
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out* q8) {
                     const std::optional<cuda::ActQ8Out> counted = Counted(q8, arrivals);
                     return Op("RmsNorm + SiluMul", cuda::RmsNormSiluMul(norm.x, norm.weight, gate, norm.n_rows,
                                                                          norm.dim, norm.eps, stream_.get(),
                                                                          counted ? &*counted : nullptr));
                   },
                   .out = out,
                   .elements = n,
                   .rope = std::nullopt,
                   .norms = {},
                   .span = norm.dim});
}

absl::Status CudaBackend::Gelu(const float* x, float* out, int64_t n) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "Gelu", x, out, n);
  return graphs_->Queue([=, this] { return Op("Gelu", cuda::Gelu(x, out, n, stream_.get())); });
}

absl::Status CudaBackend::Add(const float* a, const float* b, float* out, int64_t n) {
  SignOp(*graphs_, "Add", a, b, out, n);
  // b is a held MatMul's output and out a: it adds it into a.
  if (out == a) {
    if (std::optional<absl::Status> added = AddHeldMatMulInto(out, b, n)) return *added;
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return graphs_->Queue([=, this] { return Op("Add", cuda::Add(a, b, out, n, stream_.get())); });
}

absl::Status CudaBackend::AddBias(float* x, const float* bias, int n_rows, int width) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "AddBias", x, bias, n_rows, width);
  return graphs_->Queue([=, this] { return Op("AddBias", cuda::AddBias(x, bias, n_rows, width, stream_.get())); });
}

absl::Status CudaBackend::TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "TopLogits", logits, n_rows, vocab, out);
  return graphs_->Queue(
      [=, this] { return Op("TopLogits", cuda::TopLogits(logits, n_rows, vocab, out, stream_.get())); });
}

absl::Status CudaBackend::DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out,
                                       float* out, const DeltaNetConvParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  SignOp(*graphs_, "DeltaNetConv", x, taps, state_in, state_out, out, p);
  auto launch = [=, this](const cuda::ActQ8Out*) {
    return Op("DeltaNetConv", cuda::DeltaNetConv(x, taps, state_in, state_out, out, p, stream_.get()));
  };
  if (p.n_tokens != 1) return graphs_->Queue([launch] { return launch(nullptr); });
  // A decode step's: held, for the delta rule after it to convolve in its
  // own launch.
  return Hold(Held{.launch = launch,
                   .out = nullptr,  // not a producer that rounds (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .conv = cuda::DeltaNetConvCall{x, taps, state_in, state_out, out, p}});
}

absl::Status CudaBackend::GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                         const float* decay, const float* state_in, float* state_out, float* out,
                                         const GatedDeltaRuleParams& p) {
  SignOp(*graphs_, "GatedDeltaRule", qkv, b, a, dt_bias, decay, state_in, state_out, out, p);
  // The held conv of exactly qkv, one token: one launch.
  if (held_.conv && held_error_.ok() && held_.conv->out == qkv &&
      cuda::CheckDeltaNetConvRule(*held_.conv, b, a, dt_bias, decay, state_in, state_out, out, p).ok()) {
    const cuda::DeltaNetConvCall conv = *std::exchange(held_, Held{}).conv;
    return graphs_->Queue([=, this] {
      return Op("DeltaNetConv + GatedDeltaRule",
                cuda::DeltaNetConvRule(conv, b, a, dt_bias, decay, state_in, state_out, out, p, stream_.get()));
    });
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return graphs_->Queue([=, this] {
    return Op("GatedDeltaRule",
              cuda::GatedDeltaRule(qkv, b, a, dt_bias, decay, state_in, state_out, out, p, stream_.get()));
  });
}

absl::Status CudaBackend::SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads,
                                          int head_dim) {
  SignOp(*graphs_, "SplitGatedQuery", qg, q, gate, n_tokens, n_heads, head_dim);
  auto launch = [=, this](const cuda::ActQ8Out*) {
    return Op("SplitGatedQuery", cuda::SplitGatedQuery(qg, q, gate, n_tokens, n_heads, head_dim, stream_.get()));
  };
  // The held q, k and v's whole q: held with them, for the heads' tails.
  if (held_.qkv && held_error_.ok() && !held_.rope && held_.norms.empty() && !held_.qkv->split &&
      held_.qkv->outs[0] == qg && held_.qkv->n_tokens == n_tokens &&
      held_.qkv->ws[0].rows == 2 * int64_t{n_heads} * head_dim) {
    held_.qkv->split = HeldQkv::Split{q, gate, n_heads, head_dim};
    held_.launch = InOrder(std::move(held_.launch), launch);
    return absl::OkStatus();
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return graphs_->Queue([launch]() mutable { return launch(nullptr); });
}

absl::Status CudaBackend::SigmoidMul(const float* gate, float* x, int64_t n) {
  SignOp(*graphs_, "SigmoidMul", gate, x, n);
  if (held_.attention && held_error_.ok() && held_.out == x && held_.elements == n && !held_.attention->gate &&
      gate != nullptr && !Overlaps(gate, n * 4, x, n * 4)) {
    // The held attention's whole output: gated in its launch.
    held_.attention->gate = gate;
    held_.launch = AttentionLaunch(*held_.attention);
    return absl::OkStatus();
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return graphs_->Queue([=, this] { return Op("SigmoidMul", cuda::SigmoidMul(gate, x, n, stream_.get())); });
}

}  // namespace octo
