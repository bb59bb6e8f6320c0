// What the CUDA code asks of the CUDA runtime, counted: kernel launches,
// host API calls, blocking waits, pageable copies, allocations, bytes each
// way. The same counts come from a GPU build and from the host executor
// (kernels/cuda/sim), so efficiency is measurable in CI without a GPU.
//
// How: OCTO_LAUNCH counts each launch (common.cuh); every other call goes
// through the linker's --wrap (kernels/CMakeLists.txt lists the calls): a
// call to cudaMemcpyAsync anywhere in a program that links
// octo_kernels_cuda lands in api_counts.cc, which counts it and calls the
// runtime's own. Nothing at a call site changes, and a new call of a listed
// function is counted without anyone remembering to.
//
// The counts are process-wide and only grow; take a snapshot before and
// after what you measure and subtract (a forward pass, a decode token).
// Calls the CUDA libraries make internally (cuBLAS calling cudart) are not
// seen: these are the calls Octo's code makes.
#pragma once

#include <cstdint>

namespace octo::cuda {

struct ApiCounts {
  uint64_t launches = 0;        // kernels launched
  uint64_t host_calls = 0;      // runtime and cuBLAS calls, launches included
  uint64_t blocking_waits = 0;  // stream, event and device syncs; cudaMemcpy, cudaMemset
  uint64_t pageable_copies = 0;  // copies to or from host memory neither pinned nor registered
  uint64_t pageable_bytes = 0;
  uint64_t allocations = 0;  // cudaMalloc, cudaMallocHost, cudaHostRegister
  uint64_t frees = 0;        // cudaFree, cudaFreeHost, cudaHostUnregister
  uint64_t h2d_bytes = 0;    // host to device, pinned or not
  uint64_t d2h_bytes = 0;
  uint64_t graph_launches = 0;  // cudaGraphLaunch
  uint64_t graph_captures = 0;  // cudaStreamBeginCapture

  ApiCounts operator-(const ApiCounts& earlier) const;
};

// The counts so far in this process.
ApiCounts CurrentApiCounts();

// OCTO_LAUNCH's: one kernel launch (a host call too).
void CountLaunch();

}  // namespace octo::cuda
