// Argument checks shared by the CPU and CUDA versions of each op, so both
// refuse exactly the same inputs with the same message (INVALID_ARGUMENT).
// Host code only; safe to include from .cu files.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "storage/ggml_type.h"

namespace octo {

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) overlap
// (MatMul's out must not overlap its x, on either backend).
inline bool Overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a);
  const auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

// INVALID_ARGUMENT "<op>: <name> is null" for the first null pointer of
// `args` ({name, pointer} pairs, in the op's argument order); OK if none is.
inline absl::Status CheckNotNull(const char* op,
                                 std::initializer_list<std::pair<const char*, const void*>> args) {
  for (const auto& [name, pointer] : args) {
    if (pointer == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %s is null", op, name));
    }
  }
  return absl::OkStatus();
}

inline absl::Status CheckRmsNormArgs(const float* x, const float* weight, const float* out, int n_rows, int dim,
                                     float eps) {
  if (x == nullptr || weight == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RmsNorm: null pointer (x=%p, weight=%p, out=%p)", x, weight, out));
  }
  if (n_rows <= 0 || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RmsNorm: n_rows (%d) and dim (%d) must be positive", n_rows, dim));
  }
  if (!(eps >= 0.0f)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrFormat("RmsNorm: eps (%g) must be >= 0", eps));
  }
  return absl::OkStatus();
}

inline absl::Status CheckLayerNormArgs(const float* x, const float* weight, const float* bias, const float* out,
                                       int n_rows, int dim, float eps) {
  absl::Status null = CheckNotNull("LayerNorm", {{"x", x}, {"weight", weight}, {"bias", bias}, {"out", out}});
  if (!null.ok()) return null;
  if (n_rows <= 0 || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("LayerNorm: n_rows (%d) and dim (%d) must be positive", n_rows, dim));
  }
  if (!(eps >= 0.0f)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrFormat("LayerNorm: eps (%g) must be >= 0", eps));
  }
  return absl::OkStatus();
}

inline absl::Status CheckGeluArgs(const float* x, const float* out, int64_t n) {
  absl::Status null = CheckNotNull("Gelu", {{"x", x}, {"out", out}});
  if (!null.ok()) return null;
  if (n <= 0) return absl::InvalidArgumentError(absl::StrFormat("Gelu: n (%d) must be positive", n));
  return absl::OkStatus();
}

// positions is not read: it may be device memory. Any int32 position is
// accepted (the angle is (float)pos * ..., as in ggml).
inline absl::Status CheckRopeArgs(const float* x, const int32_t* positions, int n_tokens,
                                  const RopeParams& p) {
  absl::Status null = CheckNotNull("Rope", {{"x", x}, {"positions", positions}});
  if (!null.ok()) return null;
  if (n_tokens <= 0 || p.n_heads <= 0 || p.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Rope: n_tokens (%d), n_heads (%d) and head_dim (%d) must be positive",
                        n_tokens, p.n_heads, p.head_dim));
  }
  if (p.rope_dim <= 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Rope: rope_dim (%d) must be even, positive and <= head_dim (%d)", p.rope_dim, p.head_dim));
  }
  if (!(p.freq_base > 0.0f) || !std::isfinite(p.freq_base)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Rope: freq_base (%g) must be positive and finite", p.freq_base));
  }
  return absl::OkStatus();
}

inline absl::Status CheckAttentionArgs(const float* q, const void* k_cache, const void* v_cache,
                                       const float* out, const AttentionParams& p) {
  absl::Status null = CheckNotNull(
      "Attention", {{"q", q}, {"k_cache", k_cache}, {"v_cache", v_cache}, {"out", out}});
  if (!null.ok()) return null;
  if (p.n_tokens <= 0 || p.n_heads <= 0 || p.n_kv_heads <= 0 || p.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Attention: n_tokens (%d), n_heads (%d), n_kv_heads (%d) and head_dim (%d) must be "
        "positive",
        p.n_tokens, p.n_heads, p.n_kv_heads, p.head_dim));
  }
  if (p.first_pos < 0 || static_cast<int64_t>(p.first_pos) + p.n_tokens > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Attention: first_pos (%d) must be >= 0 and first_pos + n_tokens (%d) fit in an int",
        p.first_pos, p.n_tokens));
  }
  if (p.n_heads % p.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Attention: n_kv_heads (%d) must divide n_heads (%d)", p.n_kv_heads, p.n_heads));
  }
  if (!std::isfinite(p.scale)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Attention: scale (%g) must be finite", p.scale));
  }
  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  absl::Status k_type = KvRowCheck("Attention: types.k", p.types.k, kv_dim);
  if (!k_type.ok()) return k_type;
  absl::Status v_type = KvRowCheck("Attention: types.v", p.types.v, kv_dim);
  if (!v_type.ok()) return v_type;
  if (p.first_pos_at != nullptr && (p.tree_mask != nullptr || !p.causal || p.max_ctx < p.n_tokens)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Attention: first_pos_at needs a causal step without tree_mask and max_ctx (%d) >= n_tokens (%d)",
        p.max_ctx, p.n_tokens));
  }
  // tree_mask itself is not read: it is device memory for the CUDA op.
  if (p.tree_mask != nullptr && !p.causal) {
    return absl::InvalidArgumentError("Attention: a tree_mask needs causal (a tree query sees its ancestors only)");
  }
  if (p.tree_mask != nullptr) {
    if (p.n_tokens > kMaxTreeAttentionRows) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Attention: n_tokens (%d) must be <= kMaxTreeAttentionRows (%d) with a tree_mask",
          p.n_tokens, kMaxTreeAttentionRows));
    }
    if (p.tree_base < 0 || static_cast<int64_t>(p.tree_base) + kMaxTreeAttentionRows > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Attention: tree_base (%d) must be >= 0 and tree_base + kMaxTreeAttentionRows (%d) fit "
          "in an int",
          p.tree_base, kMaxTreeAttentionRows));
    }
  }
  return absl::OkStatus();
}

