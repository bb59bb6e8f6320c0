// matmul_cuda_bench: how close cuda::MatMul comes to the device: its decode
// path to the memory bandwidth, its prefill path to cuBLAS on fp16 weights.
// Not a test; run it by hand on a GPU:
//
//   matmul_cuda_bench [--rows R] [--cols C] [--iters N] [--row-lanes L]
//                     [--tokens N,N...] [--prefill-tile-elements E] [TYPE...]
//
// --row-lanes 32|64|128 sets the most lanes the decode kernels give one
// quantized row (matmul::SetDecodeMaxRowLanes; 32 is the engine's), to
// measure the trade between lanes per row and blocks per launch.
// --tokens picks the token counts (default 1,8); more than 64 take the
// prefill path (dequantized tiles and cuBLAS), whose figure is the TFLOP/s
// column: beside an F16 matrix of the same shape (cuBLAS alone, nothing
// dequantized) it is what the tiles cost. --prefill-tile-elements sets the
// most elements a prefill tile holds (matmul::SetPrefillTileElements; the
// engine's is kPrefillTileElements, 32 Mi).
//
// For each type (default: all 15) at each token count it times --iters calls
// (default 50) on a rows x cols matrix (default 8192 x 8192, larger than any
// GPU's L2, so every call streams the weights from device memory) with CUDA
// events, after one untimed call, and prints the weight bytes read per
// second next to the device's copy bandwidth measured in the same run
// (cudaMemcpyAsync device to device of a 1 GiB buffer: bytes read plus
// written per second, the usual "memory bandwidth" figure). The ratio is how
// near the decode path is to the memory bound.
//
// It runs in an OCTO_CUDA_SIM=ON build too (use small --rows/--cols): the
// figures then measure the host executor, not a GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

