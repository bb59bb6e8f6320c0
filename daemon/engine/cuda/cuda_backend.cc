#include "daemon/engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/fused.h"
#include "kernels/op_checks.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

void FreeDevice(void* p) { cudaFree(p); }

// Prefixes an op's error with its name (the forward pass adds the layer).
absl::Status Op(const char* name, absl::Status s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

}  // namespace

absl::Status CudaCallStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string text = absl::StrCat(what, " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(text);
  if (error == cudaErrorInvalidValue) return absl::InvalidArgumentError(text);
  return absl::InternalError(text);
}

absl::StatusOr<std::shared_ptr<CudaBackend>> CudaBackend::Create(int gpu) {
  const int count = cuda::CudaDeviceCount();
  if (gpu < 0 || gpu >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", gpu, ": this machine has ", count, count == 1 ? " usable device" : " usable devices"));
  }
  std::shared_ptr<CudaBackend> b(new CudaBackend());
  b->gpu_ = gpu;
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaSetDevice(gpu), absl::StrCat("cudaSetDevice(", gpu, ")")));
  cudaDeviceProp prop{};
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaGetDeviceProperties(&prop, gpu), "cudaGetDeviceProperties"));
  b->name_ = prop.name;
  b->total_bytes_ = prop.totalGlobalMem;
  OCTO_ASSIGN_OR_RETURN(b->stream_, cuda::CudaStream::Create());
  OCTO_ASSIGN_OR_RETURN(b->blas_, cuda::BlasContext::Create());
  return b;
}

CudaBackend::~CudaBackend() {
  if (stream_.get() != nullptr) stream_.Synchronize().IgnoreError();
  if (stage_ != nullptr) cudaFreeHost(stage_);
}

std::string CudaBackend::Describe() const {
  return absl::StrFormat("cuda (device %d: %s, %.1f GiB)", gpu_, name_, total_bytes_ / double(1ull << 30));
}

absl::StatusOr<BackendBuffer> CudaBackend::Allocate(size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (bytes == 0) return BackendBuffer();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of device memory: %d bytes asked, %d of %d free on device %d (%s)", bytes, free, total, gpu_,
        cudaGetErrorString(e)));
  }
  BackendBuffer buffer(p, bytes, FreeDevice);
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaMemsetAsync(p, 0, bytes, stream_.get()), "cudaMemsetAsync"));
  return buffer;
}

absl::Status CudaBackend::ReserveStage(size_t bytes) {
  if (stage_used_ + bytes <= stage_size_) return absl::OkStatus();
  // The copies queued from the stage must finish before it is reused or freed.
  OCTO_RETURN_IF_ERROR(stream_.Synchronize());
  stage_used_ = 0;
  if (bytes <= stage_size_) return absl::OkStatus();
  const size_t size = std::max({bytes, 2 * stage_size_, size_t{1} << 20});
  if (stage_ != nullptr) cudaFreeHost(stage_);
  stage_ = nullptr;
  stage_size_ = 0;
  void* p = nullptr;
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaMallocHost(&p, size), absl::StrCat("cudaMallocHost(", size, ")")));
  stage_ = static_cast<uint8_t*>(p);
  stage_size_ = size;
  return absl::OkStatus();
}

absl::Status CudaBackend::Upload(void* dst, const void* src, size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (bytes == 0) return absl::OkStatus();
  OCTO_RETURN_IF_ERROR(ReserveStage(bytes));
  uint8_t* staged = stage_ + stage_used_;
  std::memcpy(staged, src, bytes);
  stage_used_ += (bytes + 63) / 64 * 64;  // the next stretch 64-byte aligned
  return CudaCallStatus(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream_.get()), "upload");
}

