// cuda::MatMul's decode path (kernels/ops.h): a few tokens against a weight
// matrix read once, each weight decoded from its block as it is read.
// Quantized weights meet 8-bit activations (kernels/cuda/act_q8.h) in integer
// dot products (kernels/cuda/q8_dot.cuh); F32/F16/BF16 weights meet fp32 x.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/block_decode.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/cuda/q8_dot.cuh"

namespace octo::cuda::matmul {
namespace {

constexpr int kWarpsPerBlock = 4;  // one weight row per warp
constexpr int kQuantizeWarps = 8;  // one 32-element chunk per warp

// What a decode kernel reads and writes. Dense: n_tokens rows of x share w.
// Experts: choice i (of n_tokens * k) reads row i (x_per_choice) or i / k of
// x and expert expert_ids[i]'s matrix, w + id * expert_bytes.
struct DecodeArgs {
  const uint8_t* w;
  int64_t rows;       // output rows (of one expert)
  int64_t row_bytes;
  int64_t cols;
  const float* x;     // (n_x, cols): the float path
  const int8_t* xq;   // (n_x, cols): the 8-bit path
  const float* xd;    // (n_x, cols / 32)
  float* out;         // (n_tokens or n_choices, rows)
  int n_tokens;
  const int32_t* expert_ids;  // null: dense
  int64_t expert_bytes;
  int n_experts, k, n_choices;
  bool x_per_choice;
};

// --- Kernels -----------------------------------------------------------------

// One warp per 32-element chunk of x (n_tokens * cols / 32 chunks in all).
__global__ void QuantizeKernel(const float* x, int8_t* xq, float* xd, int64_t n_chunks) {
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kQuantizeWarps + threadIdx.x / kWarpSize;
  if (chunk >= n_chunks) return;  // the whole warp
  const int lane = threadIdx.x % kWarpSize;
  const float v = x[chunk * kQ8Chunk + lane];
  float amax = fabsf(v);
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  const float d = amax / 127.0f;
  xq[chunk * kQ8Chunk + lane] = ActQ8Quant(v, d);
  if (lane == 0) xd[chunk] = d;
}

// Adds this lane's share of row `w_row` · x for n_tokens tokens to acc: the
// chunks lane, lane + 32, ... in order, so each token's sum has the same
// order whatever n_tokens is.
template <typename W>
__device__ __forceinline__ void Q8RowDots(const uint8_t* w_row, const int8_t* xq, const float* xd, int64_t cols,
                                          int n_tokens, float* acc) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n_chunks = cols / kQ8Chunk;
  for (int64_t c = lane; c < n_chunks; c += kWarpSize) {
    const q8::Chunk chunk = W::Unpack(w_row + c / W::kChunks * W::kBytes, static_cast<int>(c % W::kChunks));
#pragma unroll
    for (int t = 0; t < kMaxDecodeTokens; ++t) {
      if (t >= n_tokens) break;
      const int4* x4 = reinterpret_cast<const int4*>(xq + t * cols + c * kQ8Chunk);
      const int4 a = x4[0], b = x4[1];
      const int words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      acc[t] += q8::Dot<W>(chunk, words, xd[t * n_chunks + c]);
    }
  }
}

template <typename D>
__device__ __forceinline__ void FloatRowDots(const uint8_t* w_row, const float* x, int64_t cols, int n_tokens,
                                             float* acc) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t e = lane; e < cols; e += kWarpSize) {
    const float v = D::Element(w_row + e * D::kBytes, 0);
#pragma unroll
    for (int t = 0; t < kMaxDecodeTokens; ++t) {
      if (t >= n_tokens) break;
      acc[t] += v * x[t * cols + e];
    }
  }
}

// Sums acc over the warp and lane 0 stores token t's row `row`.
__device__ __forceinline__ void StoreRow(float* acc, float* out, int64_t out_stride, int64_t row, int n_tokens) {
#pragma unroll
  for (int t = 0; t < kMaxDecodeTokens; ++t) {
    if (t >= n_tokens) break;  // n_tokens is the same for the whole warp
    const float sum = WarpReduceSum(acc[t]);
    if (threadIdx.x % kWarpSize == 0) out[t * out_stride + row] = sum;
  }
}

// Dense: grid.x * kWarpsPerBlock >= rows; every token of the call.
// Experts: grid.y strides over the choices, one token each.
template <typename W>
__global__ void DecodeQ8Kernel(DecodeArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= a.rows) return;  // the whole warp
  float acc[kMaxDecodeTokens] = {};
  if (a.expert_ids == nullptr) {
    Q8RowDots<W>(a.w + row * a.row_bytes, a.xq, a.xd, a.cols, a.n_tokens, acc);
    StoreRow(acc, a.out, a.rows, row, a.n_tokens);
    return;
  }
  for (int i = blockIdx.y; i < a.n_choices; i += gridDim.y) {
    const int x_row = a.x_per_choice ? i : i / a.k;
    const int32_t e = a.expert_ids[i];
    acc[0] = e >= 0 && e < a.n_experts ? 0.0f : __int_as_float(0x7fc00000);  // NaN for an id out of range
    const int32_t safe = e >= 0 && e < a.n_experts ? e : 0;
    Q8RowDots<W>(a.w + safe * a.expert_bytes + row * a.row_bytes, a.xq + x_row * a.cols,
                 a.xd + x_row * (a.cols / kQ8Chunk), a.cols, 1, acc);
    StoreRow(acc, a.out + static_cast<int64_t>(i) * a.rows, a.rows, row, 1);
  }
}

