// cuda::MatMul (kernels/ops.h): checks the arguments, then takes the decode
// path (matmul_decode.cu, kMaxDecodeTokens tokens per launch) for up to
// kMaxDecodePathTokens tokens and the prefill path (matmul_prefill.cu)
// beyond. cuda::MatMulGroup does the same for matrices that read one x,
// rounding x once for all of them on the decode path.
#include <algorithm>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/cuda/rope_pair.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {

absl::Status matmul::CheckWeightAlignment(const char* op, const WeightMatrix& w, int64_t expert_bytes) {
  const int64_t align = WeightAlignment(w.type);
  if (reinterpret_cast<uintptr_t>(w.data) % align != 0 || expert_bytes % align != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s weights must start %d-byte aligned (each expert too; its blocks are read %d bytes at a time)", op,
        GgmlTypeName(w.type), align, align));
  }
  return absl::OkStatus();
}

size_t MatMulScratchBytes(const WeightMatrix& w, int n_tokens) {
  if (n_tokens <= kMaxDecodePathTokens) {
    return matmul::DecodeScratchBytes(w.type, w.cols, n_tokens < kMaxDecodeTokens ? n_tokens : kMaxDecodeTokens);
  }
  return matmul::PrefillScratchBytes(w.type, w.rows, w.cols, n_tokens);
}

namespace {

// MatMul's preconditions; w's row bytes when they hold.
absl::StatusOr<int64_t> CheckMatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape("MatMul", w);
  if (!row_bytes.ok()) return row_bytes.status();
  if (absl::Status aligned = matmul::CheckWeightAlignment("MatMul", w); !aligned.ok()) return aligned;
  if (absl::Status null = CheckNotNull("MatMul", {{"x", x}, {"out", out}}); !null.ok()) return null;
  if (n_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: n_tokens (%d) must be positive", n_tokens));
  }
  if (w.rows > INT32_MAX || w.cols > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: w (%d x %d) has more than 2^31 rows or columns", w.rows, w.cols));
  }
  if (Overlaps(x, int64_t{n_tokens} * w.cols * 4, out, int64_t{n_tokens} * w.rows * 4)) {
    return absl::InvalidArgumentError("MatMul: out overlaps x");
  }
  const size_t scratch = MatMulScratchBytes(w, n_tokens);
  if (exec.scratch_bytes < scratch || (scratch > 0 && exec.scratch == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMul: exec.scratch holds %d bytes, this call needs %d (MatMulScratchBytes)", exec.scratch_bytes, scratch));
  }
  if (n_tokens > kMaxDecodePathTokens && exec.blas == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMul: exec.blas is null; %d tokens (more than %d) take the cuBLAS path", n_tokens, kMaxDecodePathTokens));
  }
  return row_bytes;
}

}  // namespace

absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec) {
  absl::StatusOr<int64_t> row_bytes = CheckMatMul(w, x, out, n_tokens, exec);
  if (!row_bytes.ok()) return row_bytes.status();
  if (n_tokens <= kMaxDecodePathTokens) {
    // Launches of kMaxDecodeTokens tokens, in order on one stream (so they
    // share the scratch).
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxDecodeTokens) {
      const int n = n_tokens - t0 < kMaxDecodeTokens ? n_tokens - t0 : kMaxDecodeTokens;
      absl::Status s = matmul::Decode(w, *row_bytes, x + int64_t{t0} * w.cols, out + int64_t{t0} * w.rows, n, exec);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return matmul::Prefill(w, *row_bytes, x, out, n_tokens, exec);
}

size_t MatMulGroupScratchBytes(std::span<const WeightMatrix> ws, int n_tokens) {
  size_t bytes = 0;
  for (const WeightMatrix& w : ws) bytes = std::max(bytes, MatMulScratchBytes(w, n_tokens));
  return bytes;
}

namespace {

// MatMulGroup, x's 8-bit activations under one rule given (fused.h) or not,
// and biases (MatMulGroupBias; empty: none).
absl::Status Group(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs, int n_tokens,
                   const Exec& exec, const ActQ8Out* rounded, std::span<const float* const> biases = {},
                   const matmul::HeadTails* tails = nullptr) {
  if (ws.empty() || ws.size() > kMaxMatMulGroup || ws.size() != outs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulGroup: %d matrices and %d outputs (1 to %d, as many of each)", ws.size(), outs.size(), kMaxMatMulGroup));
  }
  if (!biases.empty() && biases.size() != ws.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatMulGroup: %d biases for %d matrices (one each, or none)", biases.size(), ws.size()));
  }
  auto bias_of = [&](size_t i) { return biases.empty() ? nullptr : biases[i]; };
  int64_t row_bytes[kMaxMatMulGroup];
  for (size_t i = 0; i < ws.size(); ++i) {
    if (ws[i].cols != ws[0].cols) {
      return absl::InvalidArgumentError(
          absl::StrFormat("MatMulGroup: matrix %d has %d columns, matrix 0 %d", i, ws[i].cols, ws[0].cols));
    }
    absl::StatusOr<int64_t> bytes = CheckMatMul(ws[i], x, outs[i], n_tokens, exec);
    if (!bytes.ok()) return bytes.status();
    row_bytes[i] = *bytes;
  }
  if (n_tokens > kMaxDecodePathTokens) {  // cuBLAS reads x as it is: nothing to share
    for (size_t i = 0; i < ws.size(); ++i) {
      absl::Status s = matmul::Prefill(ws[i], row_bytes[i], x, outs[i], n_tokens, exec);
      if (!s.ok()) return s;
      if (bias_of(i) != nullptr) {
        absl::Status added = AddBias(outs[i], bias_of(i), n_tokens, static_cast<int>(ws[i].rows), exec.stream);
        if (!added.ok()) return added;
      }
    }
    return absl::OkStatus();
  }
  const int64_t cols = ws[0].cols;
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxDecodeTokens) {
    const int n = n_tokens - t0 < kMaxDecodeTokens ? n_tokens - t0 : kMaxDecodeTokens;
    const float* xt = x + int64_t{t0} * cols;
    // x rounded once per rule its matrices' types share (act_q8.h), then
    // one decode launch per type over it (the group's matrices of that
    // type together); float weights read x as it is.
    bool done[kMaxMatMulGroup] = {};
    for (const ActQ8Rule rule : {ActQ8Rule::kPer32, ActQ8Rule::kPer256}) {
      matmul::ActQ8View act;
      bool have_act = false;
      if (rounded != nullptr && rounded->rule == rule) {
        act = matmul::ActQ8View{rounded->q, rounded->d};
        have_act = true;
      }
      for (size_t i = 0; i < ws.size(); ++i) {
        const bool float_weight = matmul::IsFloatWeight(ws[i].type);
        if (done[i] || (float_weight ? rule != ActQ8Rule::kPer32 : ActQ8RuleFor(ws[i].type) != rule)) continue;
        if (!float_weight && !have_act) {
          absl::Status s = matmul::QuantizeActivations(ws[i].type, xt, n, cols, exec, &act);
          if (!s.ok()) return s;
          have_act = true;
        }
        WeightMatrix same[kMaxMatMulGroup];
        int64_t same_bytes[kMaxMatMulGroup];
        float* same_out[kMaxMatMulGroup];
        const float* same_bias[kMaxMatMulGroup];
        matmul::HeadTails same_tails = tails != nullptr ? *tails : matmul::HeadTails{};
        size_t n_same = 0;
        for (size_t j = i; j < ws.size(); ++j) {
          if (done[j] || ws[j].type != ws[i].type) continue;
          if (tails != nullptr) same_tails.role[n_same] = tails->role[j];
          same[n_same] = ws[j];
          same_bytes[n_same] = row_bytes[j];
          same_bias[n_same] = bias_of(j);
          same_out[n_same++] = outs[j] + int64_t{t0} * ws[j].rows;
          done[j] = true;
        }
        absl::Status s = matmul::DecodeQuantizedGroup(
            std::span<const WeightMatrix>(same, n_same), std::span<const int64_t>(same_bytes, n_same), xt,
            float_weight ? matmul::ActQ8View{} : act, std::span<float* const>(same_out, n_same), n, exec.stream,
            std::span<const float* const>(same_bias, n_same), tails != nullptr ? &same_tails : nullptr);
        if (!s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

// The rounded overloads' own preconditions: one decode launch, every
// quantized matrix rounding x by rounded's rule.
absl::Status CheckRounded(std::span<const WeightMatrix> ws, int n_tokens, const ActQ8Out& rounded) {
  if (n_tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulGroup: %d tokens over rounded activations (at most %d, one decode launch)", n_tokens, kMaxDecodeTokens));
  }
  for (const WeightMatrix& w : ws) {
    if (!matmul::IsFloatWeight(w.type) && ActQ8RuleFor(w.type) != rounded.rule) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "MatMulGroup: %s weights round x by another rule than the activations given", GgmlTypeName(w.type)));
    }
  }
  if (rounded.q == nullptr || rounded.d == nullptr) return absl::InvalidArgumentError("MatMulGroup: rounded is null");
  return absl::OkStatus();
}

}  // namespace

absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs, int n_tokens,
                         const Exec& exec) {
  return Group(ws, x, outs, n_tokens, exec, nullptr);
}

std::optional<ActQ8Rule> SharedRounding(std::span<const WeightMatrix> ws, int n_tokens) {
  if (ws.empty() || n_tokens <= 0 || n_tokens > kMaxDecodeTokens) return std::nullopt;
  for (const WeightMatrix& w : ws) {
    if (matmul::IsFloatWeight(w.type) || ActQ8RuleFor(w.type) != ActQ8RuleFor(ws[0].type)) return std::nullopt;
  }
  return ActQ8RuleFor(ws[0].type);
}

absl::Status MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases, const float* x,
                             std::span<float* const> outs, int n_tokens, const Exec& exec, const ActQ8Out* rounded) {
  if (rounded != nullptr) {
    if (absl::Status s = CheckRounded(ws, n_tokens, *rounded); !s.ok()) return s;
  }
  return Group(ws, x, outs, n_tokens, exec, rounded, biases);
}

