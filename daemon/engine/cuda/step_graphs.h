// StepGraphs: CudaBackend's CUDA graphs. A forward pass's launches are kept
// (not run) as the pass calls its ops, each with the bytes of the arguments
// that decide what it launches (its signature: op, pointers, sizes,
// parameters; never the data behind them). At the pass's end (the Download
// of its logits):
//   - a signature with an instantiated graph: that graph is launched, one
//     call for the whole pass, the kept launches dropped;
//   - the signature of the pass before (a second decode token of the same
//     batch shape): the kept launches run under stream capture, the graph is
//     instantiated, kept and launched;
//   - else they run as they are (a prefill, a first token).
// A decode step's arguments do not change from token to token -- its
// positions and ids are uploaded from the same pinned bytes, its attention
// reads its position on the device (AttentionParams::first_pos_at) -- so
// one graph serves every token until the batch shape or a cache's capacity
// changes (new pointers, a new signature, a capture).
//
// What breaks a pass's recording (it then runs as called, from that point):
// Flush, which CudaBackend calls before memory is allocated or freed (kept
// launches may read it), and when code outside the ops queues work on the
// compute stream (DeviceLayers' copies and timing events).
//
// Errors: a kept launch's error (its arguments checked when it runs)
// returns from the call that runs it -- Flush or EndPass -- named by its
// op.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <list>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace octo {

struct StepGraphsStats {
  uint64_t captures = 0;     // graphs captured and instantiated
  uint64_t replays = 0;      // passes run as one graph launch
  uint64_t eager_passes = 0; // passes whose launches ran as called
};

class StepGraphs {
 public:
  // At most this many instantiated graphs are kept (the least recently
  // launched goes first): one per batch shape in use.
  static constexpr size_t kMaxGraphs = 8;

  explicit StepGraphs(cudaStream_t stream) : stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Off: every launch runs as it is queued (no graphs).
  void set_enabled(bool enabled);
  bool enabled() const { return enabled_; }

  // The signature of the next launch, a value at a time (trivially copyable
  // scalars and pointers; structs field by field, by the caller).
  template <typename T>
  void Sign(const T& value) {
    static_assert(std::is_arithmetic_v<T> || std::is_pointer_v<T> || std::is_enum_v<T>);
    const char* bytes = reinterpret_cast<const char*>(&value);
    signature_.append(bytes, sizeof(T));
  }
  void Sign(const char* op) { signature_.append(op).push_back('\0'); }

  // Runs `launch` now, or keeps it for the pass's end while recording.
  absl::Status Queue(absl::AnyInvocable<absl::Status()> launch);
  // Runs what is kept, in order; the rest of the pass runs as called.
  absl::Status Flush();
  // The pass's launches are all queued: replay, capture or run them (above).
  absl::Status EndPass();

  // Read from any thread (status).
  StepGraphsStats stats() const {
    return {captures_.load(std::memory_order_relaxed), replays_.load(std::memory_order_relaxed),
            eager_passes_.load(std::memory_order_relaxed)};
  }

 private:
  struct Graph {
    std::string signature;
    cudaGraphExec_t exec = nullptr;
  };
  absl::Status RunKept();
  absl::Status Capture(cudaGraphExec_t* exec);

  const cudaStream_t stream_;
  bool enabled_ = true;
  bool recording_ = true;  // this pass's launches are kept so far
  std::string signature_;  // this pass's so far
  std::string last_signature_;
  std::vector<absl::AnyInvocable<absl::Status()>> kept_;
  std::list<Graph> graphs_;  // most recently launched first
  std::atomic<uint64_t> captures_{0}, replays_{0}, eager_passes_{0};
};

}  // namespace octo
