// LayerStream: octod's side of the loader -- streamed layers arrive through
// the shared-memory staging ring, filled by the octo-loader child process.
//
// The stream knows the cyclic order in which the forward pass uses the
// streamed layers (e.g. 2, 3, ..., 29, then 2 again for the next pass) and
// keeps every free ring slot filled with the next layers of that order, so
// layer i+1 (and further, with more slots) is read while layer i computes.
//
// Failure: a layer whose checksum fails is DATA_LOSS for the Acquire that
// needed it (the slot is freed, the next Acquire of it reads it again). If
// the loader process dies, the stream restarts it and requests again what
// was in flight; Acquire just waits longer. After kMaxLoaderRestarts within
// kLoaderRestartWindow it gives up with UNAVAILABLE.
//
// A loader that is alive but makes no progress (SIGSTOPped, a stalled disk
// or NFS mount) is treated as dead: when requests are outstanding and no
// completion has come for the stall timeout, it is killed, restarted and
// the requests re-issued, so the tokens are those of an undisturbed run.
// The wait that sees kMaxLoaderStalls stalls in a row fails UNAVAILABLE,
// naming the file and the seconds waited (the next wait starts afresh).
// A raised StopSignal (octod shutting down) ends every wait: CANCELLED.
//
// Threading: Acquire/Release/SetOrder from one thread at a time (the
// forward pass); stats() from any thread.
//
// Implementation notes (daemon/loader/layer_stream.cc, protocol in
// storage/RING.md): no thread of its own. The caller's Acquire/Release do
// the bookkeeping -- request free slots, read completions, restart a dead
// loader -- so while the forward pass computes, only the loader works.
//
// Changes to the first draft of this contract: slot_bytes is rounded up to
// a multiple of 4096 (O_DIRECT); the restart limit is per stream
// (max_restarts, restart_window, defaulting to the constants below);
// loader_args are appended to the loader's command line (tests use them to
// inject faults into a test build of the loader).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace octo {

// A dead loader is restarted at most this often within the window; then
// Acquire fails with UNAVAILABLE for good.
inline constexpr uint32_t kMaxLoaderRestarts = 5;
inline constexpr absl::Duration kLoaderRestartWindow = absl::Seconds(60);
// The default stall timeout: the largest request (a slot) read at this
// floor rate, plus the margin (a loaded machine, a cold disk spinning up).
inline constexpr double kLoaderFloorBytesPerSecond = 50e6;
inline constexpr absl::Duration kLoaderStallMargin = absl::Seconds(10);
// Stalls one wait survives before it fails UNAVAILABLE.
inline constexpr uint32_t kMaxLoaderStalls = 3;

class StopSignal;

struct LayerStreamOptions {
  std::string loader_path;   // the octo-loader executable
  std::string model_dir;     // a layer directory (manifest.json + files)
  uint32_t slots = 2;        // ring slots, >= 1 (2 = double buffering)
  uint64_t slot_bytes = 0;   // >= the largest streamed layer file
  bool direct_io = true;     // O_DIRECT reads; false reads through the page cache
  uint32_t queue_depth = 8;  // reads in flight per layer file
  uint32_t max_restarts = kMaxLoaderRestarts;           // loader restarts allowed ...
  absl::Duration restart_window = kLoaderRestartWindow;  // ... within this long
  std::vector<std::string> loader_args;  // appended to the loader's command line
  // How long outstanding requests may go without a completion before the
  // loader counts as hung; zero: slot_bytes at kLoaderFloorBytesPerSecond
  // plus kLoaderStallMargin.
  absl::Duration stall_timeout = absl::ZeroDuration();
  std::shared_ptr<StopSignal> stop;  // raised when octod stops; may be null
};

// One streamed layer, in a ring slot, valid until Release. The slot is an
// image of the layer file: a two-phase layer holds its dense part, and each
// expert block at its file offset once fetched. The holder may write expert
// blocks it has itself (its expert cache) into their places.
struct StreamedLayer {
  uint8_t* data = nullptr;        // the whole file (or its parts), header page included
  uint64_t size = 0;
  double load_seconds = 0;        // the loader's read + checksum time for it
  double wait_seconds = 0;        // how long Acquire blocked for it
};

struct LoaderStats {
  bool running = false;
  int pid = 0;
  uint32_t restarts = 0;           // every restart: after a death or a stall
  uint32_t stalls = 0;             // loaders killed for making no progress
  uint64_t bytes_read = 0;
  double read_seconds = 0;        // summed time the loader spent reading
  uint32_t checksum_failures = 0;
  std::string io_mode;            // e.g. "io_uring+direct"
};

class LayerStream {
 public:
  virtual ~LayerStream() = default;

  // Creates the ring (owner-only shared memory), spawns octo-loader and
  // waits until it is attached. INVALID_ARGUMENT for bad options,
  // UNAVAILABLE when the loader cannot start, RESOURCE_EXHAUSTED when the
  // shared memory cannot be had. Also removes rings left behind by octod
  // processes that no longer exist (Ring::RemoveOrphans).
  static absl::StatusOr<std::unique_ptr<LayerStream>> Start(const LayerStreamOptions& options);

  // The streamed layers in pass order; drops whatever is loaded or in
  // flight and starts filling slots from order[0]. Empty: nothing streamed.
  virtual void SetOrder(std::vector<uint32_t> order) = 0;

  // Blocks until `layer` is in a slot. If it is not the next layer of the
  // order, the cycle restarts at `layer` (after a failed pass, say); slots
  // already holding the layers after it are kept. Errors: the loader's, for
  // this layer (DATA_LOSS checksum, NOT_FOUND missing file, INVALID_ARGUMENT
  // layer not in the model or larger than a slot); INVALID_ARGUMENT when
  // `layer` is not in the order; FAILED_PRECONDITION with no order or when
  // every slot is held (Release first); UNAVAILABLE when the loader keeps dying.
  virtual absl::StatusOr<StreamedLayer> Acquire(uint32_t layer) = 0;
  // The forward pass is done with `layer`'s slot; it is refilled. A layer
  // not held is ignored.
  virtual void Release(uint32_t layer) = 0;

  // Format-2 MoE layers read in two phases (by layer; empty = none): their
  // slots are filled with the dense part only, and FetchExperts adds expert
  // blocks. Takes effect at the next SetOrder.
  virtual void SetTwoPhase(std::vector<bool> by_layer) = 0;

  // For a held two-phase layer: asks the loader for the blocks of `experts`
  // that its slot neither holds nor has asked for. With wait, returns once
  // all of them are in: errors as Acquire's, the expert named (DATA_LOSS
  // "layer_003.bin: expert 5 of layer 3: checksum mismatch"); without, returns
  // at once (a prefetch; its failure surfaces at the fetch that waits for
  // that expert). A layer that is not two-phase holds every expert already.
  virtual absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool wait) = 0;
  // The caller wrote these experts' blocks into the held slot of `layer`.
  virtual void MarkExpertsPresent(uint32_t layer, const std::vector<uint32_t>& experts) = 0;

  virtual LoaderStats stats() const = 0;

  // The slots' memory (one block), for a GPU backend to pin with
  // cudaHostRegister; {nullptr, 0} when the stream has no shared ring.
  virtual std::pair<const void*, size_t> slot_memory() const { return {nullptr, 0}; }
};

}  // namespace octo
