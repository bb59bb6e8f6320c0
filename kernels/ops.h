// Every kernel op Octo runs, CPU and CUDA side by side.
//
// One op, one file: op Foo lives in kernels/cpu/foo.cc (namespace octo::cpu)
// and kernels/cuda/foo.cu (namespace octo::cuda). The two take the same
// arguments in the same order, so a test can run both on the same inputs.
// Where the CPU version takes a cpu::Exec (its thread pool), the CUDA version
// takes a cuda::Exec (its stream, scratch and cuBLAS handle) in the same
// place; where the CPU version takes none, the CUDA version adds the stream it
// launches on as its last argument.
//
// Conventions for every op:
//  - Tensors are dense, row-major fp32 unless the op says otherwise; shapes are
//    given in comments, e.g. x (n_rows, dim).
//  - octo::cpu pointers are host memory. octo::cuda pointers are device memory
//    of the current device (or managed memory), a WeightMatrix's data too.
//  - Preconditions are checked before any work and fail with
//    INVALID_ARGUMENT, naming the op and the bad argument; nothing is written
//    and nothing is launched.
//  - CUDA ops are asynchronous: OK means the kernels were queued on the
//    stream. A launch failure comes back as a Status (see
//    kernels/cuda/common.cuh for the codes); a fault while a kernel runs shows
//    up at the next call that waits on the stream.
//  - CUDA results agree with the CPU's to rounding, not bit for bit; each
//    op's test states its tolerance and where it comes from. A CUDA op's
//    output for one row (token) never depends on the other rows of the call,
//    except where the op says so (MatMul's two paths).
//  - An output may alias an input only where the op says so.
//
// Building: octo_kernels_cpu always defines the octo::cpu ops.
// octo_kernels_cuda defines the octo::cuda ops and exists only when CMake found
// nvcc or builds for the host executor (OCTO_CUDA_SIM); it then sets the
// OCTO_HAVE_CUDA compile definition for its users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "kernels/kv_types.h"
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
// Likewise cuBLAS's handle: `typedef struct cublasContext* cublasHandle_t;`.
struct cublasContext;

namespace octo {
namespace cuda {

// Same type as cudaStream_t. nullptr is the legacy default stream.
using StreamHandle = ::CUstream_st*;
// Same type as cublasHandle_t.
using BlasHandle = ::cublasContext*;

// How the CUDA ops that need more than a stream run.
//   stream:  where the op queues its kernels.
//   scratch: device memory the op may use while it runs (scratch_bytes of
//            it, 256-byte aligned as cudaMalloc gives it). Ops on one stream
//            run in order, so one scratch per stream serves them all; two
//            streams need two. The op's <Op>ScratchBytes() says how much a
//            call needs; less is INVALID_ARGUMENT naming both sizes.
//   blas:    a cuBLAS handle, for MatMul's prefill path; the op sets its
//            stream to `stream`.
struct Exec {
  StreamHandle stream = nullptr;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  BlasHandle blas = nullptr;
};

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
  // A stacked expert matrix only (MatMulExperts): bytes from expert e's
  // matrix to expert e+1's. 0 = packed, each expert right after the previous
  // one; a format-2 layer file pads each expert's block to 4 KiB, so that
  // one expert can be read alone (storage/FORMAT.md).
  int64_t expert_stride = 0;
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
// scale = 1.0f / sqrtf(mean + eps) in float. The CUDA version sums the same
// float squares in double in a block-wide tree: exact enough that the float
// mean is the CPU's except at a rounding tie, so the two agree bit for bit
// but for such ties (the test states the tolerance). A float sum (llama.cpp's
// CUDA backend) moves the 8-bit activations downstream off the CPU's, and
// the tokens off llama.cpp's reference. sqrt and the division are
// IEEE-rounded in both.
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
// The residual add and the norm after it in one launch: x += delta, then
// out = RmsNorm(x) -- bit for bit what Add(x, delta, x) then RmsNorm(x,
// weight, out) give, in half the launches. out may be delta (each element
// of delta is read before out's is written); x must overlap neither.
absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                        float eps, StreamHandle stream);
}  // namespace cuda