absl::Status CudaBackend::Download(void* dst, const void* src, size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  // The pass's launches, checked once here rather than one call each.
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaGetLastError(), "a kernel launch"));
  OCTO_RETURN_IF_ERROR(ReserveStage(bytes));
  uint8_t* staged = stage_ + stage_used_;
  if (bytes > 0) {
    OCTO_RETURN_IF_ERROR(
        CudaCallStatus(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyDeviceToHost, stream_.get()), "download"));
  }
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamSynchronize(stream_.get()), "the compute stream"));
  if (bytes > 0) std::memcpy(dst, staged, bytes);
  stage_used_ = 0;  // every copy queued from the stage is done
  return absl::OkStatus();
}

absl::Status CudaBackend::Copy(void* dst, const void* src, size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (bytes == 0) return absl::OkStatus();
  return CudaCallStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()),
                        "device copy");
}

cudaStream_t CudaBackend::stream() {
  if (absl::Status s = LaunchHeld(); !s.ok()) held_error_ = s;
  return stream_.get();
}

absl::Status CudaBackend::Hold(Held held) {
  held_ = std::move(held);
  return absl::OkStatus();
}

absl::Status CudaBackend::LaunchHeld() {
  absl::Status error = std::exchange(held_error_, absl::OkStatus());
  if (!held_.launch) return error;
  Held held = std::exchange(held_, Held{});
  absl::Status s = held.launch(nullptr);
  return error.ok() ? s : error;
}

std::optional<absl::Status> CudaBackend::FusedMatMul(std::span<const WeightMatrix> ws, const float* x,
                                                     std::span<float* const> outs, int n_tokens) {
  if (!held_.launch || !held_error_.ok() || held_.rope || held_.out != x || ws.empty()) return std::nullopt;
  const std::optional<cuda::ActQ8Rule> rule = cuda::SharedRounding(ws, n_tokens);
  if (!rule || held_.elements != int64_t{n_tokens} * ws[0].cols) return std::nullopt;
  auto launch = std::exchange(held_, Held{}).launch;
  absl::StatusOr<cuda::Exec> exec = ExecWithScratch(cuda::MatMulGroupScratchBytes(ws, n_tokens));
  if (!exec.ok()) return exec.status();
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec->scratch, *rule, n_tokens, ws[0].cols);
  if (absl::Status s = launch(&q8); !s.ok()) return s;
  return Op(ws.size() == 1 ? "MatMul" : "MatMulGroup", cuda::MatMulGroup(ws, x, outs, n_tokens, *exec, q8));
}

absl::StatusOr<cuda::Exec> CudaBackend::ExecWithScratch(size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (bytes > scratch_.size()) {
    OCTO_RETURN_IF_ERROR(stream_.Synchronize());
    scratch_ = cuda::DeviceBuffer();
    OCTO_ASSIGN_OR_RETURN(scratch_, cuda::DeviceBuffer::Allocate(std::max(bytes, 2 * scratch_.size())));
  }
  return cuda::Exec{.stream = stream_.get(), .scratch = scratch_.data(), .scratch_bytes = scratch_.size(),
                    .blas = blas_.get()};
}

absl::Status CudaBackend::GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("GetRows", cuda::GetRows(w, ids, n, out, stream_.get()));
}
absl::Status CudaBackend::RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(Op("RmsNorm", CheckRmsNormArgs(x, weight, out, n_rows, dim, eps)));
  if (n_rows > kMaxDecodeTokens) return Op("RmsNorm", cuda::RmsNorm(x, weight, out, n_rows, dim, eps, stream_.get()));
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("RmsNorm", q8 == nullptr ? cuda::RmsNorm(x, weight, out, n_rows, dim, eps, stream_.get())
                                       : cuda::RmsNorm(x, weight, out, n_rows, dim, eps, stream_.get(), *q8));
  }, .out = out, .elements = int64_t{n_rows} * dim, .rope = std::nullopt});
}
absl::Status CudaBackend::AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows,
                                     int dim, float eps) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(Op("AddRmsNorm", CheckRmsNormArgs(x, weight, out, n_rows, dim, eps)));
  if (n_rows > kMaxDecodeTokens || delta == nullptr) {
    return Op("AddRmsNorm", cuda::AddRmsNorm(x, delta, weight, out, n_rows, dim, eps, stream_.get()));
  }
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("AddRmsNorm", q8 == nullptr ? cuda::AddRmsNorm(x, delta, weight, out, n_rows, dim, eps, stream_.get())
                                          : cuda::AddRmsNorm(x, delta, weight, out, n_rows, dim, eps, stream_.get(), *q8));
  }, .out = out, .elements = int64_t{n_rows} * dim, .rope = std::nullopt});
}
void CudaBackend::SetRowGroups(std::span<const int> rows_per_sequence) {
  row_groups_.assign(rows_per_sequence.begin(), rows_per_sequence.end());
  row_groups_sum_ = 0;
  for (int g : row_groups_) row_groups_sum_ += g;
}

