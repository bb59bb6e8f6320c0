// The cuBLAS calls Octo's prefill path makes, computed on the host by the
// executor, on the handle's stream, with the signatures of cublas_v2.h.
//
// cublasGemmEx: column-major C = alpha * op(A) * op(B) + beta * C for
// A and B both CUDA_R_16F, both CUDA_R_16BF or both CUDA_R_32F, C CUDA_R_32F,
// compute CUBLAS_COMPUTE_32F (each product in float, summed in float in k
// order; cuBLAS's own order differs, within the tolerance a float sum
// allows). alpha and beta are host floats (the default pointer mode). Any
// other combination is CUBLAS_STATUS_NOT_SUPPORTED.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include <cublas_v2.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/sim/executor.h"
#include "kernels/half.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace octo::cuda_sim {
namespace {

// Element `i` of a matrix of `type`, as float.
float Load(const void* data, cudaDataType type, int64_t i) {
  switch (type) {
    case CUDA_R_16F: return Fp16ToFp32(static_cast<const uint16_t*>(data)[i]);
    case CUDA_R_16BF: return Bf16ToFp32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

size_t ElementBytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

// op(M) as a dense row-major float copy: rows x cols, element (r, c) read
// from column-major storage with leading dimension ld, transposed or not.
std::vector<float> Dense(const void* m, cudaDataType type, int ld, bool transposed, int rows, int cols) {
  std::vector<float> out(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int64_t i = transposed ? r * static_cast<int64_t>(ld) + c : c * static_cast<int64_t>(ld) + r;
      out[static_cast<size_t>(r) * cols + c] = Load(m, type, i);
    }
  }
  return out;
}

// Whether the column-major rows x cols matrix at p with leading dimension ld
// lies in device memory.
bool OnDevice(const void* p, cudaDataType type, int ld, int rows, int cols) {
  if (rows == 0 || cols == 0) return true;
  const size_t bytes = (static_cast<size_t>(ld) * (cols - 1) + rows) * ElementBytes(type);
  return Executor::Get().memory().IsDeviceRange(p, bytes);
}

}  // namespace
}  // namespace octo::cuda_sim

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  octo::cuda_sim::Executor::Get().SynchronizeAll();  // its queued work still reads the handle
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  using namespace octo::cuda_sim;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if ((transa != CUBLAS_OP_N && !ta) || (transb != CUBLAS_OP_N && !tb)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool types_ok = Atype == Btype && (Atype == CUDA_R_16F || Atype == CUDA_R_16BF || Atype == CUDA_R_32F) &&
                        Ctype == CUDA_R_32F &&
                        (computeType == CUBLAS_COMPUTE_32F || computeType == CUBLAS_COMPUTE_32F_PEDANTIC);
  if (!types_ok) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // op(A) is m x k: stored k x m when transposed.
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (!OnDevice(A, Atype, lda, a_rows, a_cols) || !OnDevice(B, Btype, ldb, b_rows, b_cols) ||
      !OnDevice(C, Ctype, ldc, m, n)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  Executor& ex = Executor::Get();
  std::string what = absl::StrFormat("cublasGemmEx (%d x %d x %d) on %s", m, n, k, ex.Resolve(handle->stream)->name());
  ex.Enqueue(handle->stream, std::move(what), [=] {
    // op(A) row i and op(B)^T row j are both k long: each C(i, j) is one dot.
    const std::vector<float> op_a = Dense(A, Atype, lda, ta, m, k);   // (m, k)
    const std::vector<float> op_bt = Dense(B, Btype, ldb, !tb, n, k);  // (n, k)
    auto* c = static_cast<float*>(C);
    auto columns = [&](int j0, int j1) {
      for (int j = j0; j < j1; ++j) {
        for (int i = 0; i < m; ++i) {
          const float* ar = &op_a[static_cast<size_t>(i) * k];
          const float* br = &op_bt[static_cast<size_t>(j) * k];
          float sum = 0.0f;
          for (int l = 0; l < k; ++l) sum += ar[l] * br[l];
          float& out = c[i + static_cast<int64_t>(j) * ldc];
          out = b == 0.0f ? a * sum : a * sum + b * out;  // beta 0: C is not read
        }
      }
    };
    const int n_threads = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; ++t) threads.emplace_back(columns, n * t / n_threads, n * (t + 1) / n_threads);
    columns(0, n / n_threads);
    for (std::thread& t : threads) t.join();
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
