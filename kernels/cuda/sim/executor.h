// The one simulated GPU of the process. The CUDA runtime API it stands
// behind is global (cudaMalloc takes no context), so this is too: created at
// the first runtime call, never destroyed (stream and worker threads may
// still be parked at exit).
//
// Errors as a GPU has them: a kernel that fails (an executor error, __trap)
// makes cudaErrorLaunchFailure "sticky": every later operation is skipped
// and every call that waits returns it, with the failure's description in
// cudaGetErrorString, until cudaDeviceReset().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/base/thread_annotations.h"
#include "kernels/cuda/sim/config.h"
#include "kernels/cuda/sim/device_memory.h"
#include "kernels/cuda/sim/grid_runner.h"
#include "kernels/cuda/sim/stream.h"

namespace octo::cuda_sim {

// One operation a stream capture recorded (graph.cc): what Enqueue was given.
struct CapturedOp {
  std::string what;
  std::function<void()> op;
  bool always = false;
};

class Executor {
 public:
  static Executor& Get();

  Config config();
  absl::Status SetConfig(const Config& config);

  DeviceMemory& memory() { return memory_; }
  GridRunner& grids();  // created at the first launch

  // The stream a handle names: nullptr is the legacy default stream.
  CUstream_st* Resolve(cudaStream_t stream) { return stream != nullptr ? stream : legacy_.get(); }
  bool IsStream(cudaStream_t stream);
  cudaStream_t CreateStream(bool blocking);
  void DestroyStream(cudaStream_t stream);

  // Queues `op` on `stream`, after what the legacy stream's rules make it
  // wait for. Skipped, when its turn comes, if the device has a sticky error
  // (unless `always`: event records, so nothing waiting on one hangs).
  // Returns the op's ticket on Resolve(stream).
  uint64_t Enqueue(cudaStream_t stream, std::string what, std::function<void()> op, bool always = false);
  // Waits for everything queued on every stream so far.
  void SynchronizeAll();

  // Stream capture (graph.cc, README.md). While `stream` captures, Enqueue
  // records what it is given (returning ticket 0) instead of queueing it.
  // Begin: cudaErrorStreamCaptureUnsupported on the legacy stream,
  // cudaErrorIllegalState if it captures already. End: the recorded
  // operations; cudaErrorStreamCaptureInvalidated when a call the capture
  // cannot hold was made meanwhile (Invalidate), cudaErrorIllegalState if it
  // did not capture.
  cudaError_t BeginCapture(cudaStream_t stream);
  cudaError_t EndCapture(cudaStream_t stream, std::vector<CapturedOp>* ops);
  bool Capturing(cudaStream_t stream);
  void InvalidateCapture(cudaStream_t stream);

  // The sticky error (cudaSuccess if none) and its description.
  cudaError_t sticky_error();
  void Fail(cudaError_t error, const std::string& description);
  void ClearStickyError();
  // The text cudaGetErrorString gives for `error` (stable for the process).
  const char* ErrorString(cudaError_t error);
  // cudaGetErrorName's.
  static const char* ErrorName(cudaError_t error);

 private:
  Executor();
  void InstallFaultHandler();

  std::mutex mu_;
  Config config_ ABSL_GUARDED_BY(mu_);
  DeviceMemory memory_;
  std::unique_ptr<GridRunner> grids_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CUstream_st> legacy_;
  std::set<CUstream_st*> streams_ ABSL_GUARDED_BY(mu_);
  struct Capture {
    std::vector<CapturedOp> ops;
    bool invalidated = false;
  };
  std::map<CUstream_st*, Capture> captures_ ABSL_GUARDED_BY(mu_);
  int next_stream_ ABSL_GUARDED_BY(mu_) = 1;
  cudaError_t sticky_ ABSL_GUARDED_BY(mu_) = cudaSuccess;
  std::string sticky_description_ ABSL_GUARDED_BY(mu_);
};

}  // namespace octo::cuda_sim
