// Every kernel op Octo runs, CPU and CUDA side by side.
//
// One op, one file: op Foo lives in kernels/cpu/foo.cc (namespace octo::cpu)
// and kernels/cuda/foo.cu (namespace octo::cuda). The two take the same
// arguments in the same order, so a test can run both on the same inputs; the
// CUDA version adds the stream it launches on as its last argument.
//
// Conventions for every op:
//  - Tensors are dense, row-major fp32 unless the op says otherwise; shapes are
//    given in comments, e.g. x (n_rows, dim).
//  - octo::cpu pointers are host memory. octo::cuda pointers are device memory
//    of the current device (or managed memory).
//  - Preconditions are checked before any work and fail with
//    INVALID_ARGUMENT, naming the op and the bad argument; nothing is written.
//  - CUDA ops are asynchronous: OK means the kernel was queued on `stream`.
//    A launch failure comes back as a Status (see kernels/cuda/common.cuh for
//    the codes); a fault while the kernel runs shows up at the next call that
//    waits on the stream.
//  - An output may alias an input only where the op says so.
//
// Building: octo_kernels_cpu always defines the octo::cpu ops.
// octo_kernels_cuda defines the octo::cuda ops and exists only when CMake found
// nvcc (it then sets the OCTO_HAVE_CUDA compile definition for its users).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "storage/ggml_type.h"

// The CUDA stream parameter. This header is included by code built without
// CUDA (the CPU backend, the forward pass, tests), so it cannot include
// cuda_runtime.h. The runtime defines `typedef struct CUstream_st*
// cudaStream_t;`, so declaring that incomplete struct gives the CUDA ops a
// parameter of exactly type cudaStream_t: callers pass a cudaStream_t with no
// cast, and the compiler still rejects any other pointer, which `void*` would
// not. A separate ops_cuda.h would split the list of ops in two.
// kernels/cuda/common.cuh static_asserts that the two types are the same.
struct CUstream_st;

namespace octo {
namespace cuda {

// Same type as cudaStream_t. nullptr is the legacy default stream.
using StreamHandle = ::CUstream_st*;

}  // namespace cuda

namespace cpu {

class ThreadPool;  // kernels/cpu/thread_pool.h

// Which vector instructions the CPU ops may use. kAvx2 needs AVX2, FMA and
// F16C; DetectSimd() (kernels/cpu/simd.h) says what this CPU has. Both
// paths are tested against each other; they may differ in the last bits
// (summation order), never in anything a token depends on.
enum class Simd { kPortable, kAvx2 };

// How the CPU ops that split work across threads run: the pool (nullptr
// runs everything on the calling thread) and the instruction set. Results do
// not depend on the pool size.
struct Exec {
  ThreadPool* pool = nullptr;
  Simd simd = Simd::kPortable;
};

}  // namespace cpu

// A weight matrix in its GGUF block encoding, as it sits in a layer file: a
// view, never owned, never dequantized as a whole.
//   rows: output features (ggml ne[1]); cols: input features (ggml ne[0]),
//   a multiple of the type's block size. Row r starts at
//   data + r * (cols / block_size * type_size).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// --- RMSNorm -----------------------------------------------------------------
// For each row r of x (n_rows, dim), with weight (dim) and out (n_rows, dim):
//
//   scale     = 1 / sqrt(sum_i(x[r][i]^2) / dim + eps)
//   out[r][i] = (x[r][i] * scale) * weight[i]
//
// Precision: the CPU version does what llama.cpp's CPU backend does: each
// square is a float product, the squares are summed in double in index
// order, the mean (sum / dim) is rounded to float, then
// scale = 1.0f / sqrtf(mean + eps) in float. The CUDA version sums the squares
// in float in a block-wide tree (as llama2.c and llama.cpp's CUDA backend do),
// so the two agree to rounding, not bit for bit (the test states the
// tolerance). sqrt and the division are IEEE-rounded in both.
//
// Preconditions (INVALID_ARGUMENT otherwise): x, weight and out non-null;
// n_rows > 0; dim > 0; eps >= 0 (NaN is rejected). With eps == 0 an all-zero
// row gives NaN, as the formula says.
//
// Aliasing: out may be x itself (in place, as the forward pass does it); any
// other overlap between out and x or weight is undefined.
namespace cpu {
absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps);
}  // namespace cpu

namespace cuda {
// Launches one block per row on `stream`.
absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps, StreamHandle stream);
}  // namespace cuda

