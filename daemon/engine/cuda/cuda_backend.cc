#include "daemon/engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/fused.h"
#include "daemon/engine/cuda/op_signature.h"
#include "kernels/op_checks.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

void FreeDevice(void* p) { cudaFree(p); }

}  // namespace

absl::Status CudaBackend::Op(const char* name, absl::Status s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

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
  // Decided (and probed) here, before any launch or stream capture.
  (void)cuda::ProgrammaticLaunches();
  OCTO_ASSIGN_OR_RETURN(b->stream_, cuda::CudaStream::Create());
  OCTO_ASSIGN_OR_RETURN(b->blas_, cuda::BlasContext::Create());
  b->graphs_ = std::make_unique<StepGraphs>(b->stream_.get());
  return b;
}

CudaBackend::~CudaBackend() {
  graphs_.reset();  // what it keeps is dropped: nobody reads its results now
  if (stream_.get() != nullptr) stream_.Synchronize().IgnoreError();
  if (stage_ != nullptr) cudaFreeHost(stage_);
}

std::string CudaBackend::Describe() const {
  return absl::StrFormat("cuda (device %d: %s, %.1f GiB)", gpu_, name_, total_bytes_ / double(1ull << 30));
}

absl::StatusOr<BackendBuffer> CudaBackend::Allocate(size_t bytes) {
  // What is kept, and what comes after this in the pass, may read memory
  // freed meanwhile (a cache growing: allocate, copy, free the old): they
  // go on the stream as they come until the pass ends.
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(graphs_->Pause());
  if (bytes == 0) return BackendBuffer();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, cuda::AllocationBytes(bytes));
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
  OCTO_RETURN_IF_ERROR(FlushStretch());
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
  std::memcpy(staged, src, bytes);  // now: the copy (and a replay of it) reads the stage
  stage_used_ += (bytes + 63) / 64 * 64;  // the next stretch 64-byte aligned
  signature::SignOp(*graphs_, "Upload", dst, staged, bytes);
  return graphs_->Queue([=, this] {
    return CudaCallStatus(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream_.get()), "upload");
  });
}

absl::Status CudaBackend::Download(void* dst, const void* src, size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  OCTO_RETURN_IF_ERROR(ReserveStage(bytes));
  uint8_t* staged = stage_ + stage_used_;
  if (bytes > 0) {
    signature::SignOp(*graphs_, "Download", src, staged, bytes);
    OCTO_RETURN_IF_ERROR(graphs_->Queue([=, this] {
      return CudaCallStatus(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyDeviceToHost, stream_.get()), "download");
    }));
  }
  // The pass's launches: one graph, or as they were called (step_graphs.h),
  // checked once here rather than one call each.
  OCTO_RETURN_IF_ERROR(graphs_->EndPass());
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaGetLastError(), "a kernel launch"));
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamSynchronize(stream_.get()), "the compute stream"));
  if (bytes > 0) std::memcpy(dst, staged, bytes);
  stage_used_ = 0;  // every copy queued from the stage is done
  return absl::OkStatus();
}

absl::Status CudaBackend::Copy(void* dst, const void* src, size_t bytes) {
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  if (bytes == 0) return absl::OkStatus();
  signature::SignOp(*graphs_, "Copy", dst, src, bytes);
  return graphs_->Queue([=, this] {
    return CudaCallStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()), "device copy");
  });
}

cudaStream_t CudaBackend::stream() {
  if (absl::Status s = FlushStretch(); !s.ok()) held_error_ = s;
  return stream_.get();
}

void CudaBackend::set_graphs(bool enabled) { graphs_->set_enabled(enabled); }
StepGraphsStats CudaBackend::graph_stats() const { return graphs_->stats(); }
bool CudaBackend::graphs_enabled() const { return graphs_->enabled(); }

void CudaBackend::BeginPass() { graphs_->BeginPass(); }

absl::Status CudaBackend::Flush() { return IssueKept(/*end_pass=*/true); }
absl::Status CudaBackend::FlushStretch() { return IssueKept(/*end_pass=*/false); }

absl::Status CudaBackend::IssueKept(bool end_pass) {
  absl::Status held = LaunchHeld();
  absl::Status kept = end_pass ? graphs_->EndPass() : graphs_->Flush();
  return held.ok() ? kept : held;
}

absl::Status CudaBackend::Hold(Held held) {
  held_ = std::move(held);
  return absl::OkStatus();
}

absl::Status CudaBackend::LaunchHeld() {
  absl::Status error = std::exchange(held_error_, absl::OkStatus());
  if (!held_.launch) return error;
  Held held = std::exchange(held_, Held{});
  absl::Status s = graphs_->Queue([launch = std::move(held.launch)]() mutable { return launch(nullptr); });
  return error.ok() ? s : error;
}

