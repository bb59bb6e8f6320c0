// The two paths of cuda::MatMul (kernels/ops.h), internal to kernels/cuda:
// matmul.cu checks the arguments and picks one; matmul_experts.cu runs the
// decode path per expert choice. Arguments arrive checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/kv_append.cuh"
#include "kernels/ops.h"

namespace octo::cuda::matmul {

// F32, F16 and BF16 weights are used as they are (no 8-bit activations on
// the decode path, no dequantized tiles on the prefill path).
inline bool IsFloatWeight(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

// The alignment the decode path's loads need of a weight tensor's start (and
// of each expert's, in a stacked tensor): 16 for the types it reads in
// 16-byte units (q8_dot.cuh), else 2 (every GGUF block field).
inline int64_t WeightAlignment(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K ? 16 : 2;
}
// INVALID_ARGUMENT naming `op` when w.data, or an expert's start at a
// multiple of expert_bytes, is not WeightAlignment(w.type)-aligned.
absl::Status CheckWeightAlignment(const char* op, const WeightMatrix& w, int64_t expert_bytes = 0);

// --- Decode (matmul_decode.cu) -----------------------------------------------
// Scratch for n_x activation rows of cols (the 8-bit activations; 0 for
// F32/F16/BF16 weights).
size_t DecodeScratchBytes(GgmlType type, int64_t cols, int64_t n_x);

// out (n_tokens, w.rows) = x (n_tokens, cols) · w^T, n_tokens <= kMaxDecodeTokens.
absl::Status Decode(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                    const Exec& exec);

// Decode's two halves, so that matrices reading the same x (MatMulGroup)
// share one rounding of it: the 8-bit activations of x for weights of
// `type` (act_q8.h) into exec.scratch, then a decode launch over them for
// any w whose type rounds by the same rule (ActQ8RuleFor). Float weights
// need no activations (act stays null).
struct ActQ8View {
  int8_t* q = nullptr;
  float* d = nullptr;
};
absl::Status QuantizeActivations(GgmlType type, const float* x, int n_tokens, int64_t cols, const Exec& exec,
                                 ActQ8View* act);
// bias: (w.rows) added to each token's row as AddBias adds it, or null.
// residual: (n_tokens, w.rows) that out is added into as Add(residual, out,
// residual) adds it, or null. norm (with residual; arguments checked): then
// the launch's last block norms the residual rows (fused.h's
// MatMulAddRmsNorm), rounding them into round_norm when it is non-null.
absl::Status DecodeQuantized(const WeightMatrix& w, int64_t row_bytes, const float* x, const ActQ8View& act,
                             float* out, int n_tokens, StreamHandle stream, const float* bias = nullptr,
                             float* residual = nullptr, const NormAfterAdd* norm = nullptr,
                             const ActQ8Out* round_norm = nullptr);
// DecodeQuantized for matrices of one type and cols over the same x and act,
// in one launch; each matrix's rows get the bits DecodeQuantized gives them
// (biases: one per matrix, each null or its rows' bias; empty: none).
// With tails (MatMulGroupRopeAppend's, fused.h): each matrix's rows are
// the heads of tails->role[i], which the launch's tail turns and appends.
enum class HeadRole : int8_t { kQuery, kKey, kValue };
struct HeadTails {
  uint32_t* arrivals = nullptr;  // a counter a head: q's, then k's, then v's
  HeadRole role[kMaxMatMulGroup] = {};
  const int32_t* positions = nullptr;
  RopeParams p;
  float theta_scale = 0;
  int k_heads = 0;
  HeadNorms norms;
  AppendTarget keys{}, values{};
  int64_t key_head_bytes = 0, value_head_bytes = 0;  // a head's bytes in a cache row
  float* split_q = nullptr;  // HeadsAfterQkv's q_split and gate
  float* split_gate = nullptr;
};
absl::Status DecodeQuantizedGroup(std::span<const WeightMatrix> ws, std::span<const int64_t> row_bytes,
                                  const float* x, const ActQ8View& act, std::span<float* const> outs, int n_tokens,
                                  StreamHandle stream, std::span<const float* const> biases = {},
                                  const HeadTails* tails = nullptr);

// MatMulGlu's launch (fused.h): out (n_tokens, gate.rows) = silu(x · gate^T)
// * (x · up^T) over x's activations `act` (gate and up of one type and
// shape, quantized), each product the bits of DecodeQuantizedGroup's two
// rows then SiluMul; with round_out, out is also rounded into it for the
// next MatMul (rows whole chunks of its rule; round_out->arrivals set, one
// zeroed counter per chunk of a row, when DecodeRowsPerBlock is less than
// a chunk).
absl::Status DecodeGlu(const WeightMatrix& gate, const WeightMatrix& up, int64_t row_bytes, const ActQ8View& act,
                       float* out, int n_tokens, const ActQ8Out* round_out, StreamHandle stream);
// The rows one decode block holds for a quantized matrix of cols (a power
// of two; 0 for a float type).
int64_t DecodeRowsPerBlock(GgmlType type, int64_t cols);

// A measuring aid (matmul_cuda_bench --row-lanes), not for the engine: the
// most lanes the decode path gives one quantized row from now on, 32 (the
// default), 64 or 128 (whole warps, so every type's staging holds). False,
// and no change, for any other value. Not thread-safe: set it before any
// launch.
bool SetDecodeMaxRowLanes(int lanes);

// A shared expert's slice of an expert launch (fused.h's SharedExpertGlu,
// SharedExpertDown; arguments checked): its one matrix w (with up: the
// GLU's gate and up) of the routed stack's type, every token through it
// into out (n_tokens, w->rows).
struct SharedSlice {
  const WeightMatrix* w;
  const WeightMatrix* up;     // the GLU's, else null
  int64_t row_bytes;
  float* out;
  ActQ8View x;                // the down's rounded x (the GLU reads the routed experts' x)
  const ActQ8Out* round_out;  // the GLU's rounding of out, or null
};

// MatMulExperts: each (token, choice) one decode row, the expert's matrix
// chosen on the device. Each of ws (up to kMaxMatMulGroup stacks of one
// type and layout, one launch) is a whole stack, into its out; expert_bytes
// one expert's matrix; rows per expert. rounded: x's 8-bit activations as a
// producer wrote them (fused.h), else x is rounded here. With tail (one
// stack of a quantized type, rounded): fused.h's MatMulExpertsCombineNorm
// (arguments checked), round_norm its rounding of the norm's output, and
// with shared the shared expert's down in the launch.
absl::Status DecodeExperts(std::span<const WeightMatrix> ws, int64_t rows, int64_t row_bytes, int64_t expert_bytes,
                           const int32_t* expert_ids, const float* x, std::span<float* const> outs,
                           const MatMulExpertsParams& p, const Exec& exec, const ActQ8View* rounded,
                           const CombineAfterExperts* tail = nullptr, const ActQ8Out* round_norm = nullptr,
                           const SharedSlice* shared = nullptr);
// A gated launch's round_out for `rows` outputs a row (MatMulGlu's,
// MatMulExpertsGlu's): whole chunks of its rule, and counters when a decode
// block of gate holds fewer rows than a chunk (INVALID_ARGUMENT naming op).
absl::Status CheckGluRounding(const char* op, const WeightMatrix& gate, int64_t rows, const ActQ8Out& round_out);
// fused.h's MatMulExpertsGlu: DecodeExperts of the gate and the up stack
// (one type and layout, x rounded here) then SiluMul, in one launch; out
// (n_choices, rows); with round_out (CheckGluRounding), out rounded into it
// a choice's row at a time, each row with its own chunk counters.
// rounded: x's activations as a launch before wrote them, else rounded here.
// shared: the shared expert's gate and up in the launch, over the same x.
absl::Status DecodeExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, int64_t rows, int64_t row_bytes,
                              int64_t expert_bytes, const int32_t* expert_ids, const float* x, float* out,
                              const MatMulExpertsParams& p, const Exec& exec, const ActQ8Out* round_out,
                              const ActQ8View* rounded, const SharedSlice* shared = nullptr);

// fused.h's MatMulTopKExperts on a float router w (arguments checked):
// Decode's rows of w, then the launch's last block picks each token's
// top_k experts of out; round_x: x also rounded into it; gate: its row
// too, one warp's (w.cols at least a warp's lanes).
absl::Status DecodeTopK(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                        const TopKExpertsOut& top_k, const ActQ8Out* round_x, const SharedGateRow* gate,
                        StreamHandle stream);

// --- Prefill (matmul_prefill.cu) ---------------------------------------------
// A quantized w is dequantized to fp16 a tile of rows at a time, each tile
// one GEMM: PrefillTileRows(rows, cols) rows, as many whole multiples of
// kPrefillTileQuantum as kPrefillTileElements (ops.h) elements hold (at
// least one, at most rows).
inline constexpr int64_t kPrefillTileQuantum = 128;
int64_t PrefillTileRows(int64_t rows, int64_t cols);

// A measuring aid (matmul_cuda_bench --prefill-tile-elements) and a test's
// way to many tiles, not for the engine: the elements a tile holds from now
// on (kPrefillTileElements by default); false, and no change, unless
// positive. Not thread-safe: set it before any launch.
bool SetPrefillTileElements(int64_t elements);

size_t PrefillScratchBytes(GgmlType type, int64_t rows, int64_t cols, int n_tokens);

// out (n_tokens, w.rows) = x · w^T through cublasGemmEx; exec.blas non-null.
absl::Status Prefill(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                     const Exec& exec);

}  // namespace octo::cuda::matmul
