// Backend: what the forward pass runs on -- the CPU (kernels/cpu, host
// memory) or a CUDA device (kernels/cuda, device memory, one compute stream).
//
// The forward pass is written once, over this interface (forward.cc), so a
// new architecture feature has one home and runs on both backends; each
// backend is a thin table from these calls to its twin in kernels/ops.h.
// Why an interface and not twin forward files (calm's way): the families
// here differ in a few optional steps (biases, q/k norms, experts); twins
// would have to repeat each step in two places and keep them in step by
// hand, while the ops already have twin signatures, so one forward costs
// only this table.
//
// Memory. Every pointer an op takes is "backend memory" (host memory for
// the CPU, device memory for CUDA): activations (RunState), KV caches, and
// the weights the LayerSource hands out. Host data reaches it through
// Upload and comes back through Download.
//
// Order. Ops, Upload and Copy run in the order they are called, possibly
// asynchronously (CUDA queues them on its compute stream); Download waits
// for everything before it. An error from an op is a Status naming the op;
// a fault while a queued kernel runs shows up at the next Download.
//
// Threading: one forward pass at a time, from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/ops.h"

namespace octo {

// An owned block of backend memory, freed by whoever allocated it. Move-only.
class BackendBuffer {
 public:
  using FreeFn = void (*)(void*);
  BackendBuffer() = default;
  BackendBuffer(void* data, size_t bytes, FreeFn free) : data_(data), bytes_(bytes), free_(free) {}
  BackendBuffer(BackendBuffer&& o) noexcept { *this = std::move(o); }
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = o.data_;
      bytes_ = o.bytes_;
      free_ = o.free_;
      o.data_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;
  ~BackendBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void Reset() {
    if (data_ != nullptr && free_ != nullptr) free_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu (avx2, 8 threads)", "cuda (device 0: NVIDIA H100 ..., 80.0 GiB)".
  virtual std::string Describe() const = 0;
  // "cpu" or "cuda".
  virtual std::string kind() const = 0;

  // Zero-filled backend memory. RESOURCE_EXHAUSTED naming the size when
  // there is not enough.
  virtual absl::StatusOr<BackendBuffer> Allocate(size_t bytes) = 0;
  // host -> backend; `src` may be reused when this returns.
  virtual absl::Status Upload(void* dst, const void* src, size_t bytes) = 0;
  // backend -> host, after everything queued before it; reports a fault of
  // the queued work.
  virtual absl::Status Download(void* dst, const void* src, size_t bytes) = 0;
  // backend -> backend.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;

  // A forward pass's bracket: from BeginPass to the pass's Download the
  // backend may keep launches back (CUDA: recording them for a graph);
  // outside it every op is issued as it is called. Flush issues what is
  // kept and ends the bracket: a pass that fails calls it, so nothing kept
  // outlives the pass's memory.
  virtual void BeginPass() {}
  virtual absl::Status Flush() { return absl::OkStatus(); }

  // The rows of the next MatMuls come in these groups, one per sequence of
  // the batch, in order (the forward pass says so before the layers, and
  // again before lm_head). A backend whose matmul rounds by the number of
  // rows (CUDA's decode and prefill paths) picks its path per group, so a
  // sequence's rows get the same bits whatever else shares the pass. MatMul
  // calls whose row count differs from the groups' sum ignore them.
  virtual void SetRowGroups(std::span<const int> rows_per_sequence) {}

  // The ops of kernels/ops.h, with the same arguments less the exec/stream.
  // GetRows: the embedding rows of the pass's token ids (ids in backend
  // memory, uploaded with the positions).
  virtual absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) = 0;
  virtual absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                               float eps) = 0;
  // The residual add and the norm after it: x += delta; out = RmsNorm(x).
  // Here Add then RmsNorm; CUDA fuses them into one launch, bit for bit the
  // same. out may be delta; x overlaps neither.
  virtual absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                                  float eps);
  // The encoders' norm (BERT, nomic-bert): (x - mean) / sqrt(variance +
  // eps) * weight + bias per row. out may be x.
  virtual absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows,
                                 int dim, float eps) = 0;
  virtual absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) = 0;
  // Separate MatMuls over the same x; the CPU shares the activation encoding.
  virtual absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                                   int n_tokens);
  // MatMulGroup, then AddBias of each non-null biases[i] (ws[i].rows
  // floats) to outs[i] (qwen2's q, k and v biases); CUDA adds them in the
  // decode launch, the same bits. biases: one per matrix.
  virtual absl::Status MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                       const float* x, std::span<float* const> outs, int n_tokens);
  // The gated FFN's first half: out = silu(x · gate^T) * (x · up^T), gate
  // and up of one shape (rows outputs each). Here MatMulGroup into out and
  // up_out, then SiluMul; CUDA may do it in one decode launch, bit for bit
  // the same, and then leaves up_out (rows floats a token) unwritten.
  virtual absl::Status MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                                 float* up_out, int n_tokens);
  virtual absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                     const MatMulExpertsParams& p) = 0;
  // Separate MatMulExperts over the same x and choices (the gate and up
  // experts); CUDA decodes stacks of one type and layout in one launch.
  virtual absl::Status MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids, const float* x,
                                          std::span<float* const> outs, const MatMulExpertsParams& p);
  // The experts' gated FFN's first half, MatMulGlu's for each choice:
  // out = silu(x · gate_e^T) * (x · up_e^T) (n_tokens * k rows of an
  // expert's rows). Here MatMulExpertsGroup into out and up_out, then
  // SiluMul; CUDA may do it in one decode launch, bit for bit the same, and
  // then leaves up_out unwritten.
  virtual absl::Status MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                                        const float* x, float* out, float* up_out, const MatMulExpertsParams& p);
  // A MoE layer's shared expert (qwen2moe, qwen3-next): dense gate, up and
  // down beside the routed experts, over the same x; hidden and hidden_up
  // (n_tokens, gate.rows) its GLU's rows, out (n_tokens, down.rows) its
  // output.
  struct SharedExpert {
    WeightMatrix gate, up, down;
    float* hidden = nullptr;
    float* hidden_up = nullptr;
    float* out = nullptr;
  };
  // MatMulExpertsGlu, then the shared expert's MatMulGlu(shared.gate,
  // shared.up, x, shared.hidden, shared.hidden_up, p.n_tokens). CUDA may
  // run the two in one decode launch, bit for bit the same, leaving up_out
  // and shared.hidden_up unwritten.
  virtual absl::Status MatMulExpertsGluShared(const WeightMatrix& gate, const WeightMatrix& up,
                                              const int32_t* expert_ids, const float* x, float* out, float* up_out,
                                              const MatMulExpertsParams& p, const SharedExpert& shared);
  // MatMulExperts (the down experts, x_per_choice), then the shared
  // expert's MatMul(shared.down, shared.hidden, shared.out, p.n_tokens).
  // Likewise.
  virtual absl::Status MatMulExpertsShared(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                           const MatMulExpertsParams& p, const SharedExpert& shared);
  virtual absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) = 0;
  // RoPE on q (q_params) and k (its heads k_heads, the rest as q's): here
  // two Rope calls; CUDA rotates both in one launch, bit for bit the same.
  virtual absl::Status RopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& q_params,
                              int k_heads);
  // first_pos_at: as ops.h's (the rows' start read when the op runs).
  virtual absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                                void* v_cache, int first_pos, KvCacheTypes types,
                                const int32_t* first_pos_at = nullptr) = 0;
  virtual absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                                 const AttentionParams& p) = 0;
  virtual absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n) = 0;
  // GELU (tanh approximation, fp16-rounded as llama.cpp's CPU backend), the
  // encoders' FFN activation. out may be x.
  virtual absl::Status Gelu(const float* x, float* out, int64_t n) = 0;
  virtual absl::Status Add(const float* a, const float* b, float* out, int64_t n) = 0;
  virtual absl::Status AddBias(float* x, const float* bias, int n_rows, int width) = 0;
  virtual absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                                   int32_t* expert_ids, float* weights) = 0;
  virtual absl::Status MoeCombine(const MoeCombineParams& p) = 0;
  // Each logits row's best kTopLogits candidates, max, sum of exps and
  // checks (ops.h), for the candidates path: only `out` comes back.
  virtual absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out) = 0;
  // Gated DeltaNet and the gated attention output (the hybrid Qwen models).
  virtual absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out,
                                    float* out, const DeltaNetConvParams& p) = 0;
  virtual absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                      const float* decay, const float* state_in, float* state_out, float* out,
                                      const GatedDeltaRuleParams& p) = 0;
  virtual absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads,
                                       int head_dim) = 0;
  virtual absl::Status SigmoidMul(const float* gate, float* x, int64_t n) = 0;
};

}  // namespace octo