// --- LayerNorm (kernels/cpu/layer_norm.cc) -------------------------------------
// The encoders' norm (BERT, nomic-bert): for each row r of x (n_rows, dim),
// with weight, bias (dim) and out (n_rows, dim):
//
//   mean      = sum_i(x[r][i]) / dim
//   v_i       = x[r][i] - mean
//   variance  = sum_i(v_i^2) / dim
//   out[r][i] = (v_i / sqrt(variance + eps)) * weight[i] + bias[i]
//
// Precision: the CPU version does what llama.cpp's CPU backend does (its
// norm, then its separate mul and add ops): x summed in double in index
// order, the mean rounded to float; v_i = x - mean in float; the float
// squares v_i * v_i summed in double in index order, the variance rounded
// to float; scale = 1.0f / sqrtf(variance + eps); out = (v_i * scale) *
// weight[i] + bias[i], each step rounded to float. The CUDA version sums the
// same floats in double in a block-wide tree: the float mean and variance
// are the CPU's unless the two double sums round to either side of a float
// rounding boundary (a tie, or a row whose sum cancels almost to zero), so
// the outputs agree bit for bit but for such rows, where they are a few
// float ulps apart (the test states the tolerance).
//
// Preconditions (INVALID_ARGUMENT otherwise): x, weight, bias and out
// non-null; n_rows > 0; dim > 0; eps >= 0 (NaN is rejected). With eps == 0
// a constant row gives NaN, as the formula says.
//
// Aliasing: out may be x itself; any other overlap is undefined.
namespace cpu {
absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
                       float eps);
}  // namespace cpu
namespace cuda {
// Launches one block per row on `stream`.
absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
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
//   Q2_K..Q6_K, IQ1-IQ4_XS, TQ1_0, TQ2_0 -> Q8_K (256-wide, fp32 scale, 16-wide sums)
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

// --- MatMul on CUDA (kernels/cuda/matmul.cu) -------------------------------------
// out (n_tokens, w.rows) = x (n_tokens, w.cols) · w^T, as cpu::MatMul, on two
// paths chosen by n_tokens:
//
//  - Decode, n_tokens <= kMaxDecodePathTokens (kernels/cuda/matmul_decode.cu),
//    in launches of up to kMaxDecodeTokens tokens:
//    every weight decoded from its block as it is read, each weight byte read
//    once per launch whatever its token count. For the quantized types x is
//    first rounded to 8 bits exactly as the CPU encodes it for the weight's
//    type (kernels/cuda/act_q8.h: per 32 with an fp16 scale for the Q8_0/Q8_1
//    types, per 256 for the Q8_K ones) and the dot products are integer
//    (__dp4a) per 32 elements, scaled in float; F32/F16/BF16 weights meet x
//    in fp32. Row r of token t is summed in the same order whatever n_tokens
//    is, so a token gets the same bits alone or in a decode-path batch.
//  - Prefill, n_tokens > kMaxDecodePathTokens (kernels/cuda/matmul_prefill.cu):
//    w dequantized to fp16 a tile of rows at a time (F16/BF16/F32 used as they
//    are), x rounded to w's 16-bit type (fp32 for F32), and cublasGemmEx with
//    fp32 accumulation.
//
// The two paths round differently (8-bit vs 16-bit activations), so a token
// computed in a prefill batch is not bit for bit the same as decoded; both
// agree with cpu::MatMul to the rounding of their activations (the test's
// bound is computed from it).
//
// Scratch: MatMulScratchBytes(w, n_tokens) (0 for float weights on the decode
// path); exec.blas is needed on the prefill path.
// Preconditions as cpu::MatMul's (INVALID_ARGUMENT naming MatMul and the
// argument), plus the scratch and, for prefill, exec.blas. out must not
// overlap x. The decode path reads w in aligned 4- and 16-byte loads
// (kernels/cuda/weight_stage.cuh): a matrix whose size is not a multiple of
// 4 is read up to 3 bytes past its end, which its allocation must hold --
// every cuda::DeviceBuffer and CudaBackend allocation does (whole
// kAllocationUnit units, kernels/cuda/device.h).
inline constexpr int kMaxDecodeTokens = 16;
// Short prefills (a chat turn, a verified draft) stay on the decode path, so
// their activations round as the CPU's do and their tokens track llama.cpp's
// as closely; the weights are then read once per 16 tokens.
inline constexpr int kMaxDecodePathTokens = 64;
namespace cuda {
// The most elements of w the prefill path dequantizes for one GEMM (its
// scratch holds them in fp16 behind x's). A tile's GEMM, tile rows x
// n_tokens outputs, must fill the GPU: 512 rows at a 512-token pass were 16
// output tiles of 128 x 128 for 132 SMs. 32 Mi elements (64 MiB) hold a
// whole 4096-column matrix of up to 8192 rows, and 2304 rows of 14336
// columns.
inline constexpr int64_t kPrefillTileElements = int64_t{32} << 20;
size_t MatMulScratchBytes(const WeightMatrix& w, int n_tokens);
absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec);
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
// CUDA: bit for bit what separate cuda::MatMul calls give. On the decode path
// x is rounded to 8 bits once per rounding rule the matrices' types share
// (act_q8.h), not once per matrix, and the matrices of one type decode in
// one launch (their rows in consecutive ranges of its grid): q, k and v of a
// Q4_K model take one quantize and one decode launch instead of six
// launches (Q4_K_M's Q6_K attn_v layers: one more). Scratch:
// MatMulGroupScratchBytes (the largest of the matrices' MatMulScratchBytes).
namespace cuda {
size_t MatMulGroupScratchBytes(std::span<const WeightMatrix> ws, int n_tokens);
absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                         int n_tokens, const Exec& exec);
}  // namespace cuda