inline absl::Status CheckSiluMulArgs(const float* gate, const float* up, const float* out,
                                     int64_t n) {
  absl::Status null = CheckNotNull("SiluMul", {{"gate", gate}, {"up", up}, {"out", out}});
  if (!null.ok()) return null;
  if (n <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("SiluMul: n (%d) must be positive", n));
  }
  return absl::OkStatus();
}

inline absl::Status CheckSoftmaxArgs(const float* x, int n_rows, int n) {
  absl::Status null = CheckNotNull("Softmax", {{"x", x}});
  if (!null.ok()) return null;
  if (n_rows <= 0 || n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Softmax: n_rows (%d) and n (%d) must be positive", n_rows, n));
  }
  return absl::OkStatus();
}

inline absl::Status CheckTopKExpertsArgs(const float* router_logits, int n_tokens, int n_experts,
                                         int k, const int32_t* expert_ids,
                                         const float* weights) {
  absl::Status null = CheckNotNull("TopKExperts", {{"router_logits", router_logits},
                                                   {"expert_ids", expert_ids},
                                                   {"weights", weights}});
  if (!null.ok()) return null;
  if (n_tokens <= 0 || n_experts <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TopKExperts: n_tokens (%d) and n_experts (%d) must be positive", n_tokens, n_experts));
  }
  if (k <= 0 || k > n_experts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TopKExperts: k (%d) must be in [1, n_experts (%d)]", k, n_experts));
  }
  return absl::OkStatus();
}

inline absl::Status CheckTopLogitsArgs(const float* logits, int n_rows, int vocab, const TopLogitsRow* out) {
  absl::Status null = CheckNotNull("TopLogits", {{"logits", logits}, {"out", out}});
  if (!null.ok()) return null;
  if (n_rows <= 0 || vocab <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("TopLogits: n_rows (%d) and vocab (%d) must be positive", n_rows, vocab));
  }
  return absl::OkStatus();
}

// The bytes of one row of w, once w is a valid weight matrix: a type of the
// table, non-null data, rows > 0, cols a positive multiple of the block size,
// and a size that fits in the address space. INVALID_ARGUMENT naming `op`
// and the field otherwise (cpu::MatMul's messages).
inline absl::StatusOr<int64_t> CheckWeightShape(const char* op, const WeightMatrix& w) {
  const GgmlTypeInfo* info = nullptr;
  for (const GgmlTypeInfo& candidate : AllGgmlTypes()) {
    if (candidate.type == w.type) info = &candidate;
  }
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: w.type %d is not a weight type", op, static_cast<uint32_t>(w.type)));
  }
  if (w.data == nullptr) return absl::InvalidArgumentError(absl::StrFormat("%s: w.data is null", op));
  if (w.rows <= 0) return absl::InvalidArgumentError(absl::StrFormat("%s: w.rows (%d) must be positive", op, w.rows));
  if (w.cols <= 0 || w.cols % info->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: w.cols (%d) must be a positive multiple of %s's block size %d",
                                                      op, w.cols, info->name, info->block_size));
  }
  const int64_t blocks = w.cols / info->block_size;
  if (blocks > INT64_MAX / info->type_size || w.rows > INT64_MAX / (blocks * info->type_size)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: w (%d x %d) is larger than the address space", op, w.rows, w.cols));
  }
  return blocks * static_cast<int64_t>(info->type_size);
}