absl::Status CudaBackend::HoldMatMul(MatMulLaunch add_into, const float* x, int64_t x_elements, const float* out,
                                     int64_t elements, int n_tokens, std::optional<RouterArgs> router) {
  auto shared = std::make_shared<MatMulLaunch>(std::move(add_into));
  return Hold(Held{.launch = [shared](const cuda::ActQ8Out*) { return (*shared)(nullptr, nullptr, nullptr); },
                   .out = nullptr,  // not a producer that rounds (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .attention = std::nullopt,
                   .matmul = HeldMatMul{shared, x, x_elements, out, elements, n_tokens, router}});
}

bool CudaBackend::HeldMatMulAddsInto(const float* residual, const float* delta, int64_t n) const {
  if (!held_.matmul || !held_error_.ok()) return false;
  const HeldMatMul& m = *held_.matmul;
  if (m.router && m.router->gate) return false;  // its launch is the gate's too
  return m.out == delta && m.elements == n && !Overlaps(residual, n * 4, m.x, m.x_elements * 4) &&
         !Overlaps(residual, n * 4, m.out, n * 4);
}

std::optional<absl::Status> CudaBackend::AddHeldMatMulInto(float* residual, const float* delta, int64_t n) {
  if (!HeldMatMulAddsInto(residual, delta, n)) return std::nullopt;
  std::shared_ptr<MatMulLaunch> add_into = std::exchange(held_, Held{}).matmul->add_into;
  signature::SignOp(*graphs_, "MatMul + Add", residual);
  return graphs_->Queue([add_into, residual] { return (*add_into)(residual, nullptr, nullptr); });
}

std::optional<absl::Status> CudaBackend::AddHeldMatMulNorm(float* x, const float* delta, const float* weight,
                                                           float* out, int n_rows, int dim, float eps) {
  const int64_t n = int64_t{n_rows} * dim;
  auto fits = [&] {
    return n_rows <= cuda::kMaxNormAfterAddTokens && HeldMatMulAddsInto(x, delta, n) &&
           held_.matmul->n_tokens == n_rows;
  };
  if (!fits()) return std::nullopt;
  // The counter first: its growth launches the held MatMul plain (and the
  // norm then launches apart).
  absl::StatusOr<uint32_t*> arrival = Arrivals(1);
  if (!arrival.ok()) return arrival.status();
  if (!fits()) return std::nullopt;
  std::shared_ptr<MatMulLaunch> add_into = std::exchange(held_, Held{}).matmul->add_into;
  const cuda::NormAfterAdd norm{weight, out, eps, *arrival};
  signature::SignOp(*graphs_, "MatMul + AddRmsNorm", *arrival);
  return Hold(Held{.launch = [add_into, x, norm](const cuda::ActQ8Out* q8) { return (*add_into)(x, &norm, q8); },
                   .out = out,
                   .elements = n,
                   .rope = std::nullopt,
                   .norms = {},
                   .span = 0,
                   .free_scratch = scratch_.size()});
}

std::optional<absl::Status> CudaBackend::FusedMatMul(std::span<const WeightMatrix> ws, const float* x,
                                                     std::span<float* const> outs, int n_tokens,
                                                     std::span<const float* const> biases) {
  if (ws.empty()) return std::nullopt;
  const std::optional<cuda::ActQ8Rule> rule = cuda::SharedRounding(ws, n_tokens);
  const size_t scratch = cuda::MatMulGroupScratchBytes(ws, n_tokens);
  if (!rule || !HeldRoundsFor(x, int64_t{n_tokens} * ws[0].cols, *rule, scratch)) return std::nullopt;
  auto launch = std::exchange(held_, Held{}).launch;
  absl::StatusOr<cuda::Exec> exec = ExecWithScratch(scratch);
  if (!exec.ok()) return exec.status();
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec->scratch, *rule, n_tokens, ws[0].cols);
  signature::SignOp(*graphs_, "MatMulGroup (rounded)", ws, x, outs, n_tokens, *exec, biases);
  if (ws.size() == 1 && biases.empty()) {
    // One MatMul: held itself, for the residual add after it.
    const WeightMatrix w = ws[0];
    float* const out = outs[0];
    return HoldMatMul(
        [launch = std::move(launch), w, x, out, n_tokens, exec = *exec, q8](
            float* residual, const cuda::NormAfterAdd* norm, const cuda::ActQ8Out* round_norm) mutable -> absl::Status {
          if (absl::Status s = launch(&q8); !s.ok()) return s;
          if (norm != nullptr) {
            return Op("MatMul + AddRmsNorm",
                      cuda::MatMulAddRmsNorm(w, x, out, residual, n_tokens, *norm, exec, &q8, round_norm));
          }
          return Op("MatMul", residual == nullptr ? cuda::MatMulGroup({&w, 1}, x, {&out, 1}, n_tokens, exec, q8)
                                                  : cuda::MatMulAdd(w, x, out, residual, n_tokens, exec, &q8));
        },
        x, int64_t{n_tokens} * w.cols, out, int64_t{n_tokens} * w.rows, n_tokens);
  }
  return QueueOrHoldGroup(
      [launch = std::move(launch), ws = std::vector<WeightMatrix>(ws.begin(), ws.end()),
       outs = std::vector<float*>(outs.begin(), outs.end()),
       biases = std::vector<const float*>(biases.begin(), biases.end()), x, n_tokens, exec = *exec,
       q8](const cuda::HeadsAfterQkv* heads) mutable -> absl::Status {
        if (absl::Status s = launch(&q8); !s.ok()) return s;
        if (heads != nullptr) {
          return Op("MatMulGroup + RopeQK + KvAppend",
                    cuda::MatMulGroupRopeAppend(ws, biases, x, outs, n_tokens, exec, *heads, &q8));
        }
        return Op(ws.size() == 1 ? "MatMul" : "MatMulGroup",
                  cuda::MatMulGroupBias(ws, biases, x, outs, n_tokens, exec, &q8));
      },
      ws, outs, n_tokens);
}

