#include "daemon/engine/cuda/device_weights.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/engine/cuda/device_layers.h"
#include "kernels/cuda/device.h"
#include "storage/ggml_type.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

class DeviceWeights : public BackendWeights {
 public:
  explicit DeviceWeights(CudaBackend& backend) : backend_(backend) {}

  // A device copy of `bytes` host bytes.
  absl::StatusOr<const void*> Put(const void* host, uint64_t bytes, const char* what) {
    absl::StatusOr<BackendBuffer> b = backend_.Allocate(bytes);
    if (!b.ok()) return Annotate(b.status(), what);
    OCTO_RETURN_IF_ERROR(backend_.Upload(b->data(), host, bytes));
    global_bytes_ += bytes;
    buffers_.push_back(std::move(*b));
    return buffers_.back().data();
  }

  absl::Status Init(const Manifest& manifest, const std::string& dir, const GlobalWeights& host,
                    LayerBytesSource& host_bytes, const LayerPlan& vram) {
    const ModelConfig& c = manifest.config;
    globals_.token_embd = host.token_embd;  // an encoder sums its input rows on the host
    globals_.lm_head = host.lm_head;
    if (!IsEncoderArchitecture(c.architecture)) {  // an encoder has no logits
      auto bytes = [](const WeightMatrix& w) { return w.rows * RowBytes(w.type, w.cols); };
      OCTO_ASSIGN_OR_RETURN(globals_.lm_head.data, Put(host.lm_head.data, bytes(host.lm_head), "lm_head"));
      // The embedding lookup runs on the device: tied embeddings share
      // lm_head's copy.
      if (host.token_embd.data == host.lm_head.data) {
        globals_.token_embd.data = globals_.lm_head.data;
      } else {
        OCTO_ASSIGN_OR_RETURN(globals_.token_embd.data, Put(host.token_embd.data, bytes(host.token_embd), "token_embd"));
      }
    }
    globals_.position_embd = host.position_embd;  // these stay on the host too
    globals_.token_types = host.token_types;
    // Vectors of dim floats (null when the model has none).
    const std::pair<const float* GlobalWeights::*, const char*> norms[] = {
        {&GlobalWeights::final_norm, "the final norm"},
        {&GlobalWeights::embd_norm, "the input norm"},
        {&GlobalWeights::embd_norm_b, "the input norm's bias"}};
    for (const auto& [field, what] : norms) {
      if (host.*field == nullptr) continue;
      OCTO_ASSIGN_OR_RETURN(const void* v, Put(host.*field, sizeof(float) * c.dim, what));
      globals_.*field = static_cast<const float*>(v);
    }
    if (host.rope_freqs != nullptr) {
      OCTO_ASSIGN_OR_RETURN(const void* freqs, Put(host.rope_freqs, sizeof(float) * (c.rope_dim / 2), "rope factors"));
      globals_.rope_freqs = static_cast<const float*>(freqs);
    }
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamSynchronize(backend_.stream()), "uploading the model's tensors"));
    OCTO_ASSIGN_OR_RETURN(layers_, DeviceLayers::Create(backend_, manifest, dir, host_bytes, ToDevicePlan(vram)));
    return absl::OkStatus();
  }

  const GlobalWeights& globals() const override { return globals_; }
  LayerSource& layers() override { return *layers_; }
  absl::Status Drain() override { return layers_->Drain(); }
  absl::Status Apply(const LayerPlan& vram) override { return layers_->Apply(ToDevicePlan(vram)); }
  bool on_device() const override { return true; }

  void SetTimingEvery(uint32_t n) override { layers_->SetTimingEvery(n); }
  DeviceTierStats DeviceStats() override {
    const DeviceLayersStats s = layers_->Stats();
    DeviceTierStats out;
    out.held_bytes = s.held_bytes;
    out.peak_bytes = s.peak_bytes;
    out.global_bytes = global_bytes_;
    out.vram_layers = s.vram_layers;
    out.staging_buffers = s.staging_buffers;
    out.staging_bytes = s.staging_bytes;
    out.copied_bytes = s.copied_bytes;
    out.timed_copied_bytes = s.timed_copied_bytes;
    out.copy_seconds = s.copy_seconds;
    out.wait_seconds = s.wait_seconds;
    out.timing_every = s.timing_every;
    out.acquires_by_copies_ahead = s.acquires_by_copies_ahead;
    out.unpinned_bytes = s.unpinned_bytes;
    out.pin_error = s.pin_error;
    const StepGraphsStats graphs = backend_.graph_stats();
    out.graph_captures = graphs.captures;
    out.graph_replays = graphs.replays;
    out.eager_stretches = graphs.eager_stretches;
    out.programmatic_launches = cuda::ProgrammaticLaunches();
    out.weight_prefetch_bytes = static_cast<uint32_t>(cuda::WeightPrefetchBytes());
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      out.free_bytes = free;
      out.total_bytes = total;
    }
    out.in_vram = plan_in_vram_;
    for (const DeviceLayerTiming& t : layers_->LayerTimings()) {
      out.copies.push_back(t.copies);
      out.passes.push_back(t.passes);
      out.timed_copies.push_back(t.timed_copies);
      out.timed_passes.push_back(t.timed_passes);
      out.copy_seconds_by_layer.push_back(t.copy_seconds);
      out.wait_seconds_by_layer.push_back(t.wait_seconds);
      out.compute_seconds_by_layer.push_back(t.compute_seconds);
    }
    return out;
  }

 private:
  DeviceLayersPlan ToDevicePlan(const LayerPlan& vram) {
    plan_in_vram_ = vram.resident;
    return DeviceLayersPlan{.in_vram = vram.resident, .staging_buffers = std::max<uint32_t>(vram.ring_slots, 1)};
  }

  CudaBackend& backend_;
  std::vector<BackendBuffer> buffers_;
  uint64_t global_bytes_ = 0;
  GlobalWeights globals_;
  std::unique_ptr<DeviceLayers> layers_;
  std::vector<bool> plan_in_vram_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BackendWeights>> CreateDeviceWeights(CudaBackend& backend, const Manifest& manifest,
                                                                    const std::string& model_dir,
                                                                    const GlobalWeights& host_globals,
                                                                    LayerBytesSource& host_bytes,
                                                                    const LayerPlan& vram) {
  auto w = std::make_unique<DeviceWeights>(backend);
  OCTO_RETURN_IF_ERROR(w->Init(manifest, model_dir, host_globals, host_bytes, vram));
  return w;
}

}  // namespace octo
