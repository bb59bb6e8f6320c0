// CudaBackend: the Backend of kernels/cuda on one device. Every op is queued
// on one compute stream (non-blocking, so copies on other streams overlap
// it); the host runs ahead until a Download, which is the pass's one wait.
//
// MatMul's path is chosen per sequence (SetRowGroups): the rows of the
// sequences that bring at most kMaxDecodePathTokens tokens take the decode
// path together, in launches of kMaxDecodeTokens rows (row-independent
// bits); a longer sequence's rows take the cuBLAS path alone, as they do
// when it runs alone. So a sequence gets its solo bits in any batch.
//
// Scratch: one device buffer for the ops that need one (MatMul's dequantized
// tiles and quantized activations, attention's splits), grown on demand. A
// growth waits for the compute stream first (the old buffer may be in use),
// so it costs a stream wait the first time a larger batch runs, never in
// the steady state.
//
// Held launches. RmsNorm, AddRmsNorm, SiluMul, Attention and MatMulGlu of a
// few rows (at most kMaxDecodeTokens), MatMulExpertsGlu, and RopeQK, are not launched when
// called but held until the next call, which may do the held op's work in
// its own launch (kernels/cuda/fused.h), with the bits of the two apart:
//   - a MatMul or MatMulGroup on the decode path whose x is the held norm's
//     or SiLU product's whole output, its matrices rounding x by one rule:
//     the producer also rounds its output for them, and the MatMul skips
//     its quantize launch; so does a MatMulExperts (the down experts after
//     the SiLU product) whose x is the held op's whole output;
//   - the output projection (a MatMul) of a held Attention's whole output
//     (a few tokens of one sequence), rounded by the attention blocks; and
//     a SigmoidMul of that whole output (qwen3-next's gate) before it goes
//     into the attention launch too;
//   - the down projection (a MatMul) of a held MatMulGlu's output: the
//     gated launch rounds it (and itself takes x rounded by a held norm);
//     likewise the down experts of a held MatMulExpertsGlu's output;
//   - an AddRmsNorm adding a held MoeCombine's whole output into the
//     residual stream, its out that output too (the next layer's attention
//     norm after a MoE FFN): the norm computes the combined rows itself
//     (cuda::CombineAddRmsNorm) and is then held as any AddRmsNorm is;
//     and when that combine is of a held down experts' launch's whole
//     output (a few tokens, x the held SiLU product's), the experts' launch
//     combines and norms in its last block (cuda::MatMulExpertsCombineNorm),
//     held as a producer as the norm is;
//   - a SiluMul gating a held in-place head-wide RmsNorm's whole output in
//     place (the gated DeltaNet output's norm): one launch
//     (cuda::RmsNormSiluMul), held as a producer rounding its rows as spans;
//   - a KvAppend of all of the held RopeQK's rotated k rows: RoPE and the
//     append in one launch; and two in-place per-head RmsNorms of RopeQK's
//     q and k before it (qwen3's q and k norms) are held with it and go in
//     that launch too;
//   - and before those, the q, k and v MatMulGroup of a few tokens (one
//     decode launch) whose outputs they are: the group's launch does them,
//     the last block of each head's rows turning and appending the head
//     (cuda::MatMulGroupRopeAppend), when the append is its k's and v's.
// A MatMul on the decode path (one launch of a few tokens) is held too, for
// an AddRmsNorm or Add that adds its whole output into the residual stream
// (the next norm's add after wo and down, the last layer's Add): the decode
// launch adds each value it stores into the residual (cuda::MatMulAdd), and
// for a few tokens (cuda::kMaxNormAfterAddTokens) its last block does the
// norm (cuda::MatMulAddRmsNorm), held as a producer as the norm is; for more
// the norm launches plain (an RmsNorm, itself held as above). And for a
// TopKExperts of its whole output (a MoE router's logits, float weights):
// the two go in one launch (cuda::MatMulTopKExperts), held in turn as a
// producer of the router's x -- the experts' MatMulExpertsGlu after it, or
// any decode MatMul of that x, has the router launch round x for it; a
// one-row MatMul of the router's x between the two (a shared expert's gate)
// goes in that launch too (cuda::SharedGateRow).
// A MatMulExpertsGluShared of a few tokens (the routed and a shared
// expert's gate and up, one type) is one launch (cuda::SharedExpertGlu),
// held as a producer of both outputs for the MatMulExpertsShared after it:
// both downs in the down experts' launch, held with the MoeCombine after
// and done with the norm after that as above (cuda::SharedExpertDown).
// A one-token DeltaNetConv (a decode step's) is held for the GatedDeltaRule
// reading its output: the rule's blocks convolve the channels they read
// (cuda::DeltaNetConvRule), one launch.
// Any other call launches the held op as it is first, so the stream runs
// the same work in the same order. stream() does the same: code that queues work on the compute
// stream itself (DeviceLayers' events and copies) sees every op called
// before. A held op's error is returned by the call that launches it.
//
// CUDA graphs: launches are kept as the pass calls its ops and, at the
// pass's Download (or where outside work must reach the stream: stream(),
// an allocation), replayed as one graph when the stretch repeats one
// captured before (a decode token after the first of the same batch
// shape), captured when it repeats one run before, else run as called
// (step_graphs.h). Held launches (above) are kept the same way once
// launched.
//
// Host data goes through a pinned staging buffer: Upload copies into it and
// queues the copy from there; Download copies out of it after its wait. So
// no pass copies pageable memory (which CUDA would stage itself, blocking).
// Uploads of a pass take consecutive stretches of it; it is reused from the
// start after the Download that ends the pass, and grows (after a stream
// wait) when a pass needs more, so the steady state allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "daemon/engine/backend.h"
#include "daemon/engine/cuda/step_graphs.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fused.h"