absl::Status CheckMatMulGroupRopeAppend(std::span<const WeightMatrix> ws, std::span<float* const> outs, int n_tokens,
                                        const HeadsAfterQkv& heads) {
  constexpr const char* kOp = "MatMulGroupRopeAppend";
  if (ws.size() != 3 || outs.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d matrices and %d outputs (q, k and v: 3 of each)", kOp, ws.size(), outs.size()));
  }
  if (n_tokens <= 0 || n_tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d tokens (1 to %d, one decode launch)", kOp, n_tokens, kMaxDecodeTokens));
  }
  const RopeParams& p = heads.p;
  RopeParams k_params = p;
  k_params.n_heads = heads.k_heads;
  if ((heads.q_split == nullptr) != (heads.gate == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": a gated query needs both q_split and gate"));
  }
  const bool gated = heads.q_split != nullptr;
  float* const q = gated ? heads.q_split : outs[0];
  for (const auto& [x, params] : {std::pair{q, p}, std::pair{outs[1], k_params}}) {
    if (absl::Status s = CheckRopeArgs(x, heads.positions, n_tokens, params); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": ", s.message()));
    }
  }
  if (p.head_dim > kMaxCudaHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: head_dim %d (at most %d)", kOp, p.head_dim, kMaxCudaHeadDim));
  }
  const int64_t q_width = int64_t{p.n_heads} * p.head_dim, kv_width = int64_t{heads.k_heads} * p.head_dim;
  const int64_t q_rows = gated ? 2 * q_width : q_width;
  if (ws[0].rows != q_rows || ws[1].rows != kv_width || ws[2].rows != kv_width) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: matrices of %d, %d and %d rows for q%s, k and v of %d and %d values a token", kOp, ws[0].rows,
        ws[1].rows, ws[2].rows, gated ? " (with its gate)" : "", q_rows, kv_width));
  }
  // What the launch writes: the three outputs, and a gated query's two.
  const float* const written[] = {outs[0], outs[1], outs[2], heads.q_split, heads.gate};
  const int64_t bytes[] = {n_tokens * q_rows * 4, n_tokens * kv_width * 4, n_tokens * kv_width * 4,
                           n_tokens * q_width * 4, n_tokens * q_width * 4};
  for (int i = 0; i < (gated ? 5 : 3); ++i) {
    for (int j = i + 1; j < (gated ? 5 : 3); ++j) {
      if (Overlaps(written[i], bytes[i], written[j], bytes[j])) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: outputs %d and %d overlap", kOp, i, j));
      }
    }
  }
  if (absl::Status s = CheckKvAppendArgs(outs[1], outs[2], n_tokens, static_cast<int>(kv_width), heads.k_cache,
                                         heads.v_cache, heads.first_pos_at != nullptr ? 0 : heads.first_pos,
                                         heads.types);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": ", s.message()));
  }
  for (const GgmlType type : {heads.types.k, heads.types.v}) {
    if (type != GgmlType::kF16 && p.head_dim % cpu::kQK != 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: a head of %d values is not whole %s cache blocks", kOp,
                                                        p.head_dim, GgmlTypeName(type)));
    }
  }
  if ((heads.norms.q == nullptr) != (heads.norms.k == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": head norms need both weights"));
  }
  if (heads.arrivals == nullptr) return absl::InvalidArgumentError(absl::StrCat(kOp, ": arrivals is null"));
  return absl::OkStatus();
}