// --- MatMul (kernels/cpu/matmul.cc) ---------------------------------------------
// out (n_tokens, w.rows) = x (n_tokens, w.cols) · w^T, straight from the block
// bytes of w: no dequantized copy of the matrix.
//
// Like llama.cpp's CPU backend, each row of x is first converted to the
// "activation type" of w's type, and the dot product is taken between the
// two encodings:
//   F32 -> F32     F16 -> F16     BF16 -> BF16
//   Q4_0, Q5_0, Q8_0, IQ4_NL -> Q8_0 (32-wide blocks, fp16 scale)
//   Q4_1, Q5_1               -> Q8_1 (Q8_0 plus the block sum d * sum(q))
//   Q2_K..Q6_K, IQ4_XS       -> Q8_K (256-wide, fp32 scale, 16-wide sums)
// This rounding is what makes our logits track llama.cpp's: the encodings
// are bit for bit those of llama.cpp's x86 build (the exact rules are in
// kernels/cpu/quantize_activation.h). Within a block the integer products
// are summed exactly; blocks combine in float as ggml combines them.
// Simd::kAvx2 changes only the float summation order.
//
// Determinism: out[t][r] depends only on x[t] and row r of w: not on
// n_tokens, the pool size or the scheduling. So a token computed in a batch
// of sessions gets exactly the logits it gets alone.
//
// Work: the encoded rows of x go to a scratch buffer owned by the calling
// thread (grown to the largest call, then reused); the rows of w are split
// into chunks across exec.pool, each chunk computing every token. With
// Simd::kAvx2 and n_tokens > 1, each weight row is unpacked once for up to 8
// tokens (kernels/cpu/act_tile.h); each token's dot keeps the one-token
// order, so the determinism above holds bit for bit.
//
// Preconditions (INVALID_ARGUMENT, naming the argument; out untouched):
// w.type one of the types above, non-null pointers, n_tokens > 0, rows > 0,
// cols > 0 and a multiple of the type's block size. out must not overlap x.
// x should be finite (a NaN or inf gives unspecified, but defined, outputs).
namespace cpu {
absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens,
                    const Exec& exec);
}  // namespace cpu

// --- MatVec (kernels/cuda/matvec.cu) ----------------------------------------------
// CUDA's MatMul for decode: out (n_tokens, w.rows) = x (n_tokens, w.cols) · w^T,
// each weight decoded from its block as it is read (kernels/block_decode.h,
// the decoders the CPU tests check against DequantizeRows), x kept in fp32
// and the products summed in float. Unlike cpu::MatMul, x is not rounded to
// an activation encoding first, so the two agree to rounding, not bit for
// bit; the test compares with fp64 dot products of the dequantized rows.
// One warp per row, up to 8 tokens per pass over w (more take more passes).
// Preconditions as MatMul's (INVALID_ARGUMENT naming MatVec and the field).
namespace cuda {
absl::Status MatVec(const WeightMatrix& w, const float* x, float* out, int n_tokens, StreamHandle stream);
}  // namespace cuda

// --- MatMulGroup (kernels/cpu/matmul.cc) ----------------------------------------
// outs[i] (n_tokens, ws[i].rows) = x (n_tokens, cols) · ws[i]^T for up to
// kMaxMatMulGroup matrices with the same cols that read the same x (q, k and
// v; gate and up). Bit for bit what separate MatMul calls give; x is encoded
// once per activation type and the rows of all the matrices go to the pool in
// one hand-off, so the small k and v matrices stop costing a hand-off each
// and idle threads at their tails. Preconditions as MatMul's, per matrix, plus
// equal cols and outs.size() == ws.size().
inline constexpr size_t kMaxMatMulGroup = 4;
namespace cpu {
absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                         int n_tokens, const Exec& exec);
}  // namespace cpu

// --- DequantizeRows (kernels/cpu/dequantize.cc) ----------------------------------
// out (n_rows, w.cols) = rows [first_row, first_row + n_rows) of w as fp32,
// exactly as ggml dequantizes them (same values, bit for bit; the embedding
// lookup uses this).
// Preconditions (INVALID_ARGUMENT; out untouched): w valid as for MatMul,
// out non-null, first_row >= 0, n_rows > 0, first_row + n_rows <= w.rows.
namespace cpu {
absl::Status DequantizeRows(const WeightMatrix& w, int64_t first_row, int64_t n_rows, float* out);
}  // namespace cpu

// --- RoPE (kernels/cpu/rope.cc) --------------------------------------------------
// Rotates, in place, the first rope_dim dimensions of every head of x
// (n_tokens, n_heads * head_dim) by position positions[t]; dimensions
// rope_dim..head_dim-1 are left as they are (partial rotary).
//   pair i (0 <= i < rope_dim/2): theta_i = pos * freq_base^(-2i/rope_dim)
//                                 / freq_factors[i] (when freq_factors)
//   normal (llama): rotates (x[2i], x[2i+1]);
//   neox (qwen2/3): rotates (x[i], x[i + rope_dim/2]).
// theta is computed as ggml computes it (theta_scale = powf(base, -2/rope_dim),
// multiplied up pair by pair in float), cos/sin in float.
// freq_factors (rope_dim/2) or nullptr: llama-3.1-style frequency scaling,
// stored in the model as rope_freqs.weight.
//   positions (n_tokens): any int32 (the angle starts at (float)pos, as in
//   ggml). The angles are computed once per token and shared by its heads.
// Preconditions (INVALID_ARGUMENT): x, positions non-null; n_tokens, n_heads,
// head_dim > 0; rope_dim even, 0 < rope_dim <= head_dim; freq_base > 0 and
// finite.
struct RopeParams {
  int n_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;     // even, <= head_dim
  float freq_base = 10000.f;
  bool neox = false;
  const float* freq_factors = nullptr;
};
namespace cpu {
absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p);
}  // namespace cpu