template <typename D>
__global__ void DecodeFloatKernel(DecodeArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= a.rows) return;
  float acc[kMaxDecodeTokens] = {};
  if (a.expert_ids == nullptr) {
    FloatRowDots<D>(a.w + row * a.row_bytes, a.x, a.cols, a.n_tokens, acc);
    StoreRow(acc, a.out, a.rows, row, a.n_tokens);
    return;
  }
  for (int i = blockIdx.y; i < a.n_choices; i += gridDim.y) {
    const int x_row = a.x_per_choice ? i : i / a.k;
    const int32_t e = a.expert_ids[i];
    acc[0] = e >= 0 && e < a.n_experts ? 0.0f : __int_as_float(0x7fc00000);
    const int32_t safe = e >= 0 && e < a.n_experts ? e : 0;
    FloatRowDots<D>(a.w + safe * a.expert_bytes + row * a.row_bytes, a.x + x_row * a.cols, a.cols, 1, acc);
    StoreRow(acc, a.out + static_cast<int64_t>(i) * a.rows, a.rows, row, 1);
  }
}

bool IsFloat(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

// --- Launchers ---------------------------------------------------------------

// Quantizes n_x rows of x into the scratch (act_q8.h's layout).
absl::Status Quantize(const float* x, int64_t n_x, int64_t cols, const Exec& exec, int8_t** xq, float** xd) {
  *xq = static_cast<int8_t*>(exec.scratch);
  *xd = reinterpret_cast<float*>(static_cast<unsigned char*>(exec.scratch) + ActQ8QuantBytes(n_x, cols));
  const int64_t n_chunks = n_x * (cols / kQ8Chunk);
  const unsigned grid = static_cast<unsigned>((n_chunks + kQuantizeWarps - 1) / kQuantizeWarps);
  OCTO_LAUNCH(QuantizeKernel, grid, kQuantizeWarps * kWarpSize, 0, exec.stream, x, *xq, *xd, n_chunks);
  OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// Launches the decode kernel for w's type over `a` (grid.y choices).
absl::Status Launch(GgmlType type, const DecodeArgs& a, unsigned grid_y, StreamHandle stream) {
  const dim3 grid(static_cast<unsigned>((a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock), grid_y);
  const absl::Status unknown = absl::InternalError("MatMul: no decode kernel for this type");
  if (IsFloat(type)) {
    return block_decode::WithDecoder(type, unknown, [&](auto decoder) {
      OCTO_LAUNCH(DecodeFloatKernel<decltype(decoder)>, grid, kWarpsPerBlock * kWarpSize, 0, stream, a);
      OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  }
  return q8::WithQ8Weights(type, unknown, [&](auto weights) {
    OCTO_LAUNCH(DecodeQ8Kernel<decltype(weights)>, grid, kWarpsPerBlock * kWarpSize, 0, stream, a);
    OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace

size_t DecodeScratchBytes(GgmlType type, int64_t cols, int64_t n_x) {
  return IsFloat(type) ? 0 : ActQ8Bytes(n_x, cols);
}

absl::Status Decode(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                    const Exec& exec) {
  DecodeArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.rows = w.rows;
  a.row_bytes = row_bytes;
  a.cols = w.cols;
  a.x = x;
  a.out = out;
  a.n_tokens = n_tokens;
  if (!IsFloat(w.type)) {
    int8_t* xq = nullptr;
    float* xd = nullptr;
    absl::Status quantized = Quantize(x, n_tokens, w.cols, exec, &xq, &xd);
    if (!quantized.ok()) return quantized;
    a.xq = xq;
    a.xd = xd;
  }
  return Launch(w.type, a, 1, exec.stream);
}

absl::Status DecodeExperts(const WeightMatrix& w, int64_t rows, int64_t row_bytes, int64_t expert_bytes,
                           const int32_t* expert_ids, const float* x, float* out, const MatMulExpertsParams& p,
                           const Exec& exec) {
  DecodeArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.rows = rows;
  a.row_bytes = row_bytes;
  a.cols = w.cols;
  a.x = x;
  a.out = out;
  a.n_tokens = 1;
  a.expert_ids = expert_ids;
  a.expert_bytes = expert_bytes;
  a.n_experts = p.n_experts;
  a.k = p.k;
  a.n_choices = p.n_tokens * p.k;
  a.x_per_choice = p.x_per_choice;
  if (!IsFloat(w.type)) {
    int8_t* xq = nullptr;
    float* xd = nullptr;
    absl::Status quantized = Quantize(x, p.x_per_choice ? a.n_choices : p.n_tokens, w.cols, exec, &xq, &xd);
    if (!quantized.ok()) return quantized;
    a.xq = xq;
    a.xd = xd;
  }
  constexpr int kMaxGridY = 65535;
  return Launch(w.type, a, static_cast<unsigned>(a.n_choices < kMaxGridY ? a.n_choices : kMaxGridY), exec.stream);
}

}  // namespace octo::cuda::matmul
