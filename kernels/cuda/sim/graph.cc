// CUDA graphs in the executor: stream capture records what Executor::Enqueue
// is given; a graph is those operations in order; an instantiated graph
// replays them onto a stream, each as it was captured (a kernel's arguments
// as packed at the capture, a copy's pointers read when it runs), as a GPU
// replays the graph's nodes. README.md lists what a capture may hold.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/sim/executor.h"

// The handles cudaGraph_t and cudaGraphExec_t name (declared by the
// runtime's headers at global scope, as CUstream_st).
struct CUgraph_st {
  std::vector<octo::cuda_sim::CapturedOp> ops;
};
struct CUgraphExec_st {
  std::vector<octo::cuda_sim::CapturedOp> ops;
};

namespace octo::cuda_sim {

cudaError_t Executor::BeginCapture(cudaStream_t stream) {
  CUstream_st* s = Resolve(stream);
  if (s == legacy_.get()) return cudaErrorStreamCaptureUnsupported;
  std::lock_guard<std::mutex> lock(mu_);
  if (captures_.count(s) != 0) return cudaErrorIllegalState;
  captures_[s] = Capture{};
  return cudaSuccess;
}

cudaError_t Executor::EndCapture(cudaStream_t stream, std::vector<CapturedOp>* ops) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = captures_.find(Resolve(stream));
  if (it == captures_.end()) return cudaErrorIllegalState;
  Capture capture = std::move(it->second);
  captures_.erase(it);
  if (capture.invalidated) return cudaErrorStreamCaptureInvalidated;
  *ops = std::move(capture.ops);
  return cudaSuccess;
}

bool Executor::Capturing(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return captures_.count(Resolve(stream)) != 0;
}

void Executor::InvalidateCapture(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = captures_.find(Resolve(stream)); it != captures_.end()) it->second.invalidated = true;
}

}  // namespace octo::cuda_sim

using octo::cuda_sim::Executor;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode) {
  Executor& ex = Executor::Get();
  if (!ex.IsStream(stream)) return cudaErrorInvalidResourceHandle;
  return ex.BeginCapture(stream);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  Executor& ex = Executor::Get();
  if (pGraph == nullptr) return cudaErrorInvalidValue;
  if (!ex.IsStream(stream)) return cudaErrorInvalidResourceHandle;
  *pGraph = nullptr;
  std::vector<octo::cuda_sim::CapturedOp> ops;
  if (const cudaError_t e = ex.EndCapture(stream, &ops); e != cudaSuccess) return e;
  *pGraph = new CUgraph_st{std::move(ops)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
  Executor& ex = Executor::Get();
  if (pCaptureStatus == nullptr) return cudaErrorInvalidValue;
  if (!ex.IsStream(stream)) return cudaErrorInvalidResourceHandle;
  *pCaptureStatus = ex.Capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  if (pGraphExec == nullptr || graph == nullptr || flags != 0) return cudaErrorInvalidValue;
  *pGraphExec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  Executor& ex = Executor::Get();
  if (graphExec == nullptr) return cudaErrorInvalidValue;
  if (!ex.IsStream(stream)) return cudaErrorInvalidResourceHandle;
  if (ex.sticky_error() != cudaSuccess) return ex.sticky_error();
  for (const octo::cuda_sim::CapturedOp& op : graphExec->ops) ex.Enqueue(stream, op.what, op.op, op.always);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  delete graphExec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