// --- Attention (kernels/cpu/attention.cc) ---------------------------------------
// Causal grouped-query attention of n_tokens new queries of one sequence
// over its KV cache, which already holds their keys and values.
//   q   (n_tokens, n_heads * head_dim) fp32
//   k_cache, v_cache (>= first_pos + n_tokens, n_kv_heads * head_dim) fp16
//       bits (kernels/half.h); row p is position p.
//   out (n_tokens, n_heads * head_dim) fp32
// Query t sits at position first_pos + t and sees cache rows
// 0..first_pos + t. Head h reads kv head h / (n_heads / n_kv_heads).
//   att = softmax(scale * q·k) over those rows; out = sum att * v.
// Precision: as llama.cpp's CPU backend, q is rounded to fp16 before the dot
// with the fp16 keys (the products are exact in fp32; the sum is fp32), the
// score is dot * scale in fp32, and the softmax is cpu::Softmax's (expf, sum
// in double, times the reciprocal). The softmax weights are then rounded to
// fp16 before the product with V, as llama.cpp does without flash attention
// (it converts them to V's type for that matmul); the weighted sum itself
// is in fp32. Measured against llama.cpp's reference outputs, this rounding
// cuts the mean top-5 logprob difference tenfold (F32 models: 1e-3 -> 1e-4),
// while imitating the flash-attention path (V accumulated in fp16) does not
// help: the reference came from the path without it. Simd::kAvx2 changes
// only the summation order of the dot and fuses the multiply-adds of the
// value sum.
//
// Work: one task per (token, head) on exec.pool; out[t][h] depends only on
// q[t][h] and cache rows 0..first_pos + t, so it is the same for any pool
// size and the same whether token t is computed alone (decode, n_tokens 1 at
// first_pos + t) or in a batch (prefill).
//
// Preconditions (INVALID_ARGUMENT): pointers non-null; n_tokens, n_heads,
// n_kv_heads, head_dim > 0; n_kv_heads divides n_heads; first_pos >= 0 and
// first_pos + n_tokens fits in an int; scale finite. The caches must hold
// first_pos + n_tokens rows (not checkable here).
// Aliasing: out may be q itself; no other overlap.
struct AttentionParams {
  int n_tokens = 0;
  int first_pos = 0;
  int n_heads = 0;
  int n_kv_heads = 0;   // divides n_heads
  int head_dim = 0;
  float scale = 0;      // usually 1 / sqrt(head_dim)
};
namespace cpu {
absl::Status Attention(const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                       float* out, const AttentionParams& p, const Exec& exec);
}  // namespace cpu

// --- SiluMul (kernels/cpu/silu_mul.cc) -----------------------------------------
// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)), for n values,
// in float with expf, as ggml's scalar swiglu (its AVX2 path uses an
// approximate exp; Octo does not).
// Preconditions (INVALID_ARGUMENT): pointers non-null, n > 0.
// out may alias gate or up.
namespace cpu {
absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n);
}  // namespace cpu

// --- Softmax (kernels/cpu/softmax.cc) ------------------------------------------
// In place over each row of x (n_rows, n), as ggml's soft_max on the CPU:
// subtract the row max, expf (in float; ggml's AVX2 path uses an approximate
// exp, Octo does not), sum in double, then multiply by the reciprocal of the
// sum rounded to float (not divide by the sum). A row holding NaN or +inf, or
// only -inf, comes out all NaN.
// Preconditions (INVALID_ARGUMENT): x non-null, n_rows > 0, n > 0.
namespace cpu {
absl::Status Softmax(float* x, int n_rows, int n);
}  // namespace cpu

// --- TopKExperts (kernels/cpu/top_k_experts.cc) --------------------------------
// Mixture-of-experts routing. For each token t of router_logits
// (n_tokens, n_experts): p = softmax(logits); expert_ids[t][j] are the k
// experts with the largest p, largest first (ties: the lower id first), and
// weights[t][j] their p, divided by the sum of the k chosen when normalize
// (mixtral, qwen3moe) and left as they are otherwise (qwen2moe).
//   expert_ids, weights (n_tokens, k)
// As llama.cpp's graph: p is cpu::Softmax's; the normalizing sum is taken in
// double, rounded to float, clamped to >= 2^-14, and each weight divided by
// it. A row of logits holding NaN or +inf gives NaN weights.
// Preconditions (INVALID_ARGUMENT): pointers non-null; n_tokens,
// n_experts > 0; 1 <= k <= n_experts.
namespace cpu {
absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k,
                         bool normalize, int32_t* expert_ids, float* weights);
}  // namespace cpu

}  // namespace octo