namespace octo {

class CudaBackend : public Backend {
 public:
  // Device `gpu`. FAILED_PRECONDITION naming the count when there is no
  // such device (or no usable driver).
  static absl::StatusOr<std::shared_ptr<CudaBackend>> Create(int gpu);
  ~CudaBackend() override;

  int gpu() const { return gpu_; }
  const std::string& device_name() const { return name_; }
  // The compute stream, every held and kept launch queued on it (an error
  // of one comes back from the next op); the launches after it are a new
  // stretch for the graphs.
  cudaStream_t stream();
  // CUDA graphs for repeated passes (step_graphs.h); on by default.
  void set_graphs(bool enabled);
  bool graphs_enabled() const;
  void BeginPass() override;
  // Issues the held op and what graphs_ keeps (a graph or launch by
  // launch), and ends the pass's bracket.
  absl::Status Flush() override;
  StepGraphsStats graph_stats() const;
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t scratch_bytes() const { return scratch_.size(); }
  // The most scratch an Attention call's records take (a longer context's
  // tokens run in rounds, with the same bits): cuda::kAttentionScratchBudget
  // unless a test sets it lower.
  void set_attention_scratch_budget(size_t bytes) { attention_scratch_budget_ = bytes; }

  std::string Describe() const override;
  std::string kind() const override { return "cuda"; }
  absl::StatusOr<BackendBuffer> Allocate(size_t bytes) override;
  absl::Status Upload(void* dst, const void* src, size_t bytes) override;
  absl::Status Download(void* dst, const void* src, size_t bytes) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;