absl::Status CudaBackend::QueueOrHoldGroup(QkvLaunch launch, std::span<const WeightMatrix> ws,
                                           std::span<float* const> outs, int n_tokens) {
  if (ws.size() != 3 || outs.size() != 3 || n_tokens > kMaxDecodeTokens) {
    return graphs_->Queue([launch = std::move(launch)]() mutable { return launch(nullptr); });
  }
  auto shared = std::make_shared<QkvLaunch>(std::move(launch));
  return Hold(Held{.launch = [shared](const cuda::ActQ8Out*) { return (*shared)(nullptr); },
                   .out = nullptr,  // not a producer that rounds (HeldRoundsFor)
                   .elements = 0,
                   .rope = std::nullopt,
                   .norms = {},
                   .qkv = HeldQkv{shared, {ws[0], ws[1], ws[2]}, {outs[0], outs[1], outs[2]}, n_tokens}});
}

absl::StatusOr<bool> CudaBackend::Grow(cuda::DeviceBuffer& buffer, size_t bytes) {
  if (bytes <= buffer.size()) return false;
  // What is kept may read the old buffer: it runs first.
  OCTO_RETURN_IF_ERROR(FlushStretch());
  OCTO_RETURN_IF_ERROR(stream_.Synchronize());
  // At least double, so that a batch growing a row at a time reallocates a
  // few times, not at every size.
  const size_t grown = std::max(bytes, 2 * buffer.size());
  buffer = cuda::DeviceBuffer();
  OCTO_ASSIGN_OR_RETURN(buffer, cuda::DeviceBuffer::Allocate(grown));
  return true;
}

absl::StatusOr<cuda::Exec> CudaBackend::ExecWithScratch(size_t bytes) {
  OCTO_RETURN_IF_ERROR(Grow(scratch_, bytes).status());
  return cuda::Exec{.stream = stream_.get(), .scratch = scratch_.data(), .scratch_bytes = scratch_.size(),
                    .blas = blas_.get()};
}

absl::StatusOr<absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)>> CudaBackend::TakeRoundingOf(
    const float* x, int64_t elements, cuda::ActQ8Rule rule, size_t scratch) {
  if (HeldRoundsFor(x, elements, rule, scratch)) return std::exchange(held_, Held{}).launch;
  OCTO_RETURN_IF_ERROR(LaunchHeld());
  return nullptr;
}

absl::StatusOr<uint32_t*> CudaBackend::Arrivals(size_t count) {
  OCTO_ASSIGN_OR_RETURN(const bool grown, Grow(arrivals_, count * sizeof(uint32_t)));
  if (grown) {
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaMemsetAsync(arrivals_.data(), 0, arrivals_.size(), stream_.get()),
                                        "cudaMemsetAsync (counters)"));
  }
  return arrivals_.as<uint32_t>();
}

void CudaBackend::SetRowGroups(std::span<const int> rows_per_sequence) {
  row_groups_.assign(rows_per_sequence.begin(), rows_per_sequence.end());
  row_groups_sum_ = 0;
  for (int g : row_groups_) row_groups_sum_ += g;
}

}  // namespace octo