absl::Status MatMulGroupRopeAppend(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                   const float* x, std::span<float* const> outs, int n_tokens, const Exec& exec,
                                   const HeadsAfterQkv& heads, const ActQ8Out* rounded) {
  if (absl::Status s = CheckMatMulGroupRopeAppend(ws, outs, n_tokens, heads); !s.ok()) return s;
  if (rounded != nullptr) {
    if (absl::Status s = CheckRounded(ws, n_tokens, *rounded); !s.ok()) return s;
  }
  const int kv_dim = heads.k_heads * heads.p.head_dim;
  const int first_pos = heads.first_pos_at != nullptr ? 0 : heads.first_pos;
  matmul::HeadTails tails;
  tails.arrivals = heads.arrivals;
  tails.role[0] = matmul::HeadRole::kQuery;
  tails.role[1] = matmul::HeadRole::kKey;
  tails.role[2] = matmul::HeadRole::kValue;
  tails.positions = heads.positions;
  tails.p = heads.p;
  tails.theta_scale = RopeThetaScale(heads.p);
  tails.k_heads = heads.k_heads;
  tails.norms = heads.norms;
  tails.keys = TargetOf(heads.k_cache, heads.types.k, kv_dim, first_pos, heads.first_pos_at);
  tails.values = TargetOf(heads.v_cache, heads.types.v, kv_dim, first_pos, heads.first_pos_at);
  tails.key_head_bytes = static_cast<int64_t>(RowBytes(heads.types.k, heads.p.head_dim));
  tails.value_head_bytes = static_cast<int64_t>(RowBytes(heads.types.v, heads.p.head_dim));
  tails.split_q = heads.q_split;
  tails.split_gate = heads.gate;
  return Group(ws, x, outs, n_tokens, exec, rounded, biases, &tails);
}