absl::Status CudaBackend::LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows,
                                    int dim, float eps) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("LayerNorm", cuda::LayerNorm(x, weight, bias, out, n_rows, dim, eps, stream_.get()));
}
absl::Status CudaBackend::MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) {
  if (std::optional<absl::Status> fused = FusedMatMul({&w, 1}, x, {&out, 1}, n_tokens)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  // `n` rows from `row` on: cuda::MatMul in one call (n > kMaxDecodePathTokens
  // takes the cuBLAS path), or in decode launches of kMaxDecodeTokens.
  auto run = [&](int row, int n, bool decode) -> absl::Status {
    const int step = decode ? kMaxDecodeTokens : n;
    for (int r = row; r < row + n; r += step) {
      const int m = std::min(step, row + n - r);
      OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(cuda::MatMulScratchBytes(w, m)));
      OCTO_RETURN_IF_ERROR(Op("MatMul", cuda::MatMul(w, x + int64_t{r} * w.cols, out + int64_t{r} * w.rows, m, exec)));
    }
    return absl::OkStatus();
  };
  if (row_groups_sum_ != n_tokens || n_tokens <= kMaxDecodePathTokens) return run(0, n_tokens, n_tokens <= kMaxDecodePathTokens);
  // Consecutive short sequences share decode launches; a long one runs alone.
  int row = 0, decode_from = 0;
  for (int g : row_groups_) {
    if (g <= kMaxDecodePathTokens) {
      row += g;
      continue;
    }
    if (row > decode_from) OCTO_RETURN_IF_ERROR(run(decode_from, row - decode_from, true));
    OCTO_RETURN_IF_ERROR(run(row, g, false));
    row += g;
    decode_from = row;
  }
  if (row > decode_from) OCTO_RETURN_IF_ERROR(run(decode_from, row - decode_from, true));
  return absl::OkStatus();
}
absl::Status CudaBackend::MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                                      int n_tokens) {
  if (std::optional<absl::Status> fused = FusedMatMul(ws, x, outs, n_tokens)) return *fused;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (n_tokens > kMaxDecodePathTokens || ws.size() > kMaxMatMulGroup) return Backend::MatMulGroup(ws, x, outs, n_tokens);
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(cuda::MatMulGroupScratchBytes(ws, n_tokens)));
  return Op("MatMulGroup", cuda::MatMulGroup(ws, x, outs, n_tokens, exec));
}

