// CpuBackend: the Backend of kernels/cpu, on host memory, with the model's
// thread pool. The numerical reference the CUDA backend is tested against.
#pragma once

#include <memory>
#include <string>

#include "daemon/engine/backend.h"
#include "kernels/cpu/thread_pool.h"

namespace octo {

class CpuBackend : public Backend {
 public:
  // n_threads < 1: one per core. allow_simd false: the portable kernels.
  CpuBackend(int n_threads, bool allow_simd);
  // Runs on `exec`'s pool, which must outlive the backend (benchmarks).
  explicit CpuBackend(const cpu::Exec& exec) : exec_(exec) {}

  const cpu::Exec& exec() const { return exec_; }

  std::string Describe() const override;
  std::string kind() const override { return "cpu"; }
  absl::StatusOr<BackendBuffer> Allocate(size_t bytes) override;
  absl::Status Upload(void* dst, const void* src, size_t bytes) override;
  absl::Status Download(void* dst, const void* src, size_t bytes) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;

  absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) override;
  absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) override;
  absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
                         float eps) override;
  absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) override;
  absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                           int n_tokens) override;
  absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                             const MatMulExpertsParams& p) override;
  absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) override;
  absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                        void* v_cache, int first_pos, KvCacheTypes types, const int32_t* first_pos_at = nullptr) override;
  absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                         const AttentionParams& p) override;
  absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n) override;
  absl::Status Gelu(const float* x, float* out, int64_t n) override;
  absl::Status Add(const float* a, const float* b, float* out, int64_t n) override;
  absl::Status AddBias(float* x, const float* bias, int n_rows, int width) override;
  absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                           int32_t* expert_ids, float* weights) override;
  absl::Status MoeCombine(const MoeCombineParams& p) override;
  absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out) override;
  absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                            const DeltaNetConvParams& p) override;
  absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                              const float* decay, const float* state_in, float* state_out, float* out,
                              const GatedDeltaRuleParams& p) override;
  absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads,
                               int head_dim) override;
  absl::Status SigmoidMul(const float* gate, float* x, int64_t n) override;

 private:
  std::unique_ptr<cpu::ThreadPool> pool_;
  cpu::Exec exec_;
};

}  // namespace octo