  void SetRowGroups(std::span<const int> rows_per_sequence) override;
  absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) override;
  absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) override;
  absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                          float eps) override;  // one launch (cuda::AddRmsNorm)
  absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
                         float eps) override;
  absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens) override;
  // Decode-path batches (n_tokens <= kMaxDecodePathTokens, where MatMul
  // takes that path for every row): cuda::MatMulGroup, x rounded once for
  // the group; longer ones: separate MatMuls (their paths per sequence).
  absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                           int n_tokens) override;
  // The decode path's: the biases in the decode launch (cuda::MatMulGroupBias).
  absl::Status MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases, const float* x,
                               std::span<float* const> outs, int n_tokens) override;
  // A few tokens (one decode launch) of one quantized type: cuda::MatMulGlu,
  // after a held producer of x rounding for it, and held itself for the
  // MatMul after it (down), which it rounds for.
  absl::Status MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out, float* up_out,
                         int n_tokens) override;
  // After a held producer whose whole output is x (the SiLU product before
  // the down experts): x rounded for the experts in its launch
  // (cuda::MatMulExpertsGroup's `rounded`).
  absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                             const MatMulExpertsParams& p) override;
  // Stacks of one quantized type and layout: one rounding of x, one decode
  // launch (cuda::MatMulExpertsGroup); others as separate MatMulExperts.
  absl::Status MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids, const float* x,
                                  std::span<float* const> outs, const MatMulExpertsParams& p) override;
  // Quantized stacks of one type and layout: cuda::MatMulExpertsGlu, held
  // for the down experts after it, which it rounds for.
  absl::Status MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                                const float* x, float* out, float* up_out, const MatMulExpertsParams& p) override;
  // The routed and the shared stacks of one quantized type (a few tokens):
  // one launch (cuda::SharedExpertGlu), held for MatMulExpertsShared, which
  // it rounds for (x rounded by the held router's launch when it can).
  absl::Status MatMulExpertsGluShared(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                                      const float* x, float* out, float* up_out, const MatMulExpertsParams& p,
                                      const SharedExpert& shared) override;
  // After that held launch, over its outputs: the down experts and the
  // shared down over its roundings, held for the MoeCombine and the norm
  // after (one launch then: cuda::SharedExpertDown), else as two launches.
  absl::Status MatMulExpertsShared(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                   const MatMulExpertsParams& p, const SharedExpert& shared) override;
  absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) override;
  absl::Status RopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& q_params,
                      int k_heads) override;  // one launch (cuda::RopeQK)
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
  // Flush within the pass: a stretch ends (stream(), a scratch growth).
  absl::Status FlushStretch();
  absl::Status IssueKept(bool end_pass);
  CudaBackend() = default;
  // An Exec whose scratch holds at least `bytes`.
  absl::StatusOr<cuda::Exec> ExecWithScratch(size_t bytes);
  // Grows `buffer` (scratch_, arrivals_) to `bytes` or more, its contents
  // lost, after what is kept (which may read it) has run; true when it grew.
  absl::StatusOr<bool> Grow(cuda::DeviceBuffer& buffer, size_t bytes);
  // `bytes` of the pinned stage, free of queued copies, for the caller to
  // use at stage_ + stage_used_.
  absl::Status ReserveStage(size_t bytes);

  // A held launch (see above): `launch(nullptr)` plain; for a producer,
  // `launch(&q8)` also rounds its output (`elements` floats at `out`) into
  // q8; for RopeQK, `rope` holds its arguments.
  struct HeldRope {
    float* q;
    float* k;
    const int32_t* positions;
    int n_tokens;
    RopeParams p;
    int k_heads;
    cuda::HeadNorms norms;  // q and k's head norms folded in (q null: none)
  };
  // A held Attention's arguments (records in exec's scratch past the front
  // a consumer rounds into), and the gate a SigmoidMul after it folded in.
  struct HeldAttention {
    const float* q;
    const void* k_cache;
    const void* v_cache;
    float* out;
    AttentionParams p;
    cuda::Exec exec;
    uint32_t* arrivals;
    const float* gate = nullptr;
  };
  static absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)> AttentionLaunch(const HeldAttention& a);
  // An in-place RmsNorm of rows no wider than a head: maybe RopeQK's q or k.
  struct HeadNormCall {
    float* x;
    const float* weight;
    int n_rows, dim;
    float eps;
  };
  // A held decode MatMul (see above): `add_into(residual, norm, round_norm)`
  // launches it, also adding its output (elements floats at out) into
  // residual when that is non-null, and with norm then norming residual in
  // its last block (cuda::MatMulAddRmsNorm), rounding into round_norm when
  // that is non-null; the held launch is add_into(nullptr, nullptr,
  // nullptr). A plain MatMul of a
  // router's type (cuda::RoutesInOneLaunch) also keeps its arguments, for
  // its launch as a router's (cuda::MatMulTopKExperts, out its logits).
  struct RouterArgs {
    WeightMatrix w;
    float* logits;
    int n_tokens;
    cuda::Exec exec;
    // A one-row MatMul of the same x after it (a shared expert's gate,
    // cuda::SharedGateRow), held with it for the router's launch.
    std::optional<cuda::SharedGateRow> gate = std::nullopt;
  };
  using MatMulLaunch = absl::AnyInvocable<absl::Status(float* residual, const cuda::NormAfterAdd* norm,
                                                        const cuda::ActQ8Out* round_norm)>;
  struct HeldMatMul {
    std::shared_ptr<MatMulLaunch> add_into;
    const float* x;
    int64_t x_elements;
    const float* out;
    int64_t elements;
    int n_tokens;
    std::optional<RouterArgs> router = std::nullopt;
  };
  // A held down experts' launch of a few tokens (cuda::kMaxNormAfterAddTokens)
  // over the rounding of the held SiLU product before it: `launch(tail,
  // round_norm)` launches both, with tail non-null combining its rows into
  // the residual stream and norming it in its last block
  // (cuda::MatMulExpertsCombineNorm), rounding into round_norm when that is
  // non-null. A MoeCombine of its whole output is held with it
  // (Held::combine), for the AddRmsNorm after.
  using ExpertsLaunch =
      absl::AnyInvocable<absl::Status(const cuda::CombineAfterExperts* tail, const cuda::ActQ8Out* round_norm)>;
  struct HeldExperts {
    std::shared_ptr<ExpertsLaunch> launch;
    const float* out;
    MatMulExpertsParams p;
    int64_t rows;                        // per choice
    const float* shared_out = nullptr;  // a shared expert's down in the launch: its output
  };
  // Holds the down experts' `launch` (HeldExperts's) when p's tokens are few
  // enough for its last block to norm; else queues it plain.
  absl::Status HoldExperts(ExpertsLaunch launch, const float* out, const MatMulExpertsParams& p, int64_t rows,
                           const float* shared_out);
  // A held MatMulExpertsGluShared launch (the routed and the shared expert's
  // gate and up, cuda::SharedExpertGlu): `launch(q8, shared_q8)` launches
  // it (after its held producer of x, if it took one), rounding the routed
  // rows (elements floats at out) into q8 and the shared rows into
  // shared_q8 when those are non-null, for MatMulExpertsShared after it.
  using GluPairLaunch =
      absl::AnyInvocable<absl::Status(const cuda::ActQ8Out* q8, const cuda::ActQ8Out* shared_q8)>;
  struct HeldSharedGlu {
    std::shared_ptr<GluPairLaunch> launch;
    const float* out;
    int64_t elements;
    const float* shared_out;
    int64_t shared_elements;
  };
  // A held q, k and v MatMulGroup (a decode launch's): `launch(heads)`
  // launches it (after its held producer of x, if it took one), with heads
  // non-null turning and appending the heads in its tails
  // (cuda::MatMulGroupRopeAppend); the head norms and the RopeQK after it
  // are held with it (Held::norms, Held::rope) until the KvAppend of its k
  // and v, and before them a SplitGatedQuery of its q (a gated query's).
  using QkvLaunch = absl::AnyInvocable<absl::Status(const cuda::HeadsAfterQkv* heads)>;
  struct HeldQkv {
    std::shared_ptr<QkvLaunch> launch;
    WeightMatrix ws[3];
    float* outs[3];
    int n_tokens;
    // A SplitGatedQuery of outs[0] held with it: the queries and gate it
    // writes (n_heads of head_dim), q then the queries the norms and RopeQK
    // take.
    struct Split {
      float* q;
      float* gate;
      int n_heads, head_dim;
    };
    std::optional<Split> split = std::nullopt;
    float* q() const { return split ? split->q : outs[0]; }
    int64_t q_elements() const {
      return split ? int64_t{n_tokens} * split->n_heads * split->head_dim : n_tokens * ws[0].rows;
    }
  };
  struct Held {
    absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)> launch;
    const float* out = nullptr;
    int64_t elements = 0;
    std::optional<HeldRope> rope;
    std::vector<HeadNormCall> norms;  // the held in-place head-wide RmsNorms (one or two)
    std::optional<HeldAttention> attention = std::nullopt;
    std::optional<HeldMatMul> matmul = std::nullopt;
    std::optional<MoeCombineParams> combine = std::nullopt;  // a held MoeCombine's
    std::optional<HeldExperts> experts = std::nullopt;         // before the combine held with it
    std::optional<HeldSharedGlu> shared_glu = std::nullopt;
    std::optional<cuda::DeltaNetConvCall> conv = std::nullopt;  // a held one-token DeltaNetConv's
    std::optional<HeldQkv> qkv = std::nullopt;  // before the norms and rope held with it
    // A producer writing out in spans of this many values, a block each
    // (Attention's heads): it rounds by the rules cuda::RoundsInSpans
    // allows. 0: by any rule whose chunks its rows hold.
    int64_t span = 0;
    // The front of the scratch a consumer's launch may use (its rounded
    // activations among them): the held launch uses what lies past it --
    // or, a MatMul norming in its last block, all of it, but writes the
    // consumer's activations after every block has read its own (so the
    // consumer may use no more than there is: no growth frees it).
    size_t free_scratch = SIZE_MAX;
  };
  absl::Status Hold(Held held);
  // Holds a decode MatMul of n_tokens rows of x (x_elements floats) into
  // out (elements); `add_into` and `router` as HeldMatMul's.
  absl::Status HoldMatMul(MatMulLaunch add_into, const float* x, int64_t x_elements, const float* out,
                          int64_t elements, int n_tokens, std::optional<RouterArgs> router = std::nullopt);
  // Whether the held op is a MatMul whose whole output is delta (n floats)
  // and residual overlaps neither its x nor its output.
  bool HeldMatMulAddsInto(const float* residual, const float* delta, int64_t n) const;
  // When HeldMatMulAddsInto: its launch adding into residual, queued; else
  // nullopt (nothing launched).
  std::optional<absl::Status> AddHeldMatMulInto(float* residual, const float* delta, int64_t n);
  // When HeldMatMulAddsInto(x, delta) for a MatMul of n_rows tokens, at most
  // cuda::kMaxNormAfterAddTokens (x must not overlap out: AddRmsNorm's own
  // rule, the caller's): AddRmsNorm in its launch (cuda::MatMulAddRmsNorm),
  // held as a producer of out, as AddRmsNorm is; else nullopt (nothing
  // launched).
  std::optional<absl::Status> AddHeldMatMulNorm(float* x, const float* delta, const float* weight, float* out,
                                                int n_rows, int dim, float eps);
  // When the held op is one in-place head-wide RmsNorm of exactly up (n
  // floats), the SiluMul's out too, and gate does not overlap it: the two
  // in one held launch (cuda::RmsNormSiluMul), a producer rounding in spans
  // of its rows; else nullopt (nothing launched).
  std::optional<absl::Status> HeldNormSiluMul(const float* gate, const float* up, float* out, int64_t n);
  // When the held op is a MoeCombine whose output is delta and out (the
  // whole of it, n_rows of dim) and x overlaps neither it nor its inputs:
  // AddRmsNorm of it in the combine's launch (cuda::CombineAddRmsNorm),
  // held as a producer as AddRmsNorm is; else nullopt (nothing launched).
  std::optional<absl::Status> AddHeldCombineNorm(float* x, const float* delta, const float* weight, float* out,
                                                 int n_rows, int dim, float eps);
  // Prefixes an op's error with its name (the forward pass adds the layer).
  static absl::Status Op(const char* name, absl::Status s);
  // Launches the held op plain (and returns the error of one launched by
  // stream()).
  absl::Status LaunchHeld();
  // Whether the held op is a producer (a norm, the SiLU product, attention
  // or the gated MatMulGlu, whose launch can round its output) that wrote exactly
  // `elements` values at x -- or the router's launch, which read them -- and
  // can round them by `rule` for a consumer using `scratch` bytes of the
  // scratch.
  bool HeldRoundsFor(const float* x, int64_t elements, cuda::ActQ8Rule rule, size_t scratch) const {
    return held_.launch && held_error_.ok() && !held_.rope && held_.out == x && held_.elements == elements &&
           (held_.span == 0 || cuda::RoundsInSpans(rule, held_.span)) && scratch <= held_.free_scratch;
  }
  // The held op's launch, taken out of held_, when it rounds x (elements
  // floats, by rule) for a consumer using `scratch` bytes (HeldRoundsFor);
  // else null, the held op launched plain. The consumer's counters and
  // scratch are grown before (their growth launches the held op plain).
  absl::StatusOr<absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)>> TakeRoundingOf(const float* x,
                                                                                        int64_t elements,
                                                                                        cuda::ActQ8Rule rule,
                                                                                        size_t scratch);
  // `count` zeroed chunk counters (cuda::ActQ8Out::arrivals), grown as
  // scratch_ is -- and so, when they grow, launching the held op plain
  // first: a caller fusing the held op grows them first and fuses what is
  // still held (the held launch may hold counters or scratch a growth would
  // free: the router's, a MatMul norming in its last block), or takes a held
  // op that holds neither out of held_ before.
  absl::StatusOr<uint32_t*> Arrivals(size_t count);
  // When the held op is a router's MatMul (RouterArgs) of the same x and
  // tokens, and w one row of its type and cols: the MatMul held with it, a
  // shared expert's gate going in the router's launch; else nullopt
  // (nothing launched).
  std::optional<absl::Status> JoinRouterGate(const WeightMatrix& w, const float* x, float* out, int n_tokens);
  // MatMulGroup (with biases: MatMulGroupBias) over the held op's output:
  // the fused launch pair when it applies, else nullopt (nothing launched).
  std::optional<absl::Status> FusedMatMul(std::span<const WeightMatrix> ws, const float* x,
                                          std::span<float* const> outs, int n_tokens,
                                          std::span<const float* const> biases = {});
  // `launch` queued -- or, q, k and v of one decode launch, held (HeldQkv).
  absl::Status QueueOrHoldGroup(QkvLaunch launch, std::span<const WeightMatrix> ws, std::span<float* const> outs,
                                int n_tokens);
  // When the held op is a HeldQkv with its RopeQK whose k and v these are:
  // it launched with the rope and this append, in the group's launch when
  // cuda::CheckMatMulGroupRopeAppend allows, else with RopeQKAppend after;
  // else nullopt (nothing launched).
  std::optional<absl::Status> AppendHeldQkv(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache,
                                            void* v_cache, int first_pos, KvCacheTypes types,
                                            const int32_t* first_pos_at);
  // MatMulGroup and MatMulGroupBias on the decode path (biases empty: none).
  absl::Status DecodeGroup(std::span<const WeightMatrix> ws, std::span<const float* const> biases, const float* x,
                           std::span<float* const> outs, int n_tokens);

  int gpu_ = 0;
  std::string name_;
  uint64_t total_bytes_ = 0;
  size_t attention_scratch_budget_ = cuda::kAttentionScratchBudget;
  cuda::CudaStream stream_;
  std::unique_ptr<StepGraphs> graphs_;  // after stream_: destroyed before it
  cuda::BlasContext blas_;
  cuda::DeviceBuffer scratch_;
  cuda::DeviceBuffer arrivals_;  // zeroed; every launch using them leaves them so
  std::vector<int> row_groups_;
  int row_groups_sum_ = 0;
  Held held_;
  absl::Status held_error_;  // of a held op launched by stream()
  uint8_t* stage_ = nullptr;  // cudaMallocHost
  size_t stage_size_ = 0, stage_used_ = 0;
};

// A Status for a failed runtime call `what` (cudaGetErrorString's text).
absl::Status CudaCallStatus(cudaError_t error, const std::string& what);

}  // namespace octo