// --- DequantizeRows (kernels/cpu/dequantize.cc) ----------------------------------
// out (n_rows, w.cols) = rows [first_row, first_row + n_rows) of w as fp32,
// exactly as ggml dequantizes them (same values, bit for bit; the embedding
// lookup uses this).
// Preconditions (INVALID_ARGUMENT; out untouched): w valid as for MatMul,
// out non-null, first_row >= 0, n_rows > 0, first_row + n_rows <= w.rows.
namespace cpu {
absl::Status DequantizeRows(const WeightMatrix& w, int64_t first_row, int64_t n_rows, float* out);
}  // namespace cpu
// CUDA: the same values, bit for bit (the decoders of kernels/block_decode.h,
// built without contraction).
namespace cuda {
absl::Status DequantizeRows(const WeightMatrix& w, int64_t first_row, int64_t n_rows, float* out,
                            StreamHandle stream);
}  // namespace cuda

// --- GetRows (kernels/cpu/dequantize.cc) -----------------------------------------
// out (n, w.cols): row i is row ids[i] of w as fp32, decoded as
// DequantizeRows decodes it (the decoders' embedding lookup, from the token
// ids). ids is host memory for cpu::GetRows and device memory for
// cuda::GetRows, like Rope's positions.
// Preconditions (INVALID_ARGUMENT): w valid as for MatMul, ids and out
// non-null, n > 0; on the CPU every id in [0, w.rows). The CUDA host code
// cannot read the ids: a row whose id is out of range comes out as zeros
// (the forward pass checks the ids before).
namespace cpu {
absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out);
}  // namespace cpu
namespace cuda {
absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out, StreamHandle stream);
}  // namespace cuda

// --- MatMulExperts (kernels/cpu/matmul_experts.cc) --------------------------------
// The expert matmuls of a mixture-of-experts FFN: for every token t and each
// of its k choices j,
//   out[t][j] (rows) = x_tj · (expert e = expert_ids[t][j] of w)^T
// where w stacks the experts' matrices along its rows, (n_experts * rows,
// cols), expert e's being rows [e * rows, (e + 1) * rows) (ExpertSlice's
// layout) starting at byte e * w.expert_stride when that is set (>= the
// packed size of one expert's matrix), and x_tj is row t of x (n_tokens, cols), shared by the token's k
// choices, or with x_per_choice row (t, j) of x (n_tokens, k, cols) (the down
// projection reads each choice's own hidden row).
//   expert_ids (n_tokens, k), out (n_tokens, k, rows).
// CPU: bit for bit what cpu::MatMul gives for each (t, j) alone; the rows
// routed to one expert are gathered, so its matrix is walked once per call.
// CUDA: the decode path of cuda::MatMul for every (t, j) whatever n_tokens
// (rows are not gathered: expert_ids are on the device); an id outside
// [0, n_experts), which the host cannot see, gives NaN rows.
// Scratch (CUDA): MatMulExpertsScratchBytes.
// Preconditions as MatMul's with w.rows a multiple of n_experts, plus
// 1 <= k <= n_experts, and for the CPU every id in [0, n_experts).
struct MatMulExpertsParams {
  int n_experts = 0;
  int k = 0;  // choices per token
  int n_tokens = 0;
  bool x_per_choice = false;
};
namespace cpu {
absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                           const MatMulExpertsParams& p, const Exec& exec);
}  // namespace cpu
namespace cuda {
size_t MatMulExpertsScratchBytes(const WeightMatrix& w, const MatMulExpertsParams& p);
absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                           const MatMulExpertsParams& p, const Exec& exec);
}  // namespace cuda

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
// CUDA: one thread per (token, head, pair); theta multiplied up pair by pair
// as on the CPU (same bits), cos/sin from the device's cosf/sinf (within 2 ulp
// of the CPU's). positions and freq_factors are device memory.
namespace cuda {
absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p, StreamHandle stream);
// q (n_tokens, p.n_heads * head_dim) and k (n_tokens, k_heads * head_dim)
// rotated in one launch: bit for bit Rope(q, p) then Rope(k, p with
// k_heads heads). q and k must not overlap.
absl::Status RopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& p, int k_heads,
                    StreamHandle stream);
}  // namespace cuda

