// cuda::MatMul's prefill path (kernels/ops.h): many tokens through
// cublasGemmEx with fp32 accumulation. Quantized weights are dequantized to
// fp16 a tile of PrefillTileRows rows at a time into the scratch (after x,
// rounded to fp16); F16 and BF16 weights are used as they are with x rounded
// to their type, F32 weights with x as it is.
//
// cuBLAS is column-major: w (rows, cols) row-major is w^T column-major and x
// (n_tokens, cols) row-major is x^T, so out^T (rows, n_tokens) = op_T(w^T) x^T,
// i.e. GemmEx(T, N, m = rows, n = n_tokens, k = cols), leading dimensions
// cols, cols and rows.
#include <cstdint>

#include <cublas_v2.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/block_decode.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul_paths.h"

namespace octo::cuda::matmul {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1024;  // grid-stride beyond

int64_t tile_elements = kPrefillTileElements;  // SetPrefillTileElements

// --- Kernels -----------------------------------------------------------------

// out[i] = T(x[i]), rounded to nearest even.
template <typename T>
__global__ void ConvertKernel(const float* x, T* out, int64_t n) {
  GridStart();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = FromFloat<T>(x[i]);
  }
}

// A dequantizing thread's span: 8 consecutive elements of one block, stored
// as one 16-byte write of fp16 (every quantized type's blocks hold a
// multiple of 8; the tile starts 256-byte aligned and cols is a multiple of
// the block).
constexpr int kTileSpan = 8;
constexpr unsigned kMaxTileGridRows = 65535;  // gridDim.y's limit

// tile (n_rows, cols) fp16 = rows of w from `w_rows` on, decoded: rows over
// blockIdx.y, a row's spans over blockIdx.x and the threads (no division
// by cols: it was a 64-bit division per element).
template <typename D>
__global__ void DequantizeTileKernel(const uint8_t* w_rows, int64_t row_bytes, int64_t cols, int64_t n_rows,
                                     __half* tile) {
  GridStart();
  static_assert(D::kElements % kTileSpan == 0, "a span lies in one block");
  const int64_t spans = cols / kTileSpan;
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
    for (int64_t span = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; span < spans;
         span += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t c = span * kTileSpan;
      const uint8_t* block = w_rows + r * row_bytes + c / D::kElements * D::kBytes;
      const int first = static_cast<int>(c % D::kElements);
      uint32_t words[kTileSpan / 2];
#pragma unroll
      for (int e = 0; e < kTileSpan; e += 2) {
        const uint32_t lo = __half_as_ushort(FromFloat<__half>(D::Element(block, first + e)));
        const uint32_t hi = __half_as_ushort(FromFloat<__half>(D::Element(block, first + e + 1)));
        words[e / 2] = lo | hi << 16;  // little-endian: element e first
      }
      uint4 stored;
      stored.x = words[0];
      stored.y = words[1];
      stored.z = words[2];
      stored.w = words[3];
      *reinterpret_cast<uint4*>(tile + r * cols + c) = stored;
    }
  }
}

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// --- Launchers ---------------------------------------------------------------

absl::Status BlasError(cublasStatus_t status, const char* what) {
  return absl::InternalError(absl::StrFormat("MatMul: %s failed: cuBLAS status %d", what, static_cast<int>(status)));
}

// One GemmEx: out rows [0, m) of ldc-strided out^T = A^T (k, m) x B (k, n).
absl::Status Gemm(const Exec& exec, int m, int n, int k, const void* a, cudaDataType a_type, const void* b,
                  cudaDataType b_type, float* out, int ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasGemmEx(exec.blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, a_type, k, b, b_type, k, &beta, out,
                   CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) return BlasError(status, "cublasGemmEx");
  return absl::OkStatus();
}

template <typename T>
absl::Status Convert(const float* x, T* out, int64_t n, StreamHandle stream) {
  OCTO_LAUNCH(ConvertKernel<T>, GridFor(n), kThreads, 0, stream, x, out, n);
  return absl::OkStatus();
}

