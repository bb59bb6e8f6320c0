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

#include "absl/status/status.h"

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

// --- RMSNorm -----------------------------------------------------------------
// For each row r of x (n_rows, dim), with weight (dim) and out (n_rows, dim):
//
//   scale     = 1 / sqrt(sum_i(x[r][i]^2) / dim + eps)
//   out[r][i] = x[r][i] * scale * weight[i]
//
// Precision: the sum of squares is accumulated in float, as llama2.c and
// llama.cpp's CUDA backend do (llama.cpp's CPU backend accumulates it in
// double). The CPU version sums in index order; the CUDA version sums in a
// block-wide tree, so the two agree to rounding, not bit for bit (the test
// states the tolerance). sqrt and the division are IEEE-rounded in both.
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

}  // namespace octo