// --- Attention (kernels/cpu/attention.cc) ---------------------------------------
// The most rows one tree step may carry: the bits of a tree_mask word.
inline constexpr int kMaxTreeAttentionRows = 64;

// Causal (or, with a tree_mask, tree; or bidirectional) grouped-query
// attention of n_tokens new queries of one sequence over its KV cache, which already holds their
// keys and values.
//   q   (n_tokens, n_heads * head_dim) fp32
//   k_cache, v_cache (>= first_pos + n_tokens, n_kv_heads * head_dim) in
//       the cache types p.types.k and p.types.v (kernels/kv_blocks.h: fp16
//       bits, or Q8_0/Q4_0/Q4_1 blocks); row p is position p.
//   out (n_tokens, n_heads * head_dim) fp32
// Query t sits at position first_pos + t and sees cache rows
// 0..first_pos + t. Head h reads kv head h / (n_heads / n_kv_heads).
// Non-causal (causal false; an encoder such as BERT): every query sees all
// rows 0..first_pos + n_tokens - 1, and is computed exactly as a causal
// query at the last position, first_pos + n_tokens - 1, with its own q: the
// same bits, on either backend, as that causal call gives.
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
// A quantized cache: each key or value is its block's decoded float
// (block_decode.h), in place of the fp16 one; q is still rounded to fp16
// (not to Q8_0 as llama.cpp's quantized dot would: the scores are then the
// decoded keys' exact float dot, which is all the cache type costs). Over
// a quantized V the softmax weights stay fp32 (llama.cpp's flash-attention
// path, the one a quantized V needs there, keeps them so too).
//
// Work: one task per (token, head) on exec.pool, or over a quantized cache
// per (token, kv head) when that leaves two tasks per thread (the group's
// query heads share each decoded row); out[t][h] depends only on q[t][h]
// and the cache rows it sees (0..first_pos + t when causal), so it is the
// same for any pool size and the same whether token t is computed alone
// (decode, n_tokens 1 at first_pos + t) or in a batch (prefill).
//
// Tree attention (speculative decoding checks a tree of draft tokens in one
// step): with tree_mask set, query t sees cache rows [0, tree_base) and,
// for every set bit j of tree_mask[t], row tree_base + j (its ancestors in
// the tree and itself), in ascending order: n_ctx(t) = tree_base +
// popcount(tree_mask[t]) rows. They are its logical positions 0..n_ctx(t)
// - 1: logical i is row i for i < tree_base, else row tree_base + (the
// index of the (i - tree_base)-th set bit, counting from bit 0). The query
// is computed exactly as a causal query at position n_ctx(t) - 1 whose rows
// 0..n_ctx(t) - 1 are those logical rows, so its output is bit for bit
// what the causal op (tree_mask nullptr) gives, on the same backend, for the
// same query on a cache holding those rows contiguously. That is what makes
// speculative decoding exact: once the daemon has copied the accepted
// path's rows into place, the tokens do not change by a bit compared with
// decoding them one at a time. first_pos plays no part in what a tree query
// sees (the caller writes the step's rows itself) but is checked as above.
// tree_mask is host memory for cpu::Attention and device memory for
// cuda::Attention (uploaded like Rope's positions). The CPU reads the masks
// and refuses a zero one; the CUDA host code cannot, so the CUDA kernels
// take any mask: they read only the rows it names, and a query that sees no
// row at all (tree_base 0 and mask 0) outputs zeros. Every row a mask may
// name lies below tree_base + kMaxTreeAttentionRows: caches that hold that
// many rows are never read out of bounds, whatever the masks.
//
// Preconditions (INVALID_ARGUMENT): pointers non-null; n_tokens, n_heads,
// n_kv_heads, head_dim > 0; n_kv_heads divides n_heads; first_pos >= 0 and
// first_pos + n_tokens fits in an int; scale finite. With tree_mask: causal
// (a tree is causal by nature), n_tokens <= kMaxTreeAttentionRows, tree_base >= 0 and tree_base +
// kMaxTreeAttentionRows fits in an int; on the CPU every tree_mask[t] is
// non-zero. The caches must hold first_pos + n_tokens rows, or with
// tree_mask every row the masks name (not checkable here).
// Aliasing: out may be q itself; no other overlap.
struct AttentionParams {
  int n_tokens = 0;
  int first_pos = 0;
  int n_heads = 0;
  int n_kv_heads = 0;   // divides n_heads
  int head_dim = 0;
  float scale = 0;      // usually 1 / sqrt(head_dim)
  const uint64_t* tree_mask = nullptr;  // (n_tokens) or nullptr: causal
  bool causal = true;   // false: every query sees rows 0..first_pos + n_tokens - 1
  int tree_base = 0;    // with tree_mask: the cache row of mask bit 0
  KvCacheTypes types{};  // the caches' encodings; rows of n_kv_heads * head_dim values
  // A causal step's first position read when the op runs, not when it is
  // called: *first_pos_at (backend memory) replaces first_pos, so one
  // recorded launch (a CUDA graph) serves every decode step. Its positions
  // must stay below max_ctx (the caches' capacity), which sizes the CUDA
  // launch (splits of max_ctx positions, those past a query's own doing
  // nothing); the CPU refuses a step past it. Not with tree_mask or
  // !causal.
  const int32_t* first_pos_at = nullptr;
  int max_ctx = 0;
};
namespace cpu {
absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& p, const Exec& exec);
}  // namespace cpu
// CUDA (kernels/cuda/attention.cu), flash-decoding: the positions a query
// sees are cut into splits of kAttentionSplit; one block per (token, split)
// and up to 4 query heads of one kv head (which share its key and value
// loads; one head a block for a decode step) scores them (q rounded to fp16
// as on the CPU, the dot in fp32)
// and takes their max and sum of exp; a query's splits are reduced to its
// max M and sum S (split order); a second pass over each split scores again
// and sums fp16(exp(score - M) / S) * V in fp32 (the weights rounded to fp16
// as on the CPU: on llama.cpp's quantized references this rounding decides
// near-ties) -- a split's positions in interleaved groups, each group's sum
// in position order, then the groups' in group order, a fixed order for the
// split's positions; the splits' sums are added in split order. A query of one
// split (a context up to kAttentionSplit) is done whole by its first pass,
// with the same expressions (M = m, S = l), so a round of such queries is
// one launch, else two. The splits depend only on the query's position, so a token gets the
// same bits alone or in a prefill batch; a non-causal query has those of
// position first_pos + n_tokens - 1. A tree query's splits cut its
// logical positions as a causal query's cut its positions (same splits,
// same order, same bits); since the host cannot read the masks, every tree
// query is given the splits of tree_base + kMaxTreeAttentionRows positions
// in the scratch and the grid, and the blocks past its real splits do
// nothing. Scratch: AttentionScratchBytes(p) (that bound in tree mode, the
// last position's splits for every query when non-causal); a
// smaller scratch that still holds one token's splits runs the tokens in
// several rounds, same bits. head_dim is at most kMaxCudaHeadDim (q sits in
// shared memory; INVALID_ARGUMENT beyond).
inline constexpr int kMaxCudaHeadDim = 256;
inline constexpr int kAttentionSplit = 256;
namespace cuda {
size_t AttentionScratchBytes(const AttentionParams& p);
// The scratch for p's tokens in rounds of at most `at_most` bytes of records,
// or of one token where its records alone are more: min(AttentionScratchBytes
// (p), max(at_most, the last token's records)); 0 where AttentionScratchBytes
// is. The records of every token grow with its context: a 512-token chunk
// at 120K positions of an 8B model (32 heads of 128) needs about 12 GB of
// them at once, one token 24 MB.
size_t AttentionScratchBytes(const AttentionParams& p, size_t at_most);
// The records the CUDA backend gives one Attention call at most (the first
// 512-token chunk of a Llama-3-8B prompt in one round, the fourth in three);
// longer contexts run in more rounds, with the same bits.
inline constexpr size_t kAttentionScratchBudget = size_t{64} << 20;
absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& p, const Exec& exec);
// A measuring aid (decode_step_bench --attention-heads) and a test's way to
// both layouts, not for the engine: how many query heads of a kv head one
// block serves from now on, 1 to 4, or 0 (the default) to let the launch
// choose (one for a decode step, up to 4 for more tokens). The bits are the
// same either way. False, and no change, outside 0..4. Not thread-safe: set
// it before any launch.
bool SetAttentionHeadsPerBlock(int heads);
}  // namespace cuda

