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
// Threading: Acquire/Release/SetOrder from one thread at a time (the
// forward pass); stats() from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace octo {

struct LayerStreamOptions {
  std::string loader_path;   // the octo-loader executable
  std::string model_dir;     // a layer directory (manifest.json + files)
  uint32_t slots = 2;        // ring slots, >= 1 (2 = double buffering)
  uint64_t slot_bytes = 0;   // >= the largest streamed layer file
  bool direct_io = true;     // O_DIRECT reads; false reads through the page cache
  uint32_t queue_depth = 8;  // reads in flight per layer file
};

// One streamed layer, in a ring slot, valid until Release.
struct StreamedLayer {
  const uint8_t* data = nullptr;  // the whole file, header page included
  uint64_t size = 0;
  double load_seconds = 0;        // the loader's read + checksum time for it
  double wait_seconds = 0;        // how long Acquire blocked for it
};

struct LoaderStats {
  bool running = false;
  int pid = 0;
  uint32_t restarts = 0;
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
  // UNAVAILABLE when the loader cannot start.
  static absl::StatusOr<std::unique_ptr<LayerStream>> Start(const LayerStreamOptions& options);

  // The streamed layers in pass order; drops whatever is loaded or in
  // flight and starts filling slots from order[0]. Empty: nothing streamed.
  virtual void SetOrder(std::vector<uint32_t> order) = 0;

  // Blocks until `layer` is in a slot. If it is not the next layer of the
  // order, the cycle restarts at `layer` (after a failed pass, say).
  virtual absl::StatusOr<StreamedLayer> Acquire(uint32_t layer) = 0;
  // The forward pass is done with `layer`'s slot; it is refilled.
  virtual void Release(uint32_t layer) = 0;

  virtual LoaderStats stats() const = 0;
};

}  // namespace octo
