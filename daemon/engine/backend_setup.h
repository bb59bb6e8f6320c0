// Choosing a backend and putting a model's weights where it computes.
//
// CreateBackend: "cpu", "cuda" (device `gpu`; FAILED_PRECONDITION naming
// why when there is none, or when this build has no CUDA), or "auto" (CUDA
// when a GPU is usable, else the CPU; in a build for the host executor,
// always the CPU: the executor runs only when asked for by name).
//
// BackendWeights: what the forward pass reads on that backend. On the CPU,
// the host's own views (resident layers and the layer source as they are).
// On CUDA: lm_head, the final norm and the rope factors copied to the
// device, and the layers through DeviceLayers (daemon/engine/cuda): the
// VRAM tier plus staging buffers fed from the host source. The token
// embedding stays on the host either way (forward.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/backend.h"
#include "daemon/engine/layer_source.h"
#include "daemon/engine/layer_weights.h"
#include "daemon/engine/residency_plan.h"
#include "storage/manifest.h"

namespace octo {

struct BackendChoice {
  std::string kind = "auto";  // auto | cuda | cpu
  int gpu = 0;
  int n_threads = 0;          // CPU backend
  bool allow_simd = true;     // CPU backend
  bool cuda_graphs = true;    // CUDA backend: repeated passes as CUDA graphs (step_graphs.h)
};

// INVALID_ARGUMENT for an unknown kind.
absl::StatusOr<std::shared_ptr<Backend>> CreateBackend(const BackendChoice& choice);

// Whether this build has the CUDA backend, and how many devices it sees.
bool BuiltWithCuda();
bool BuiltForExecutor();  // OCTO_CUDA_SIM: "cuda" is the host executor
int UsableCudaDevices();

// The device's memory now (cudaMemGetInfo); zeros without a device.
struct DeviceMemory {
  uint64_t free_bytes = 0, total_bytes = 0;
};
DeviceMemory QueryDeviceMemory();

// Device memory a pass's activations and op scratch take, generously, for a
// pass of up to max_rows token rows: what an auto VRAM budget leaves aside.
uint64_t WorkspaceEstimate(const ModelConfig& config, int max_rows = 512);

// Staging buffers by default: two copies queued ahead of the layer being
// computed, so one late copy (a disk read, a busy link) does not stall the
// pass; fewer when the budget holds fewer (PlanLayers' rule 3).
inline constexpr uint32_t kDefaultStagingBuffers = 3;

// The VRAM tier's plan: layers kept on the device (pinned first and last,
// then outermost first) and staging buffers for the rest, within
// vram_budget (layers + staging). Pure arithmetic over PlanLayers.
struct VramPlanSettings {
  uint64_t budget_bytes = 0;
  uint32_t staging_buffers = kDefaultStagingBuffers;
  uint32_t pin_first = 1, pin_last = 1;
};
absl::StatusOr<LayerPlan> PlanVram(const std::vector<uint64_t>& layer_bytes, const VramPlanSettings& settings);

// Per-layer device timing: one use of a layer in this many is timed with
// events (BackendWeights::SetTimingEvery; device_layers.h).
inline constexpr uint32_t kLayerTimingEvery = 16;

// What the device holds and how it is doing (CUDA only).
struct DeviceTierStats {
  uint64_t held_bytes = 0, peak_bytes = 0, global_bytes = 0;
  uint64_t budget_bytes = 0;  // filled by the owner of the plan
  uint32_t vram_layers = 0, staging_buffers = 0;
  uint64_t staging_bytes = 0, copied_bytes = 0;
  uint64_t timed_copied_bytes = 0;  // the copies timed (one use of a layer in timing_every)
  double copy_seconds = 0, wait_seconds = 0;  // over the timed uses
  uint32_t timing_every = 1;
  // [k]: acquires of a layer not in VRAM that found k later copies queued
  // (the prefetch achieved; device_layers.h).
  std::vector<uint64_t> acquires_by_copies_ahead;
  uint64_t unpinned_bytes = 0;  // host layer memory cudaHostRegister refused: copied as pageable
  std::string pin_error;        // its error, "" when everything is pinned
  uint64_t graph_captures = 0, graph_replays = 0, eager_stretches = 0;  // CudaBackend's StepGraphs
  bool programmatic_launches = false;  // kernels/cuda/device.h
  uint32_t weight_prefetch_bytes = 0;  // the same: WeightPrefetchBytes
  uint64_t free_bytes = 0, total_bytes = 0;  // cudaMemGetInfo
  std::vector<bool> in_vram;                 // by layer
  // Per layer: copies and passes (every use), the timed ones, and the
  // copy/wait/compute seconds summed over the timed ones.
  std::vector<uint64_t> copies, passes, timed_copies, timed_passes;
  std::vector<double> copy_seconds_by_layer, wait_seconds_by_layer, compute_seconds_by_layer;
};

class BackendWeights {
 public:
  virtual ~BackendWeights() = default;
  // host_* must outlive the result. vram: the device plan (ignored on CPU).
  static absl::StatusOr<std::unique_ptr<BackendWeights>> Create(Backend& backend, const Manifest& manifest,
                                                                const std::string& model_dir,
                                                                const GlobalWeights& host_globals,
                                                                LayerSource& host_layers,
                                                                LayerBytesSource& host_bytes, const LayerPlan& vram);

  virtual const GlobalWeights& globals() const = 0;
  virtual LayerSource& layers() = 0;
  // CUDA: drain before the host source re-plans, then Apply the new VRAM
  // plan. The CPU: nothing to do.
  virtual absl::Status Drain() = 0;
  virtual absl::Status Apply(const LayerPlan& vram) = 0;
  // Empty (present false) on the CPU.
  virtual bool on_device() const = 0;
  virtual DeviceTierStats DeviceStats() = 0;
  // CUDA: time one use of each layer in `n` (1: every use; the device's
  // default kLayerTimingEvery). The CPU: nothing.
  virtual void SetTimingEvery(uint32_t n) { (void)n; }
};

}  // namespace octo