// --- KvAppend (kernels/cpu/kv_append.cc) ---------------------------------------
// Stores n_tokens new rows of keys and values at cache rows first_pos ..
// first_pos + n_tokens - 1, encoded as types.k and types.v
// (kernels/kv_blocks.h: fp16 rounded to nearest, ties to even; or Q8_0,
// Q4_0, Q4_1 blocks):
//   k, v (n_tokens, kv_dim) fp32; k_cache, v_cache (>= first_pos + n_tokens,
//   kv_dim) in those types. Both backends give the same bytes, except that
//   a NaN is some fp16 NaN (the CPU keeps its sign, as F16C does; CUDA's
//   conversion gives its canonical NaN); a quantized block holding a NaN or
//   an infinity has unspecified bytes.
// first_pos_at non-null (backend memory): the rows start at *first_pos_at,
// read when the op runs (first_pos is not used), as AttentionParams'.
// Preconditions (INVALID_ARGUMENT): pointers non-null, n_tokens and kv_dim
// positive, first_pos >= 0, each type a cache type whose blocks divide
// kv_dim (KvRowCheck; the caches' size is not checkable here).
namespace cpu {
absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache, void* v_cache,
                      int first_pos, KvCacheTypes types, const int32_t* first_pos_at = nullptr);
}  // namespace cpu
namespace cuda {
absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache, void* v_cache,
                      int first_pos, KvCacheTypes types, StreamHandle stream, const int32_t* first_pos_at = nullptr);
}  // namespace cuda