absl::Status CudaBackend::MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                        const MatMulExpertsParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(cuda::MatMulExpertsScratchBytes(w, p)));
  return Op("MatMulExperts", cuda::MatMulExperts(w, expert_ids, x, out, p, exec));
}
absl::Status CudaBackend::Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("Rope", cuda::Rope(x, positions, n_tokens, p, stream_.get()));
}
absl::Status CudaBackend::RopeQK(float* q, float* k, const int32_t* positions, int n_tokens,
                                 const RopeParams& q_params, int k_heads) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  RopeParams k_params = q_params;
  k_params.n_heads = k_heads;
  OCTO_RETURN_IF_ERROR(Op("RopeQK", CheckRopeArgs(q, positions, n_tokens, q_params)));
  OCTO_RETURN_IF_ERROR(Op("RopeQK", CheckRopeArgs(k, positions, n_tokens, k_params)));
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out*) {
                     return Op("RopeQK", cuda::RopeQK(q, k, positions, n_tokens, q_params, k_heads, stream_.get()));
                   },
                   .out = nullptr,
                   .elements = 0,
                   .rope = HeldRope{q, k, positions, n_tokens, q_params, k_heads}});
}
absl::Status CudaBackend::KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                                   void* v_cache, int first_pos, KvCacheTypes types, const int32_t* first_pos_at) {
  if (held_.rope && held_error_.ok() && held_.rope->k == k && held_.rope->n_tokens == n_tokens &&
      int64_t{held_.rope->k_heads} * held_.rope->p.head_dim == kv_dim) {
    const HeldRope r = *std::exchange(held_, Held{}).rope;
    return Op("RopeQK + KvAppend", cuda::RopeQKAppend(r.q, r.k, r.positions, r.n_tokens, r.p, r.k_heads, v, k_cache,
                                                      v_cache, first_pos, types, stream_.get(), first_pos_at));
  }
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("KvAppend",
            cuda::KvAppend(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types, stream_.get(), first_pos_at));
}
absl::Status CudaBackend::Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                                    const AttentionParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_ASSIGN_OR_RETURN(cuda::Exec exec, ExecWithScratch(cuda::AttentionScratchBytes(p)));
  return Op("Attention", cuda::Attention(q, k_cache, v_cache, out, p, exec));
}
absl::Status CudaBackend::SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(Op("SiluMul", CheckSiluMulArgs(gate, up, out, n)));
  return Hold(Held{.launch = [=, this](const cuda::ActQ8Out* q8) {
    return Op("SiluMul", q8 == nullptr ? cuda::SiluMul(gate, up, out, n, stream_.get())
                                       : cuda::SiluMul(gate, up, out, n, stream_.get(), *q8));
  }, .out = out, .elements = n, .rope = std::nullopt});
}
absl::Status CudaBackend::Gelu(const float* x, float* out, int64_t n) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("Gelu", cuda::Gelu(x, out, n, stream_.get()));
}
absl::Status CudaBackend::Add(const float* a, const float* b, float* out, int64_t n) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("Add", cuda::Add(a, b, out, n, stream_.get()));
}
absl::Status CudaBackend::AddBias(float* x, const float* bias, int n_rows, int width) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("AddBias", cuda::AddBias(x, bias, n_rows, width, stream_.get()));
}
absl::Status CudaBackend::TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                                      int32_t* expert_ids, float* weights) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("TopKExperts",
            cuda::TopKExperts(router_logits, n_tokens, n_experts, k, normalize, expert_ids, weights, stream_.get()));
}
absl::Status CudaBackend::MoeCombine(const MoeCombineParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("MoeCombine", cuda::MoeCombine(p, stream_.get()));
}
absl::Status CudaBackend::DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out,
                                       float* out, const DeltaNetConvParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("DeltaNetConv", cuda::DeltaNetConv(x, taps, state_in, state_out, out, p, stream_.get()));
}
absl::Status CudaBackend::GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                         const float* decay, const float* state_in, float* state_out, float* out,
                                         const GatedDeltaRuleParams& p) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("GatedDeltaRule",
            cuda::GatedDeltaRule(qkv, b, a, dt_bias, decay, state_in, state_out, out, p, stream_.get()));
}
absl::Status CudaBackend::SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads,
                                          int head_dim) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("SplitGatedQuery", cuda::SplitGatedQuery(qg, q, gate, n_tokens, n_heads, head_dim, stream_.get()));
}
absl::Status CudaBackend::SigmoidMul(const float* gate, float* x, int64_t n) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return Op("SigmoidMul", cuda::SigmoidMul(gate, x, n, stream_.get()));
}

}  // namespace octo
