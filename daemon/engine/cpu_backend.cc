#include "daemon/engine/cpu_backend.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/simd.h"
#include "storage/format.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

void FreeHost(void* p) { std::free(p); }

}  // namespace

absl::Status Backend::MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                                  int n_tokens) {
  if (ws.size() != outs.size()) return absl::InvalidArgumentError("MatMulGroup: as many outputs as matrices");
  for (size_t i = 0; i < ws.size(); ++i) {
    absl::Status s = MatMul(ws[i], x, outs[i], n_tokens);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Backend::MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                      const float* x, std::span<float* const> outs, int n_tokens) {
  if (biases.size() != ws.size()) return absl::InvalidArgumentError("MatMulGroupBias: one bias (or null) per matrix");
  OCTO_RETURN_IF_ERROR(MatMulGroup(ws, x, outs, n_tokens));
  for (size_t i = 0; i < ws.size(); ++i) {
    if (biases[i] != nullptr) OCTO_RETURN_IF_ERROR(AddBias(outs[i], biases[i], n_tokens, static_cast<int>(ws[i].rows)));
  }
  return absl::OkStatus();
}

absl::Status Backend::MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                                float* up_out, int n_tokens) {
  const WeightMatrix ws[] = {gate, up};
  float* const outs[] = {out, up_out};
  OCTO_RETURN_IF_ERROR(MatMulGroup(ws, x, outs, n_tokens));
  return SiluMul(out, up_out, out, static_cast<int64_t>(n_tokens) * gate.rows);
}

absl::Status Backend::MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids,
                                         const float* x, std::span<float* const> outs, const MatMulExpertsParams& p) {
  if (ws.size() != outs.size()) return absl::InvalidArgumentError("MatMulExpertsGroup: as many outputs as matrices");
  for (size_t i = 0; i < ws.size(); ++i) OCTO_RETURN_IF_ERROR(MatMulExperts(ws[i], expert_ids, x, outs[i], p));
  return absl::OkStatus();
}

absl::Status Backend::MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                                       const float* x, float* out, float* up_out, const MatMulExpertsParams& p) {
  const WeightMatrix ws[] = {gate, up};
  float* const outs[] = {out, up_out};
  OCTO_RETURN_IF_ERROR(MatMulExpertsGroup(ws, expert_ids, x, outs, p));
  return SiluMul(out, up_out, out, static_cast<int64_t>(p.n_tokens) * p.k * (gate.rows / p.n_experts));
}

absl::Status Backend::MatMulExpertsGluShared(const WeightMatrix& gate, const WeightMatrix& up,
                                             const int32_t* expert_ids, const float* x, float* out, float* up_out,
                                             const MatMulExpertsParams& p, const SharedExpert& shared) {
  OCTO_RETURN_IF_ERROR(MatMulExpertsGlu(gate, up, expert_ids, x, out, up_out, p));
  return MatMulGlu(shared.gate, shared.up, x, shared.hidden, shared.hidden_up, p.n_tokens);
}

absl::Status Backend::MatMulExpertsShared(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                          const MatMulExpertsParams& p, const SharedExpert& shared) {
  OCTO_RETURN_IF_ERROR(MatMulExperts(w, expert_ids, x, out, p));
  return MatMul(shared.down, shared.hidden, shared.out, p.n_tokens);
}

absl::Status Backend::AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                                 float eps) {
  OCTO_RETURN_IF_ERROR(Add(x, delta, x, static_cast<int64_t>(n_rows) * dim));
  return RmsNorm(x, weight, out, n_rows, dim, eps);
}

absl::Status Backend::RopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& q_params,
                             int k_heads) {
  OCTO_RETURN_IF_ERROR(Rope(q, positions, n_tokens, q_params));
  RopeParams k_params = q_params;
  k_params.n_heads = k_heads;
  return Rope(k, positions, n_tokens, k_params);
}

CpuBackend::CpuBackend(int n_threads, bool allow_simd) : pool_(std::make_unique<cpu::ThreadPool>(n_threads)) {
  exec_.pool = pool_.get();
  exec_.simd = allow_simd ? cpu::DetectSimd() : cpu::Simd::kPortable;
}