// --- SiluMul (kernels/cpu/silu_mul.cc) -----------------------------------------
// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)), for n values,
// in float with expf, as ggml's scalar swiglu (its AVX2 path uses an
// approximate exp; Octo does not).
// Preconditions (INVALID_ARGUMENT): pointers non-null, n > 0.
// out may alias gate or up.
namespace cpu {
absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n);
}  // namespace cpu
// CUDA: the same formula with the device's expf (within 2 ulp).
namespace cuda {
absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n, StreamHandle stream);
}  // namespace cuda

// --- Gelu (kernels/cpu/gelu.cc) -------------------------------------------------
// out[i] = gelu(x[i]) for n values, the tanh approximation as llama.cpp's
// CPU backend computes it (its GELU looks x up, rounded to fp16, in a table
// of 2^16 fp16 results; computing the entry directly gives the same bits):
//   x <= -10: 0;  x >= 10: x;  otherwise, with h = fp16(x) (nearest even),
//   g = 0.5f * h * (1.0f + tanhf(sqrt(2 / pi) * h * (1.0f + 0.044715f * h * h)))
//   in float, left to right, and out = fp16(g) widened back.
// So the result is fp16-precise (2^-11 relative), as llama.cpp's; a NaN
// stays a NaN.
// Preconditions (INVALID_ARGUMENT): pointers non-null, n > 0. out may alias x.
namespace cpu {
absl::Status Gelu(const float* x, float* out, int64_t n);
}  // namespace cpu
// CUDA: the same formula with the device's tanhf (within 2 ulp): the same
// bits unless that moves g across an fp16 rounding midpoint, then one fp16
// ulp apart. (The executor calls the host's tanhf: always the same bits.)
namespace cuda {
absl::Status Gelu(const float* x, float* out, int64_t n, StreamHandle stream);
}  // namespace cuda

// --- Add, AddBias (kernels/cpu/add.cc) --------------------------------------------
// Add: out[i] = a[i] + b[i] for n values (the residual connections); out may
// alias a or b. AddBias: x[r][i] += bias[i] for every row r of x (n_rows,
// width) (qwen2's q/k/v biases). One float addition each: both backends give
// the same bits, except that a NaN result (inf + -inf) is some NaN: the CPU's
// is x86's negative default NaN, a GPU's its canonical positive one.
// Preconditions (INVALID_ARGUMENT): pointers non-null, n, n_rows, width > 0.
namespace cpu {
absl::Status Add(const float* a, const float* b, float* out, int64_t n);
absl::Status AddBias(float* x, const float* bias, int n_rows, int width);
}  // namespace cpu
namespace cuda {
absl::Status Add(const float* a, const float* b, float* out, int64_t n, StreamHandle stream);
absl::Status AddBias(float* x, const float* bias, int n_rows, int width, StreamHandle stream);
}  // namespace cuda

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
// CUDA: one block per row; the sum is a float tree, not a double, and expf is
// the device's; the same NaN rules.
namespace cuda {
absl::Status Softmax(float* x, int n_rows, int n, StreamHandle stream);
}  // namespace cuda

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
// CUDA: one block per token; the softmax as cuda::Softmax's, then k rounds
// of a block-wide arg-max with the same order (largest p, lower id first),
// the normalizing sum in float. Same ids as the CPU unless two experts'
// probabilities are within rounding of each other.
namespace cuda {
absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                         int32_t* expert_ids, float* weights, StreamHandle stream);
}  // namespace cuda