// out (n_tokens, w.rows) = x16 · w^T, w dequantized into `tile` a tile of
// PrefillTileRows rows at a time, each tile one GEMM; the stream orders each
// tile's GEMM before the next tile overwrites it.
template <typename D>
absl::Status TileByTile(const WeightMatrix& w, int64_t row_bytes, const __half* x16, __half* tile, float* out,
                        int n_tokens, const Exec& exec) {
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const int64_t max_tile_rows = PrefillTileRows(w.rows, w.cols);
  for (int64_t first = 0; first < w.rows; first += max_tile_rows) {
    const int64_t tile_rows = w.rows - first < max_tile_rows ? w.rows - first : max_tile_rows;
    const dim3 grid(GridFor(w.cols / kTileSpan),
                    static_cast<unsigned>(tile_rows < kMaxTileGridRows ? tile_rows : kMaxTileGridRows));
    OCTO_LAUNCH(DequantizeTileKernel<D>, grid, kThreads, 0, exec.stream, bytes + first * row_bytes, row_bytes, w.cols,
                tile_rows, tile);
    if (absl::Status s = Gemm(exec, static_cast<int>(tile_rows), n_tokens, static_cast<int>(w.cols), tile, CUDA_R_16F,
                              x16, CUDA_R_16F, out + first, static_cast<int>(w.rows));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t PrefillTileRows(int64_t rows, int64_t cols) {
  const int64_t quanta = tile_elements / cols / kPrefillTileQuantum;
  const int64_t tile_rows = (quanta > 1 ? quanta : 1) * kPrefillTileQuantum;
  return tile_rows < rows ? tile_rows : rows;
}

bool SetPrefillTileElements(int64_t elements) {
  if (elements <= 0) return false;
  tile_elements = elements;
  return true;
}

size_t PrefillScratchBytes(GgmlType type, int64_t rows, int64_t cols, int n_tokens) {
  if (type == GgmlType::kF32) return 0;
  const size_t x16 = RoundUp256(static_cast<size_t>(n_tokens) * cols * 2);
  if (IsFloatWeight(type)) return x16;
  return x16 + RoundUp256(static_cast<size_t>(PrefillTileRows(rows, cols) * cols) * 2);
}

absl::Status Prefill(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                     const Exec& exec) {
  if (const cublasStatus_t status = cublasSetStream(exec.blas, exec.stream); status != CUBLAS_STATUS_SUCCESS) {
    return BlasError(status, "cublasSetStream");
  }
  const int m = static_cast<int>(w.rows), n = n_tokens, k = static_cast<int>(w.cols);
  if (w.type == GgmlType::kF32) {
    return Gemm(exec, m, n, k, w.data, CUDA_R_32F, x, CUDA_R_32F, out, m);
  }
  const int64_t n_x = static_cast<int64_t>(n_tokens) * w.cols;
  if (w.type == GgmlType::kBF16) {
    auto* x16 = static_cast<__nv_bfloat16*>(exec.scratch);
    if (absl::Status s = Convert(x, x16, n_x, exec.stream); !s.ok()) return s;
    return Gemm(exec, m, n, k, w.data, CUDA_R_16BF, x16, CUDA_R_16BF, out, m);
  }
  auto* x16 = static_cast<__half*>(exec.scratch);
  if (absl::Status s = Convert(x, x16, n_x, exec.stream); !s.ok()) return s;
  if (w.type == GgmlType::kF16) return Gemm(exec, m, n, k, w.data, CUDA_R_16F, x16, CUDA_R_16F, out, m);

  // Quantized: dequantized behind x in the scratch, a tile at a time.
  auto* tile = reinterpret_cast<__half*>(static_cast<unsigned char*>(exec.scratch) + RoundUp256(n_x * 2));
  return block_decode::WithDecoder(w.type, absl::InternalError("MatMul: no decoder"), [&](auto decoder) {
    using D = decltype(decoder);
    if constexpr (D::kElements % kTileSpan != 0) {  // F32, F16, BF16: returned above
      return absl::InternalError("MatMul: a float type has no tiles");
    } else {
      return TileByTile<D>(w, row_bytes, x16, tile, out, n_tokens, exec);
    }
  });
}

}  // namespace octo::cuda::matmul