// DequantizeRows' checks, both backends' (the CPU checks w against its
// kernel table first). Returns the bytes of one row of w.
inline absl::StatusOr<int64_t> CheckDequantizeRowsArgs(const WeightMatrix& w, int64_t first_row, int64_t n_rows,
                                                       const float* out) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape("DequantizeRows", w);
  if (!row_bytes.ok()) return row_bytes.status();
  if (out == nullptr) return absl::InvalidArgumentError("DequantizeRows: out is null");
  if (first_row < 0 || n_rows <= 0 || n_rows > w.rows - first_row) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DequantizeRows: rows [first_row %d, + n_rows %d) are not a non-empty range of "
                        "w's %d rows",
                        first_row, n_rows, w.rows));
  }
  return row_bytes;
}

inline absl::StatusOr<int64_t> CheckGetRowsArgs(const WeightMatrix& w, const int32_t* ids, int n, const float* out) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape("GetRows", w);
  if (!row_bytes.ok()) return row_bytes.status();
  absl::Status null = CheckNotNull("GetRows", {{"ids", ids}, {"out", out}});
  if (!null.ok()) return null;
  if (n <= 0) return absl::InvalidArgumentError(absl::StrFormat("GetRows: n (%d) must be positive", n));
  return row_bytes;
}

inline absl::Status CheckAddArgs(const float* a, const float* b, const float* out, int64_t n) {
  absl::Status null = CheckNotNull("Add", {{"a", a}, {"b", b}, {"out", out}});
  if (!null.ok()) return null;
  if (n <= 0) return absl::InvalidArgumentError(absl::StrFormat("Add: n (%d) must be positive", n));
  return absl::OkStatus();
}

inline absl::Status CheckMoeCombineArgs(const MoeCombineParams& p) {
  absl::Status null = CheckNotNull("MoeCombine", {{"expert_out", p.expert_out}, {"weights", p.weights}, {"out", p.out}});
  if (!null.ok()) return null;
  if (p.n_rows <= 0 || p.k <= 0 || p.dim <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MoeCombine: n_rows (%d), k (%d) and dim (%d) must be positive",
                                                      p.n_rows, p.k, p.dim));
  }
  return absl::OkStatus();
}

inline absl::Status CheckAddBiasArgs(const float* x, const float* bias, int n_rows, int width) {
  absl::Status null = CheckNotNull("AddBias", {{"x", x}, {"bias", bias}});
  if (!null.ok()) return null;
  if (n_rows <= 0 || width <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("AddBias: n_rows (%d) and width (%d) must be positive", n_rows, width));
  }
  return absl::OkStatus();
}

inline absl::Status CheckKvAppendArgs(const float* k, const float* v, int n_tokens, int kv_dim,
                                      const void* k_cache, const void* v_cache, int first_pos,
                                      KvCacheTypes types) {
  absl::Status null =
      CheckNotNull("KvAppend", {{"k", k}, {"v", v}, {"k_cache", k_cache}, {"v_cache", v_cache}});
  if (!null.ok()) return null;
  if (n_tokens <= 0 || kv_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KvAppend: n_tokens (%d) and kv_dim (%d) must be positive", n_tokens, kv_dim));
  }
  if (first_pos < 0 || static_cast<int64_t>(first_pos) + n_tokens > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvAppend: first_pos (%d) must be >= 0 and first_pos + n_tokens (%d) fit in an int", first_pos, n_tokens));
  }
  absl::Status k_type = KvRowCheck("KvAppend: types.k", types.k, kv_dim);
  if (!k_type.ok()) return k_type;
  return KvRowCheck("KvAppend: types.v", types.v, kv_dim);
}

// MatMulExperts' shapes (both backends; the CPU also checks the ids). Returns
// the bytes of one expert's matrix.
// One expert's matrix within a stacked one: its row length in bytes, and the
// bytes from one expert's first row to the next expert's.
struct ExpertLayout {
  int64_t row_bytes = 0;
  int64_t expert_bytes = 0;
};
inline absl::StatusOr<ExpertLayout> CheckMatMulExpertsArgs(const WeightMatrix& w, const int32_t* expert_ids,
                                                      const float* x, const float* out,
                                                      const MatMulExpertsParams& p) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape("MatMulExperts", w);
  if (!row_bytes.ok()) return row_bytes.status();
  absl::Status null = CheckNotNull("MatMulExperts", {{"expert_ids", expert_ids}, {"x", x}, {"out", out}});
  if (!null.ok()) return null;
  if (p.n_experts <= 0 || w.rows % p.n_experts != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExperts: n_experts (%d) must be positive and divide w.rows (%d)", p.n_experts, w.rows));
  }
  if (p.k < 1 || p.k > p.n_experts) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatMulExperts: k (%d) must be in [1, n_experts (%d)]", p.k, p.n_experts));
  }
  if (p.n_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMulExperts: n_tokens (%d) must be positive", p.n_tokens));
  }
  const int64_t packed = *row_bytes * (w.rows / p.n_experts);
  if (w.expert_stride != 0 && w.expert_stride < packed) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExperts: expert_stride (%d) is below one expert's matrix (%d bytes)", w.expert_stride, packed));
  }
  return ExpertLayout{*row_bytes, w.expert_stride != 0 ? w.expert_stride : packed};
}