// --- TopLogits (kernels/cpu/top_logits.cc) ----------------------------------
// Each row of logits (n_rows, vocab) reduced to what greedy and top-k
// sampling and logprobs read, so only that leaves the device (the daemon's
// candidates path: daemon/sampling/logit_candidates.h). Row r's out[r]:
//   top[0 .. min(kTopLogits, vocab))  the row's best (id, logit), in the
//       sampler's total order: larger logit first, equal logits (-0 equals
//       +0, -inf equals -inf) by lower id; the logits as they are;
//   max_logit  the row's largest logit;
//   sum_exp    sum over the row of exp((double)logit - (double)max_logit);
//   n_finite   how many logits are not -inf;
//   bad_id     the lowest id whose logit is NaN or +inf, -1 when none, and
//   bad_logit  its logit. A row with one has top, max_logit and sum_exp
//              unspecified (the sampler refuses it by bad_id).
// A row of -inf only has max_logit -inf, sum_exp 0, top ids 0, 1, ...
// Both backends sum in kernels/sum_exp.h's order, as daemon/sampling/
// logprobs.cc's LogSumExp does, so max_logit + log(sum_exp) is that
// function's result bit for bit on the CPU.
// Preconditions (INVALID_ARGUMENT): pointers non-null, n_rows > 0,
// vocab > 0.
inline constexpr int kTopLogits = 64;
struct TopLogit {
  int32_t id;
  float logit;
};
struct TopLogitsRow {
  double sum_exp;
  float max_logit;
  int32_t n_finite;
  int32_t bad_id;
  float bad_logit;
  TopLogit top[kTopLogits];
};
static_assert(sizeof(TopLogitsRow) == 24 + 8 * kTopLogits, "TopLogitsRow has no padding: it is copied as bytes");
namespace cpu {
absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out);
}  // namespace cpu
// CUDA: one block per row. The top ids, logits, max_logit, n_finite and bad
// entries are the CPU's exactly; sum_exp too in the executor (the host's
// exp), within 1e-12 relative on a GPU (its double exp; sum_exp.h).
namespace cuda {
absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out, StreamHandle stream);
}  // namespace cuda

// --- MoeCombine (kernels/cpu/moe_combine.cc) ------------------------------------
// The last step of a mixture-of-experts FFN: each row's weighted sum of its
// k chosen experts' outputs, plus the shared expert's (qwen2moe) gated by
// sigmoid of its logit:
//   acc = 0; for j in 0..k-1: acc = acc + expert_out[r][j][i] * weights[r][j]
//   out[r][i] = acc + shared[r][i] * gate_r   (when shared; gate_r = 1 / (1 +
//               expf(-shared_gate_logits[r])), or 1 without logits)
// in float, in that order: both backends give the same bits except for the
// device's expf in the gate (within 2 ulp).
// Preconditions (INVALID_ARGUMENT): expert_out, weights, out non-null;
// n_rows, k, dim > 0. out must not overlap the inputs.
struct MoeCombineParams {
  const float* expert_out = nullptr;          // (n_rows, k, dim)
  const float* weights = nullptr;             // (n_rows, k)
  const float* shared = nullptr;              // (n_rows, dim) shared expert output, or null
  const float* shared_gate_logits = nullptr;  // (n_rows), or null: gate 1
  float* out = nullptr;                       // (n_rows, dim)
  int n_rows = 0;
  int k = 0;
  int dim = 0;
};
namespace cpu {
absl::Status MoeCombine(const MoeCombineParams& p);
}  // namespace cpu
namespace cuda {
absl::Status MoeCombine(const MoeCombineParams& p, StreamHandle stream);
}  // namespace cuda

