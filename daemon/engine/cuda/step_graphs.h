// StepGraphs: CudaBackend's CUDA graphs. A forward pass's launches (between
// Backend::BeginPass and the pass's Download) are kept (not run) as the
// pass calls its ops, each with the bytes of the arguments
// that decide what it launches (its signature: op, pointers, sizes,
// parameters; never the data behind them). A stretch of kept launches ends
// at the pass's Download, or earlier where something else must reach the
// compute stream in order (Flush: DeviceLayers' event waits and copies
// around a streamed layer, an allocation, a scratch growth). At its end:
//   - a signature with an instantiated graph: that graph is launched, one
//     call for the stretch, the kept launches dropped;
//   - a signature seen once before, recently: the kept launches run under
//     stream capture, the graph is instantiated, kept and launched;
//   - else they run as they are (a prefill, a first token).
// A decode step's arguments do not change from token to token -- its
// positions and ids are uploaded from the same pinned bytes, its attention
// reads its position on the device (AttentionParams::first_pos_at) -- so
// one graph serves every token until the batch shape or a cache's capacity
// changes (new pointers, a new signature, a capture).
//
// Streamed layers: the graphs cover the stretches between them (each
// streamed layer's own launches are a stretch too), not the copies. A
// layer's bytes reach its staging buffer when the loader has read them into
// the host ring -- a host-side event a graph cannot wait on -- and the copy
// is queued then, on the copy stream, behind it the compute stream's wait
// for it: work that must be issued at run time anyway. A stretch of a
// streamed pass costs its launches' host time once per token, next to a
// layer copy thousands of times longer; the resident stretches (pinned
// first and last layers, the VRAM tier) are where graphs pay.
//
// Errors: a kept launch's error (its arguments checked when it runs)
// returns from the call that runs it -- Flush -- named by its
// op.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace octo {

struct StepGraphsStats {
  uint64_t captures = 0;        // graphs captured and instantiated
  uint64_t replays = 0;         // stretches run as one graph launch
  uint64_t eager_stretches = 0; // stretches whose launches ran as called
};

class StepGraphs {
 public:
  // At most this many instantiated graphs are kept (the least recently
  // launched goes first): a resident model's decode step per batch shape
  // in use, or a streamed model's stretches (its staging buffers rotate, so
  // a layer's launches repeat every few passes); and this many signatures
  // seen once, the candidates for a capture.
  static constexpr size_t kMaxGraphs = 256;
  static constexpr size_t kMaxSeen = 256;

  explicit StepGraphs(cudaStream_t stream) : stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Off: every launch runs as it is queued (no graphs).
  void set_enabled(bool enabled);
  bool enabled() const { return enabled_; }

  // The signature of the next launch, a value at a time (trivially copyable
  // scalars and pointers; structs field by field, by the caller). Nothing
  // when the launch will run as queued (no signature needed).
  template <typename T>
  void Sign(const T& value) {
    static_assert(std::is_arithmetic_v<T> || std::is_pointer_v<T> || std::is_enum_v<T>);
    if (!keeping()) return;
    const char* bytes = reinterpret_cast<const char*>(&value);
    signature_.append(bytes, sizeof(T));
  }
  void Sign(const char* op) {
    if (keeping()) signature_.append(op).push_back('\0');
  }

  // Between BeginPass and EndPass launches are kept (while enabled and not
  // paused); outside, each runs as it is queued (ops called between passes:
  // a cache's rows moved, a checkpoint copied -- their memory may be freed
  // before any later pass).
  void BeginPass() { in_pass_ = true; }
  // Runs `launch` now, or keeps it for the stretch's end.
  absl::Status Queue(absl::AnyInvocable<absl::Status()> launch);
  // Ends the stretch: what is kept is replayed, captured or run (above),
  // queued on the stream either way.
  absl::Status Flush();
  // Flush, then every launch runs as it is queued until EndPass: for a pass
  // that allocates (its caller may free memory the launches after it read,
  // a cache growing: allocate, copy, free the old).
  absl::Status Pause();
  // Flush, and the pass is over (launches run as queued until BeginPass).
  absl::Status EndPass();

  // Read from any thread (status).
  StepGraphsStats stats() const {
    return {captures_.load(std::memory_order_relaxed), replays_.load(std::memory_order_relaxed),
            eager_stretches_.load(std::memory_order_relaxed)};
  }

 private:
  bool keeping() const { return enabled_ && in_pass_ && !paused_; }
  struct Graph {
    std::string signature;
    cudaGraphExec_t exec = nullptr;
  };
  absl::Status RunKept();
  absl::Status Capture(cudaGraphExec_t* exec);

  const cudaStream_t stream_;
  bool enabled_ = true;
  bool paused_ = false;
  bool in_pass_ = false;
  std::string signature_;  // the stretch's so far
  std::vector<absl::AnyInvocable<absl::Status()>> kept_;
  std::list<Graph> graphs_;        // most recently launched first
  std::deque<std::string> seen_;   // signatures run once, oldest first
  std::atomic<uint64_t> captures_{0}, replays_{0}, eager_stretches_{0};
};

}  // namespace octo
