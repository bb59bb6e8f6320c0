// ProgrammaticLaunches (device.h): whether OCTO_LAUNCH may launch kernels as
// programmatic dependent launches on this device, decided once, with a
// probe of the launches it would make; and WeightPrefetchBytes, what a
// decode MatMul asks L2 for before its start.
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device.h"

namespace octo::cuda {
namespace {

#if !defined(OCTO_CUDA_SIM)
// Adds 1 to *count, after the operation before it.
__global__ void ProbeKernel(int* count) {
  GridStart();
  if (threadIdx.x == 0) *count += 1;
}

cudaError_t LaunchProbe(int* count, cudaStream_t stream) {
  return LaunchProgrammatic(ProbeKernel, dim3(1), dim3(32), 0, stream, count);
}

// Two programmatic launches after a memset, eager, then two captured in a
// graph and replayed: the count must come to 4 (each kernel adds to what
// the operation before it wrote). "" when it does, else what failed.
const char* Probe() {
  cudaStream_t stream = nullptr;
  int* count = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  const char* failed = nullptr;
  int host_count = 0;
  auto step = [&](cudaError_t error, const char* what) {
    if (failed == nullptr && error != cudaSuccess) failed = what;
    return failed == nullptr;
  };
  if (step(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "a stream") &&
      step(cudaMalloc(&count, sizeof(int)), "memory") && step(cudaMemsetAsync(count, 0, sizeof(int), stream), "memset")) {
    if (step(LaunchProbe(count, stream), "a programmatic launch") &&
        step(LaunchProbe(count, stream), "a programmatic launch") &&
        step(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "a capture")) {
      const bool launched = step(LaunchProbe(count, stream), "a captured programmatic launch") &&
                            step(LaunchProbe(count, stream), "a captured programmatic launch");
      const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
      if (launched && step(ended, "ending the capture") &&
          step(cudaGraphInstantiate(&exec, graph, 0), "instantiating the graph") &&
          step(cudaGraphLaunch(exec, stream), "launching the graph") &&
          step(cudaMemcpyAsync(&host_count, count, sizeof(int), cudaMemcpyDeviceToHost, stream), "a copy") &&
          step(cudaStreamSynchronize(stream), "the kernels") && host_count != 4) {
        failed = "the count (the kernels ran out of order)";
      }
    }
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (count != nullptr) cudaFree(count);
  if (stream != nullptr) cudaStreamDestroy(stream);
  (void)cudaGetLastError();  // not a later launch's failure
  return failed == nullptr ? "" : failed;
}

bool Decide() {
  const char* setting = std::getenv("OCTO_CUDA_PDL");
  if (setting != nullptr && std::string_view(setting) == "0") return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major < 9) return false;
  if (const std::string_view failed = Probe(); !failed.empty()) {
    std::fprintf(stderr, "octo: programmatic dependent launch is off: its probe failed at %s\n", failed.data());
    return false;
  }
  return true;
}
#endif

// OCTO_CUDA_PREFETCH's bytes, or the default (and a line on stderr) when it
// is set to anything but a number of bytes in range.
int PrefetchBytesFromEnvironment() {
  const char* setting = std::getenv("OCTO_CUDA_PREFETCH");
  if (setting == nullptr) return kDefaultWeightPrefetchBytes;
  const absl::StatusOr<int> bytes = ParseWeightPrefetchBytes(setting);
  if (!bytes.ok()) {
    std::fprintf(stderr, "octo: %s; prefetching %d\n", std::string(bytes.status().message()).c_str(),
                 kDefaultWeightPrefetchBytes);
    return kDefaultWeightPrefetchBytes;
  }
  return *bytes;
}

std::atomic<int> set_prefetch_bytes{-1};  // SetWeightPrefetchBytes's, or -1: the environment's
}  // namespace

absl::StatusOr<int> ParseWeightPrefetchBytes(std::string_view text) {
  int bytes = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || bytes < 0 ||
      bytes > kMaxWeightPrefetchBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "OCTO_CUDA_PREFETCH=%s is not a number of bytes from 0 to %d", std::string(text), kMaxWeightPrefetchBytes));
  }
  return bytes;
}

int WeightPrefetchBytes() {
  static const int from_environment = PrefetchBytesFromEnvironment();
  const int set = set_prefetch_bytes.load(std::memory_order_relaxed);
  return set >= 0 ? set : from_environment;
}

bool SetWeightPrefetchBytes(int bytes) {
  if (bytes < 0 || bytes > kMaxWeightPrefetchBytes) return false;
  set_prefetch_bytes.store(bytes, std::memory_order_relaxed);
  return true;
}

bool ProgrammaticLaunches() {
#if defined(OCTO_CUDA_SIM)
  return false;
#else
  static const bool on = Decide();
  return on;
#endif
}

}  // namespace octo::cuda