std::string CpuBackend::Describe() const {
  const int threads = exec_.pool != nullptr ? exec_.pool->size() : 1;
  return absl::StrCat("cpu (", cpu::SimdName(exec_.simd), ", ", threads, " threads)");
}

absl::StatusOr<BackendBuffer> CpuBackend::Allocate(size_t bytes) {
  if (bytes == 0) return BackendBuffer();
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
  std::memset(p, 0, rounded);
  return BackendBuffer(p, bytes, FreeHost);
}

absl::Status CpuBackend::Upload(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return absl::OkStatus();
}
absl::Status CpuBackend::Download(void* dst, const void* src, size_t bytes) { return Upload(dst, src, bytes); }
absl::Status CpuBackend::Copy(void* dst, const void* src, size_t bytes) { return Upload(dst, src, bytes); }

absl::Status CpuBackend::GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) {
  return cpu::GetRows(w, ids, n, out);
}
absl::Status CpuBackend::RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) {
  return cpu::RmsNorm(x, weight, out, n_rows, dim, eps);
}
absl::Status CpuBackend::LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows,
                                   int dim, float eps) {
  return cpu::LayerNorm(x, weight, bias, out, n_rows, dim, eps);
}
absl::Status CpuBackend::MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) {
  return cpu::MatMul(w, x, out, n_tokens, exec_);
}
absl::Status CpuBackend::MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                                     int n_tokens) {
  return cpu::MatMulGroup(ws, x, outs, n_tokens, exec_);
}
absl::Status CpuBackend::MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                       const MatMulExpertsParams& p) {
  return cpu::MatMulExperts(w, expert_ids, x, out, p, exec_);
}
absl::Status CpuBackend::Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) {
  return cpu::Rope(x, positions, n_tokens, p);
}
absl::Status CpuBackend::KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                                  void* v_cache, int first_pos, KvCacheTypes types, const int32_t* first_pos_at) {
  return cpu::KvAppend(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types, first_pos_at);
}
absl::Status CpuBackend::Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                                   const AttentionParams& p) {
  return cpu::Attention(q, k_cache, v_cache, out, p, exec_);
}
absl::Status CpuBackend::SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  return cpu::SiluMul(gate, up, out, n);
}
absl::Status CpuBackend::Gelu(const float* x, float* out, int64_t n) { return cpu::Gelu(x, out, n); }
absl::Status CpuBackend::Add(const float* a, const float* b, float* out, int64_t n) { return cpu::Add(a, b, out, n); }
absl::Status CpuBackend::AddBias(float* x, const float* bias, int n_rows, int width) {
  return cpu::AddBias(x, bias, n_rows, width);
}
absl::Status CpuBackend::TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                                     int32_t* expert_ids, float* weights) {
  return cpu::TopKExperts(router_logits, n_tokens, n_experts, k, normalize, expert_ids, weights);
}
absl::Status CpuBackend::MoeCombine(const MoeCombineParams& p) { return cpu::MoeCombine(p); }
absl::Status CpuBackend::TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out) {
  return cpu::TopLogits(logits, n_rows, vocab, out);
}
absl::Status CpuBackend::DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out,
                                      float* out, const DeltaNetConvParams& p) {
  return cpu::DeltaNetConv(x, taps, state_in, state_out, out, p, exec_);
}
absl::Status CpuBackend::GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                        const float* decay, const float* state_in, float* state_out, float* out,
                                        const GatedDeltaRuleParams& p) {
  return cpu::GatedDeltaRule(qkv, b, a, dt_bias, decay, state_in, state_out, out, p, exec_);
}
absl::Status CpuBackend::SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads,
                                         int head_dim) {
  return cpu::SplitGatedQuery(qg, q, gate, n_tokens, n_heads, head_dim);
}
absl::Status CpuBackend::SigmoidMul(const float* gate, float* x, int64_t n) { return cpu::SigmoidMul(gate, x, n); }

}  // namespace octo