#define BENCH_CHECK(expr)                                                        \
  do {                                                                           \
    const absl::Status status_ = (expr);                                         \
    if (!status_.ok()) {                                                         \
      std::fprintf(stderr, "matmul_cuda_bench: %s\n", status_.ToString().c_str()); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (false)

#define BENCH_CUDA(expr)                                                                      \
  do {                                                                                        \
    const cudaError_t error_ = (expr);                                                        \
    if (error_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "matmul_cuda_bench: %s: %s\n", #expr, cudaGetErrorString(error_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (false)

// Milliseconds `run` takes on `stream`, timed by events, over `iters` runs.
template <typename F>
float TimeMs(cudaStream_t stream, int iters, F&& run) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) run();
  BENCH_CUDA(cudaEventRecord(stop, stream));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return ms;
}

// Device-to-device copy rate of a `bytes` buffer, counting read and write.
double CopyGBps(cudaStream_t stream, size_t bytes, int iters) {
  auto src = cuda::DeviceBuffer::Allocate(bytes);
  auto dst = cuda::DeviceBuffer::Allocate(bytes);
  BENCH_CHECK(src.status());
  BENCH_CHECK(dst.status());
  BENCH_CUDA(cudaMemsetAsync(src->data(), 1, bytes, stream));
  auto copy = [&] { BENCH_CUDA(cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, stream)); };
  copy();
  const float ms = TimeMs(stream, iters, copy);
  return 2.0 * static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9;
}

int Main(int argc, char** argv) {
  int64_t rows = 8192, cols = 8192;
  int iters = 50;
  std::vector<int> token_counts;
  std::vector<GgmlType> types;
  const char* usage =
      "usage: matmul_cuda_bench [--rows R] [--cols C] [--iters N] [--row-lanes L] [--tokens N,N...] "
      "[--prefill-tile-elements E] [TYPE...]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--row-lanes" && i + 1 < argc) {
      if (!cuda::matmul::SetDecodeMaxRowLanes(std::atoi(argv[++i]))) {
        std::fprintf(stderr, "matmul_cuda_bench: --row-lanes takes 32, 64 or 128\n");
        return 2;
      }
    } else if (arg == "--prefill-tile-elements" && i + 1 < argc) {
      if (!cuda::matmul::SetPrefillTileElements(std::atoll(argv[++i]))) {
        std::fprintf(stderr, "matmul_cuda_bench: --prefill-tile-elements must be positive\n");
        return 2;
      }
    } else if (arg == "--tokens" && i + 1 < argc) {
      for (const std::string& n : std::vector<std::string>(absl::StrSplit(argv[++i], ','))) {
        int v = 0;
        if (!absl::SimpleAtoi(n, &v) || v <= 0) {
          std::fprintf(stderr, "matmul_cuda_bench: --tokens takes positive counts, comma-separated: %s\n", argv[i]);
          return 2;
        }
        token_counts.push_back(v);
      }
    } else if ((arg == "--rows" || arg == "--cols" || arg == "--iters") && i + 1 < argc) {
      const long long v = std::atoll(argv[++i]);
      if (v <= 0) {
        std::fprintf(stderr, "matmul_cuda_bench: %s must be positive\n", arg.c_str());
        return 2;
      }
      if (arg == "--rows") rows = v;
      if (arg == "--cols") cols = v;
      if (arg == "--iters") iters = static_cast<int>(v);
    } else {
      auto type = LookupGgmlTypeByName(arg);
      if (!type.ok()) {
        std::fprintf(stderr, "matmul_cuda_bench: %s\n%s", type.status().ToString().c_str(), usage);
        return 2;
      }
      types.push_back(type->type);
    }
  }
  if (token_counts.empty()) token_counts = {1, 8};
  if (types.empty()) {
    for (const GgmlTypeInfo& info : AllGgmlTypes()) types.push_back(info.type);
  }
  if (cuda::CudaDeviceCount() == 0) {
    std::fprintf(stderr, "matmul_cuda_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  auto stream = cuda::CudaStream::Create();
  BENCH_CHECK(stream.status());
  auto blas = cuda::BlasContext::Create();
  BENCH_CHECK(blas.status());
  const size_t copy_bytes = std::min<size_t>(size_t{1} << 30, prop.totalGlobalMem / 8);
  const double copy_gbps = CopyGBps(stream->get(), copy_bytes, 10);
  std::printf("device: %s; weight prefetch %d bytes a row (OCTO_CUDA_PREFETCH)\n", prop.name, cuda::WeightPrefetchBytes());
  std::printf("copy bandwidth (device to device, %zu MiB, read + write): %.1f GB/s\n\n", copy_bytes >> 20, copy_gbps);
  std::printf("%-7s %6s %12s %10s %10s %12s %9s\n", "type", "tokens", "matrix MiB", "us/call", "GB/s", "of copy GB/s",
              "TFLOP/s");

  for (GgmlType type : types) {
    const GgmlTypeInfo& info = GgmlTypeInfoOf(type);
    if (cols % info.block_size != 0) {
      std::printf("%-7s skipped: --cols %lld is not a multiple of %u\n", std::string(info.name).c_str(),
                  static_cast<long long>(cols), info.block_size);
      continue;
    }
    const std::vector<uint8_t> bytes = testing::RandomWeights(type, rows, cols, 1);
    auto d_w = cuda::DeviceBuffer::Allocate(bytes.size());
    BENCH_CHECK(d_w.status());
    BENCH_CHECK(d_w->CopyFromHost(bytes.data(), bytes.size(), stream->get()));
    const WeightMatrix w{type, d_w->data(), rows, cols};
    for (int n_tokens : token_counts) {
      const std::vector<float> x = testing::RandomActivations(n_tokens * cols, 2);
      auto d_x = cuda::DeviceBuffer::Allocate(x.size() * sizeof(float));
      auto d_out = cuda::DeviceBuffer::Allocate(static_cast<size_t>(n_tokens * rows) * sizeof(float));
      auto scratch = cuda::DeviceBuffer::Allocate(cuda::MatMulScratchBytes(w, n_tokens));
      BENCH_CHECK(d_x.status());
      BENCH_CHECK(d_out.status());
      BENCH_CHECK(scratch.status());
      BENCH_CHECK(d_x->CopyFromHost(x.data(), d_x->size(), stream->get()));
      const cuda::Exec exec{stream->get(), scratch->data(), scratch->size(), blas->get()};
      auto call = [&] { BENCH_CHECK(cuda::MatMul(w, d_x->as<float>(), d_out->as<float>(), n_tokens, exec)); };
      call();
      const float ms = TimeMs(stream->get(), iters, call);
      const double gbps = static_cast<double>(bytes.size()) * iters / (ms * 1e-3) / 1e9;
      const double tflops = 2.0 * static_cast<double>(rows) * cols * n_tokens * iters / (ms * 1e-3) / 1e12;
      std::printf("%-7s %6d %12.1f %10.1f %10.1f %11.0f%% %9.1f\n", std::string(info.name).c_str(), n_tokens,
                  bytes.size() / 1048576.0, ms * 1e3 / iters, gbps, 100.0 * gbps / copy_gbps, tflops);
    }
  }
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) { return octo::Main(argc, argv); }