namespace {

// MatMulAdd and MatMulAddRmsNorm (`op`), norm and round_norm null for the
// first: the arguments checked, x's activations rounded (or `rounded`), the
// decode launch.
absl::Status DecodeAdd(const char* op, const WeightMatrix& w, const float* x, float* out, float* residual,
                       int n_tokens, const Exec& exec, const ActQ8Out* rounded, const NormAfterAdd* norm,
                       const ActQ8Out* round_norm) {
  if (n_tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d tokens (at most %d, one decode launch)", op, n_tokens, kMaxDecodeTokens));
  }
  absl::StatusOr<int64_t> row_bytes = CheckMatMul(w, x, out, n_tokens, exec);
  if (!row_bytes.ok()) return row_bytes.status();
  if (residual == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": residual is null"));
  const int64_t out_bytes = int64_t{n_tokens} * w.rows * 4;
  if (Overlaps(residual, out_bytes, x, int64_t{n_tokens} * w.cols * 4) || Overlaps(residual, out_bytes, out, out_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": residual overlaps x or out"));
  }
  if (rounded != nullptr) {
    if (absl::Status s = CheckRounded({&w, 1}, n_tokens, *rounded); !s.ok()) return s;
  }
  if (norm != nullptr) {
    const int dim = static_cast<int>(w.rows);  // CheckMatMul: within 2^31
    if (absl::Status s = CheckRmsNormArgs(residual, norm->weight, norm->out, n_tokens, dim, norm->eps); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": the norm's ", s.message()));
    }
    if (Overlaps(residual, out_bytes, norm->out, out_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": the norm's out overlaps residual"));
    }
    if (norm->arrival == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": norm.arrival is null"));
    if (round_norm != nullptr) {
      if (absl::Status s = CheckRounding(op, dim, *round_norm); !s.ok()) return s;
    }
  }
  matmul::ActQ8View act;
  if (!matmul::IsFloatWeight(w.type)) {
    if (rounded != nullptr) {
      act = matmul::ActQ8View{rounded->q, rounded->d};
    } else if (absl::Status s = matmul::QuantizeActivations(w.type, x, n_tokens, w.cols, exec, &act); !s.ok()) {
      return s;
    }
  }
  return matmul::DecodeQuantized(w, *row_bytes, x, act, out, n_tokens, exec.stream, nullptr, residual, norm,
                                 round_norm);
}

}  // namespace

absl::Status MatMulAdd(const WeightMatrix& w, const float* x, float* out, float* residual, int n_tokens,
                       const Exec& exec, const ActQ8Out* rounded) {
  return DecodeAdd("MatMulAdd", w, x, out, residual, n_tokens, exec, rounded, nullptr, nullptr);
}

absl::Status MatMulAddRmsNorm(const WeightMatrix& w, const float* x, float* out, float* residual, int n_tokens,
                              const NormAfterAdd& norm, const Exec& exec, const ActQ8Out* rounded,
                              const ActQ8Out* round_out) {
  return DecodeAdd("MatMulAddRmsNorm", w, x, out, residual, n_tokens, exec, rounded, &norm, round_out);
}

namespace matmul {

absl::Status CheckGluRounding(const char* op, const WeightMatrix& gate, int64_t rows, const ActQ8Out& round_out) {
  if (absl::Status s = CheckRounding(op, rows, round_out); !s.ok()) return s;
  const int64_t block_rows = DecodeRowsPerBlock(gate.type, gate.cols);
  if (block_rows < ActQ8ChunkOf(round_out.rule) && round_out.arrivals == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: a block's %d rows share %d-element rounding chunks: round_out.arrivals is null", op,
                        block_rows, ActQ8ChunkOf(round_out.rule)));
  }
  return absl::OkStatus();
}

}  // namespace matmul

absl::Status MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out, int n_tokens,
                       const Exec& exec, const ActQ8Out* rounded, const ActQ8Out* round_out) {
  if (gate.type != up.type || gate.rows != up.rows || gate.cols != up.cols || matmul::IsFloatWeight(gate.type)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulGlu: gate (%s, %d x %d) and up (%s, %d x %d) must be one quantized type and shape",
        GgmlTypeName(gate.type), gate.rows, gate.cols, GgmlTypeName(up.type), up.rows, up.cols));
  }
  if (n_tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatMulGlu: %d tokens (at most %d, one decode launch)", n_tokens, kMaxDecodeTokens));
  }
  absl::StatusOr<int64_t> row_bytes = CheckMatMul(gate, x, out, n_tokens, exec);
  if (!row_bytes.ok()) return row_bytes.status();
  if (absl::StatusOr<int64_t> up_ok = CheckMatMul(up, x, out, n_tokens, exec); !up_ok.ok()) return up_ok.status();
  const ActQ8Rule rule = ActQ8RuleFor(gate.type);
  if (rounded != nullptr && (rounded->rule != rule || rounded->q == nullptr || rounded->d == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulGlu: the rounded activations given are null or not by the rule %s weights round by",
        GgmlTypeName(gate.type)));
  }
  if (round_out != nullptr) {
    if (absl::Status s = matmul::CheckGluRounding("MatMulGlu", gate, gate.rows, *round_out); !s.ok()) return s;
  }
  matmul::ActQ8View act{rounded != nullptr ? rounded->q : nullptr, rounded != nullptr ? rounded->d : nullptr};
  if (rounded == nullptr) {
    if (absl::Status s = matmul::QuantizeActivations(gate.type, x, n_tokens, gate.cols, exec, &act); !s.ok()) return s;
  }
  return matmul::DecodeGlu(gate, up, *row_bytes, act, out, n_tokens, round_out, exec.stream);
}

absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                         int n_tokens, const Exec& exec, const ActQ8Out& rounded) {
  if (absl::Status s = CheckRounded(ws, n_tokens, rounded); !s.ok()) return s;
  return Group(ws, x, outs, n_tokens, exec, &rounded);
}

bool RoutesInOneLaunch(GgmlType type) { return matmul::IsFloatWeight(type); }

absl::Status MatMulTopKExperts(const WeightMatrix& router, const float* x, float* logits, int n_tokens,
                               const TopKExpertsOut& top_k, const Exec& exec, const ActQ8Out* round_x,
                               const SharedGateRow* gate) {
  if (n_tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatMulTopKExperts: %d tokens (at most %d, one decode launch)", n_tokens, kMaxDecodeTokens));
  }
  absl::StatusOr<int64_t> row_bytes = CheckMatMul(router, x, logits, n_tokens, exec);
  if (!row_bytes.ok()) return row_bytes.status();
  if (!RoutesInOneLaunch(router.type)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulTopKExperts: a router of %s weights (F32, F16 or BF16 only)", GgmlTypeName(router.type)));
  }
  const int n_experts = static_cast<int>(router.rows);  // CheckMatMul: within 2^31
  if (absl::Status s = CheckTopKExpertsArgs(logits, n_tokens, n_experts, top_k.k, top_k.expert_ids, top_k.weights);
      !s.ok()) {
    return s;
  }
  if (top_k.arrival == nullptr) return absl::InvalidArgumentError("MatMulTopKExperts: top_k.arrival is null");
  const int64_t logit_bytes = int64_t{n_tokens} * n_experts * 4, pick_bytes = int64_t{n_tokens} * top_k.k * 4;
  if (Overlaps(logits, logit_bytes, top_k.expert_ids, pick_bytes) ||
      Overlaps(logits, logit_bytes, top_k.weights, pick_bytes)) {
    return absl::InvalidArgumentError("MatMulTopKExperts: the logits overlap the expert ids or weights");
  }
  if (round_x != nullptr) {
    if (absl::Status s = CheckRounding("MatMulTopKExperts", router.cols, *round_x); !s.ok()) return s;
  }
  if (gate != nullptr) {
    if (gate->w.rows != 1 || gate->w.type != router.type || gate->w.cols != router.cols) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "MatMulTopKExperts: the shared gate is %d rows of %d %s columns (one row of the router's %d %s ones)",
          gate->w.rows, gate->w.cols, GgmlTypeName(gate->w.type), router.cols, GgmlTypeName(router.type)));
    }
    // The gate row takes a warp of its own: a row a warp, 32 columns or more.
    if (router.cols < kWarpSize) {
      return absl::InvalidArgumentError(
          absl::StrFormat("MatMulTopKExperts: a shared gate row with %d columns (at least %d)", router.cols, kWarpSize));
    }
    absl::StatusOr<int64_t> gate_bytes = CheckMatMul(gate->w, x, gate->out, n_tokens, exec);
    if (!gate_bytes.ok()) return gate_bytes.status();
    const int64_t out_bytes = int64_t{n_tokens} * 4;
    if (Overlaps(gate->out, out_bytes, logits, logit_bytes) || Overlaps(gate->out, out_bytes, top_k.expert_ids, pick_bytes) ||
        Overlaps(gate->out, out_bytes, top_k.weights, pick_bytes)) {
      return absl::InvalidArgumentError("MatMulTopKExperts: the shared gate's out overlaps the router's outputs");
    }
  }
  return matmul::DecodeTopK(router, *row_bytes, x, logits, n_tokens, top_k, round_x, gate, exec.stream);
}

}  // namespace octo::cuda