// --- Gated DeltaNet and the gated attention output (kernels/cpu/delta_net.cc) --
// The token mixer of the hybrid Qwen models' DeltaNet layers, one sequence
// per call, and the output gate of their attention layers.
//
// DeltaNetConv: the causal depthwise conv1d with SiLU. Token t of channel c
// sees the window of `kernel` inputs ending at x[t][c]: the earlier ones
// from state_in (kernel - 1 rows, oldest first), then the call's tokens;
//   out[t][c] = silu(sum_j taps[c][j] * window[j]), j = 0 .. kernel - 1,
// summed in tap order in float. state_out gets the last kernel - 1 inputs,
// oldest first (state_out may be state_in). x, out: (n_tokens, channels);
// taps: (channels, kernel).
// Preconditions (INVALID_ARGUMENT): pointers non-null, n_tokens, channels
// positive, 2 <= kernel <= 16, out not overlapping x or the states.
struct DeltaNetConvParams {
  int n_tokens = 0;
  int channels = 0;
  int kernel = 0;
};
//
// GatedDeltaRule: the gated delta rule over the call's tokens in order. For
// token t and value head h, with key head kh = h % k_heads (qwen35), or
// h / (v_heads / k_heads) when grouped_heads (qwen3next):
//   q, k  = query and key head kh of qkv[t], each x / max(|x|, eps)
//   v     = value head h of qkv[t]
//   beta  = sigmoid(b),  g = softplus(a + dt_bias[h]) * decay[h]
//   S_h  *= exp(g);  delta = beta * (v - S_h^T k);  S_h += k delta^T
//   out[t][h] = S_h^T q / sqrt(head_dim)
// qkv row t (qkv_stride floats apart): the k_heads query heads, the k_heads
// key heads, then the v_heads value heads, head_dim each. b and a rows are
// ba_stride apart; head h's b and a are at h, or with grouped_ba (qwen3next's
// fused ssm_ba, grouped per key head) at (h / r) * 2r + h % r and r further,
// r = v_heads / k_heads. States: (v_heads, head_dim, head_dim), S[h][i][j]
// for key dim i, value dim j; state_out may be state_in. out: (n_tokens,
// v_heads * head_dim). Every sum runs in index order in float; softplus(x)
// is x above 20, else log1pf(expf(x)).
//
// The chunked form (chunk > 0), the same recurrence computed a chunk of L
// tokens at a time, as prefill wants: the tokens of every aligned chunk
// [m * chunk, (m + 1) * chunk) of positions (the call's first token is at
// first_position) that lies wholly inside the call take it; the tokens
// before the first and after the last such chunk take the step form above,
// so the bits depend on the positions and on which aligned chunks one call
// holds, never on anything else. Within a chunk, tokens t = 0 .. L - 1 with
// q, k, v, beta and g as above, S the state before the chunk:
//   G_t = g_0 + ... + g_t,  E_t = exp(G_t),  W_t = exp(G_{L-1} - G_t)
//   Akk[t][i] = exp(G_t - G_i) * (k_t . k_i) for i < t
//   Aqk[t][i] = exp(G_t - G_i) * (q_t . k_i) for i <= t
//   delta_t  = (v_t - (E_t S^T k_t + sum_{i<t} Akk[t][i] delta_i)) * beta_t
//   out[t]   = (E_t S^T q_t + sum_{i<=t} Aqk[t][i] delta_i) / sqrt(head_dim)
//   S        = E_{L-1} S + sum_t (W_t k_t) delta_t^T
// Every sum starts from its first term and runs in index order. It agrees
// with the step form to float rounding (tests/kernels/delta_net_test.cc).
// Preconditions (INVALID_ARGUMENT): pointers non-null, counts positive,
// v_heads a multiple of k_heads, head_dim <= 256, strides at least a row's
// width, eps >= 0 and finite, chunk 0 or 2 .. kMaxDeltaRuleChunk,
// first_position >= 0.
inline constexpr int kMaxDeltaRuleChunk = 32;
struct GatedDeltaRuleParams {
  int n_tokens = 0;
  int k_heads = 0;
  int v_heads = 0;
  int head_dim = 0;
  int64_t qkv_stride = 0;
  int64_t ba_stride = 0;
  bool grouped_heads = false;
  bool grouped_ba = false;
  float eps = 0;
  int chunk = 0;               // 0: the step form for every token
  int64_t first_position = 0;  // the position of the call's first token
};
// How a call's tokens split: [0, lead) step form, [lead, lead + whole) whole
// aligned chunks in the chunked form, the rest step form.
struct DeltaRuleSplit {
  int lead = 0;
  int whole = 0;
};
inline DeltaRuleSplit SplitDeltaRule(const GatedDeltaRuleParams& p) {
  if (p.chunk <= 0) return {.lead = p.n_tokens, .whole = 0};
  const int64_t into = p.first_position % p.chunk;
  const int lead = into == 0 ? 0 : static_cast<int>(p.chunk - into);
  if (lead >= p.n_tokens) return {.lead = p.n_tokens, .whole = 0};
  return {.lead = lead, .whole = (p.n_tokens - lead) / p.chunk * p.chunk};
}
//
// SplitGatedQuery: qg (n_tokens, n_heads, 2 * head_dim), each head's queries
// then its gate, into q and gate (n_tokens, n_heads * head_dim).
// SigmoidMul: x[i] *= sigmoid(gate[i]) = 1 / (1 + expf(-gate[i])), n values.
// Preconditions (INVALID_ARGUMENT): pointers non-null, counts positive; q and
// gate must not overlap qg.
// CUDA: the same formulas with the device's expf / log1pf (within a few ulp).
namespace cpu {
// The pool (if any) takes channels / value heads in parallel; each keeps
// its own order, so the bits do not depend on the threads.
absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                          const DeltaNetConvParams& p, const Exec& exec);
absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, const Exec& exec);
absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads, int head_dim);
absl::Status SigmoidMul(const float* gate, float* x, int64_t n);
}  // namespace cpu
namespace cuda {
absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                          const DeltaNetConvParams& p, StreamHandle stream);
absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, StreamHandle stream);
absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads, int head_dim,
                             StreamHandle stream);
absl::Status SigmoidMul(const float* gate, float* x, int64_t n, StreamHandle stream);
}  // namespace cuda

}  // namespace octo
