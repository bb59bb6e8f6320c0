#include "daemon/engine/backend_setup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/engine/cpu_backend.h"
#include "kernels/ops.h"
#include "storage/status_macros.h"

#if defined(OCTO_HAVE_CUDA)
#include "daemon/engine/cuda/cuda_backend.h"
#include <cuda_runtime_api.h>

#include "daemon/engine/cuda/device_weights.h"
#include "kernels/cuda/device.h"
#endif

namespace octo {
namespace {

// The CPU reads the host's weights as they are.
class HostWeights : public BackendWeights {
 public:
  HostWeights(const GlobalWeights& globals, LayerSource& layers) : globals_(globals), layers_(layers) {}
  const GlobalWeights& globals() const override { return globals_; }
  LayerSource& layers() override { return layers_; }
  absl::Status Drain() override { return absl::OkStatus(); }
  absl::Status Apply(const LayerPlan&) override { return absl::OkStatus(); }
  bool on_device() const override { return false; }
  DeviceTierStats DeviceStats() override { return {}; }

 private:
  const GlobalWeights& globals_;
  LayerSource& layers_;
};

}  // namespace

bool BuiltWithCuda() {
#if defined(OCTO_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

bool BuiltForExecutor() {
#if defined(OCTO_CUDA_SIM)
  return true;
#else
  return false;
#endif
}

int UsableCudaDevices() {
#if defined(OCTO_HAVE_CUDA)
  return cuda::CudaDeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::shared_ptr<Backend>> CreateBackend(const BackendChoice& choice) {
  if (choice.kind != "auto" && choice.kind != "cuda" && choice.kind != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend \"", choice.kind, "\" is not one of auto, cuda, cpu"));
  }
  // The host executor is a test device, not a GPU: "auto" never picks it
  // (a build for the executor runs the CPU unless told "cuda").
  const bool executor = BuiltForExecutor();
  const bool cuda = choice.kind == "cuda" || (choice.kind == "auto" && !executor && UsableCudaDevices() > 0);
  if (!cuda) return std::make_shared<CpuBackend>(choice.n_threads, choice.allow_simd);
#if defined(OCTO_HAVE_CUDA)
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<CudaBackend> backend, CudaBackend::Create(choice.gpu));
  backend->set_graphs(choice.cuda_graphs);
  return std::shared_ptr<Backend>(std::move(backend));
#else
  return absl::FailedPreconditionError("backend cuda: this build has no CUDA backend (built without nvcc)");
#endif
}

DeviceMemory QueryDeviceMemory() {
  DeviceMemory m;
#if defined(OCTO_HAVE_CUDA)
  size_t free = 0, total = 0;
  if (UsableCudaDevices() > 0 && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    m.free_bytes = free;
    m.total_bytes = total;
  }
#endif
  return m;
}

uint64_t WorkspaceEstimate(const ModelConfig& c, int max_rows) {
  const uint64_t rows = static_cast<uint64_t>(max_rows);
  const uint64_t q_dim = uint64_t{c.n_heads} * c.head_dim;
  const uint64_t kv_dim = uint64_t{c.n_kv_heads} * c.head_dim;
  const uint64_t ffn = std::max<uint64_t>(c.hidden_dim, uint64_t{c.n_experts_used} * c.expert_hidden_dim);
  const uint64_t widest = std::max({uint64_t{c.dim}, q_dim, ffn});
  // RunState: x, xb, x_out, q, att, k, v, hb, hb2, expert outputs.
  const uint64_t activations =
      4 * rows * (3 * c.dim + 2 * q_dim + 2 * kv_dim + 2 * ffn + uint64_t{c.n_experts_used} * c.dim);
  // MatMul's prefill scratch: x in fp16 and a tile of w in fp16 (the widest
  // matrix's rows, up to cuda::kPrefillTileElements elements); the logits of
  // a few rows.
  const uint64_t tile = std::min<uint64_t>(cuda::kPrefillTileElements, std::max<uint64_t>(c.vocab_size, ffn) * widest);
  const uint64_t matmul = 2 * rows * widest + 2 * tile + 4 * 16 * uint64_t{c.vocab_size};
  // Attention's records in the same scratch, after its output's 8-bit
  // activations: those of a chunk ending at the trained context, at most
  // cuda::kAttentionScratchBudget (more positions go in rounds).
  uint64_t attention = 0;
#if defined(OCTO_HAVE_CUDA)
  const int context = static_cast<int>(std::min<uint64_t>(std::max<uint64_t>(c.context_length, rows), INT32_MAX));
  const AttentionParams last_chunk{.n_tokens = max_rows,
                                   .first_pos = context - max_rows,
                                   .n_heads = static_cast<int>(c.n_heads),
                                   .n_kv_heads = static_cast<int>(c.n_kv_heads),
                                   .head_dim = static_cast<int>(c.head_dim)};
  attention = cuda::AttentionScratchBytes(last_chunk, cuda::kAttentionScratchBudget) + 2 * rows * q_dim;
#endif
  return (activations + std::max(matmul, attention)) * 5 / 4;
}

absl::StatusOr<LayerPlan> PlanVram(const std::vector<uint64_t>& layer_bytes, const VramPlanSettings& settings) {
  ResidencySettings s;
  s.pin_first = settings.pin_first;
  s.pin_last = settings.pin_last;
  s.auto_budget = false;
  s.budget_bytes = settings.budget_bytes;
  s.ring_slots = settings.staging_buffers;
  absl::StatusOr<LayerPlan> plan = PlanLayers(layer_bytes, s);
  if (!plan.ok()) return Annotate(plan.status(), "the VRAM budget (layers + staging buffers)");
  return plan;
}

absl::StatusOr<std::unique_ptr<BackendWeights>> BackendWeights::Create(Backend& backend, const Manifest& manifest,
                                                                       const std::string& model_dir,
                                                                       const GlobalWeights& host_globals,
                                                                       LayerSource& host_layers,
                                                                       LayerBytesSource& host_bytes,
                                                                       const LayerPlan& vram) {
  if (backend.kind() == "cpu") return std::make_unique<HostWeights>(host_globals, host_layers);
#if defined(OCTO_HAVE_CUDA)
  return CreateDeviceWeights(static_cast<CudaBackend&>(backend), manifest, model_dir, host_globals, host_bytes, vram);
#else
  return absl::InternalError("a device backend in a build without CUDA");
#endif
}

}  // namespace octo