inline absl::Status CheckDeltaNetConvArgs(const float* x, const float* taps, const float* state_in,
                                          const float* state_out, const float* out, const DeltaNetConvParams& p) {
  absl::Status null = CheckNotNull(
      "DeltaNetConv", {{"x", x}, {"taps", taps}, {"state_in", state_in}, {"state_out", state_out}, {"out", out}});
  if (!null.ok()) return null;
  if (p.n_tokens <= 0 || p.channels <= 0 || p.kernel < 2 || p.kernel > 16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DeltaNetConv: n_tokens (%d) and channels (%d) must be positive, kernel (%d) 2 to 16",
                        p.n_tokens, p.channels, p.kernel));
  }
  const int64_t io_bytes = int64_t{p.n_tokens} * p.channels * 4, state_bytes = int64_t{p.kernel - 1} * p.channels * 4;
  if (Overlaps(out, io_bytes, x, io_bytes) || Overlaps(out, io_bytes, state_in, state_bytes) ||
      Overlaps(out, io_bytes, state_out, state_bytes)) {
    return absl::InvalidArgumentError("DeltaNetConv: out overlaps x or a state");
  }
  return absl::OkStatus();
}

inline absl::Status CheckGatedDeltaRuleArgs(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                            const float* decay, const float* state_in, const float* state_out,
                                            const float* out, const GatedDeltaRuleParams& p) {
  absl::Status null = CheckNotNull("GatedDeltaRule", {{"qkv", qkv},
                                                      {"b", b},
                                                      {"a", a},
                                                      {"dt_bias", dt_bias},
                                                      {"decay", decay},
                                                      {"state_in", state_in},
                                                      {"state_out", state_out},
                                                      {"out", out}});
  if (!null.ok()) return null;
  if (p.n_tokens <= 0 || p.k_heads <= 0 || p.v_heads <= 0 || p.head_dim <= 0 || p.head_dim > 256 ||
      p.v_heads % p.k_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GatedDeltaRule: n_tokens (%d), k_heads (%d), v_heads (%d, a multiple of k_heads) and head_dim (%d, at "
        "most 256) must be positive",
        p.n_tokens, p.k_heads, p.v_heads, p.head_dim));
  }
  if (p.qkv_stride < int64_t{2 * p.k_heads + p.v_heads} * p.head_dim ||
      p.ba_stride < (p.grouped_ba ? 2 * p.v_heads : p.v_heads)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GatedDeltaRule: qkv_stride (%d) or ba_stride (%d) is shorter than a row", p.qkv_stride, p.ba_stride));
  }
  if (!(p.eps >= 0) || !std::isfinite(p.eps)) {
    return absl::InvalidArgumentError(absl::StrFormat("GatedDeltaRule: eps (%g) must be finite and >= 0", p.eps));
  }
  if (p.chunk != 0 && (p.chunk < 2 || p.chunk > kMaxDeltaRuleChunk)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GatedDeltaRule: chunk (%d) must be 0 (step form) or 2 to %d", p.chunk, kMaxDeltaRuleChunk));
  }
  if (p.first_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GatedDeltaRule: first_position (%d) must be >= 0", p.first_position));
  }
  return absl::OkStatus();
}

inline absl::Status CheckSplitGatedQueryArgs(const float* qg, const float* q, const float* gate, int n_tokens,
                                             int n_heads, int head_dim) {
  absl::Status null = CheckNotNull("SplitGatedQuery", {{"qg", qg}, {"q", q}, {"gate", gate}});
  if (!null.ok()) return null;
  if (n_tokens <= 0 || n_heads <= 0 || head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SplitGatedQuery: n_tokens (%d), n_heads (%d) and head_dim (%d) must be positive", n_tokens, n_heads,
        head_dim));
  }
  const int64_t half = int64_t{n_tokens} * n_heads * head_dim * 4;
  if (Overlaps(q, half, qg, 2 * half) || Overlaps(gate, half, qg, 2 * half)) {
    return absl::InvalidArgumentError("SplitGatedQuery: q or gate overlaps qg");
  }
  return absl::OkStatus();
}

inline absl::Status CheckSigmoidMulArgs(const float* gate, const float* x, int64_t n) {
  absl::Status null = CheckNotNull("SigmoidMul", {{"gate", gate}, {"x", x}});
  if (!null.ok()) return null;
  if (n <= 0) return absl::InvalidArgumentError(absl::StrFormat("SigmoidMul: n (%d) must be positive", n));
  return absl::OkStatus();
}

}  // namespace octo
