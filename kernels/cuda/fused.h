// CUDA launches that do the work of two ops of kernels/ops.h at once, with
// the bits of the two: the CUDA backend uses them where the forward pass
// calls the two in a row (daemon/engine/cuda/cuda_backend.h says when).
//
// A producer that rounds for its consumer: RmsNorm, AddRmsNorm (and
// CombineAddRmsNorm), SiluMul (and RmsNormSiluMul),
// Attention and MatMulGlu also write their output's 8-bit activations
// (act_q8.h, under q8.rule, at q8.q and q8.d), which the decode MatMul that
// reads the output would otherwise compute in a launch of its own;
// MatMulGroup (or MatMulExpertsGroup) then takes them as `rounded`. The
// rounding is act_q8.cuh's RoundChunk, the decode path's own, so the
// MatMul's output is the unfused one's bit for bit. And a decode MatMul
// whose output the residual stream takes next adds it in its own store
// (MatMulAdd), Add's bits, and may norm the stream after in its last block
// (MatMulAddRmsNorm); the down experts' launch may likewise combine its
// rows into the stream and norm it (MatMulExpertsCombineNorm); a MoE router's MatMul picks its experts in its last
// block and rounds its x for them (MatMulTopKExperts). The q, k and v
// projections' launch turns each head and appends it to its cache in the
// last block of the head's rows (MatMulGroupRopeAppend).
#pragma once

#include <optional>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/ops.h"

namespace octo::cuda {

// The rounded producers' own precondition: q8 set, rows of `width` whole
// rounding chunks (INVALID_ARGUMENT naming `op`).
inline absl::Status CheckRounding(const char* op, int64_t width, const ActQ8Out& q8) {
  if (q8.q == nullptr || q8.d == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": q8 is null"));
  if (width % ActQ8ChunkOf(q8.rule) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": rows of ", width, " are not whole ", ActQ8ChunkOf(q8.rule),
                                                   "-element rounding chunks"));
  }
  return absl::OkStatus();
}

// A producer rounding its output in spans of `span` values, a block each
// (Attention's heads, RmsNormSiluMul's rows): the spans hold whole rounding
// chunks or tile one (RoundsInSpans), and q8.arrivals is set when they share
// chunks (INVALID_ARGUMENT naming op and `spans`, what a span is).
inline absl::Status CheckSpanRounding(const char* op, const char* spans, int64_t span, const ActQ8Out& q8) {
  if (!RoundsInSpans(q8.rule, span)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s of %d values neither hold whole %d-element rounding chunks nor tile them", op, spans,
                        span, ActQ8ChunkOf(q8.rule)));
  }
  if (SpansShareChunks(q8.rule, span) && q8.arrivals == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s of %d values share %d-element rounding chunks: q8.arrivals is null", op, spans, span,
        ActQ8ChunkOf(q8.rule)));
  }
  return absl::OkStatus();
}

// ops.h's RmsNorm, AddRmsNorm and SiluMul, also writing out's 8-bit
// activations to q8. dim (SiluMul: n) must be a multiple of the rule's
// chunk (32 or 256 elements); so must the reader's cols, as its type asks.
absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps,
                     StreamHandle stream, const ActQ8Out& q8);
absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                        float eps, StreamHandle stream, const ActQ8Out& q8);
absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n, StreamHandle stream,
                     const ActQ8Out& q8);

// ops.h's MoeCombine(combine) then AddRmsNorm(x, combine.out, weight,
// combine.out, combine.n_rows, combine.dim, eps) -- the MoE layer's weighted
// expert sum going into the residual stream, and the next norm -- in one
// launch: x and combine.out get the two ops' bits (the combined rows are
// not stored: the norm's output takes their place). With q8, out is also
// rounded into it, as AddRmsNorm's overload above does. x must overlap
// neither out nor the combine's inputs, nor out those inputs.
absl::Status CombineAddRmsNorm(const MoeCombineParams& combine, float* x, const float* weight, float eps,
                               StreamHandle stream, const ActQ8Out* q8 = nullptr);
// CombineAddRmsNorm's preconditions but q8's (INVALID_ARGUMENT naming the
// first unmet).
absl::Status CheckCombineAddRmsNorm(const MoeCombineParams& combine, const float* x, const float* weight, float eps);

// ops.h's RmsNorm(x, weight, x, n_rows, dim, eps) -- in place -- then
// SiluMul(gate, x, x, n_rows * dim): the gated DeltaNet output's norm, in
// one launch, the two ops' bits. With q8, x is also rounded into it for the
// MatMul that reads it, as SiluMul's overload above does: rows of dim
// values hold whole rounding chunks or tile one (RoundsInSpans), and when
// they share chunks q8->arrivals holds n_rows * dim / chunk zeroed
// counters, left zeroed. gate must not overlap x.
absl::Status RmsNormSiluMul(float* x, const float* weight, const float* gate, int n_rows, int dim, float eps,
                            StreamHandle stream, const ActQ8Out* q8 = nullptr);

// ops.h's Attention, then with gate (n_tokens, n_heads * head_dim; null:
// none) SigmoidMul(gate, out) -- qwen3-next's gated attention output -- in
// the same launch; with `rounded` also writing out's 8-bit activations
// there (for the output projection): each head is rounded by the block that
// writes it, or with heads narrower than a chunk, each chunk by the block of
// its last head (RoundsInSpans: head_dim must hold whole chunks or tile
// one; rounded->arrivals set when heads share chunks, n_tokens * n_heads *
// head_dim / chunk zeroed counters, left zeroed). n_heads * head_dim must
// be whole chunks. The scratch holds the records as for Attention, and must
// not overlap the 8-bit activations; gate must not overlap out.
absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& p, const Exec& exec, const ActQ8Out* rounded,
                       const float* gate = nullptr);

// ops.h's MatMulGroup on the decode path (n_tokens <= kMaxDecodeTokens)
// over x's 8-bit activations already written under `rounded.rule` (by a
// producer above), which every quantized matrix of ws must round by (float
// ones read x).
absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                         int n_tokens, const Exec& exec, const ActQ8Out& rounded);

// ops.h's MatMulGroup, then AddBias of biases[i] (ws[i].rows floats, or
// null: none) to each row of outs[i] (qwen2's q, k and v biases): on the
// decode path the decode launch adds them, the AddBias launch's sum; on
// cuBLAS's path AddBias launches after. rounded: x's 8-bit activations a
// producer wrote, as the overload above takes them (null: rounded here).
// biases: empty, or one per matrix.
absl::Status MatMulGroupBias(std::span<const WeightMatrix> ws, std::span<const float* const> biases, const float* x,
                             std::span<float* const> outs, int n_tokens, const Exec& exec,
                             const ActQ8Out* rounded = nullptr);

// ops.h's MatMul on the decode path (n_tokens <= kMaxDecodeTokens, one
// launch) then Add(residual, out, residual) -- the residual stream taking a
// projection's output (wo's, down's) -- in the decode launch: out and
// residual (n_tokens, w.rows) get the two ops' bits. residual must not
// overlap x or out. rounded: x's 8-bit activations a producer wrote (as
// MatMulGroup takes them), or null: x rounded here (MatMulScratchBytes).
absl::Status MatMulAdd(const WeightMatrix& w, const float* x, float* out, float* residual, int n_tokens,
                       const Exec& exec, const ActQ8Out* rounded = nullptr);

// The norm after a projection's residual add (MatMulAddRmsNorm): AddRmsNorm's
// weight, out and eps, and the counter the launch's last block takes.
struct NormAfterAdd {
  const float* weight = nullptr;  // (rows of the projection)
  float* out = nullptr;           // (n_tokens, rows)
  float eps = 0;
  uint32_t* arrival = nullptr;  // one counter, zero on entry, left zero
};
// The most tokens the backend norms in a projection's last block: that block
// norms its tokens one after another, where RmsNorm's launch gives each its
// own block; past a few, the launch saved costs more than it gains.
inline constexpr int kMaxNormAfterAddTokens = 4;

// MatMulAdd, then AddRmsNorm's norm of the residual it added into:
// RmsNorm(residual, norm.weight, norm.out, n_tokens, w.rows, norm.eps) --
// wo's or down's launch doing the next norm of the stream -- in one launch:
// the last of its blocks to finish norms every token's residual row as
// RmsNorm's own launch does (its block size played), the two ops' bits.
// With round_out, norm.out is also rounded into it for the MatMul that reads
// it (w.rows whole chunks of its rule), the rounded RmsNorm's bits. The last
// block writes after every block has read x and `rounded`: norm.out and
// round_out may overlap those (not residual, which it reads). MatMulAdd's
// preconditions, n_tokens <= kMaxDecodeTokens.
absl::Status MatMulAddRmsNorm(const WeightMatrix& w, const float* x, float* out, float* residual, int n_tokens,
                              const NormAfterAdd& norm, const Exec& exec, const ActQ8Out* rounded = nullptr,
                              const ActQ8Out* round_out = nullptr);

// Where a router launch (MatMulTopKExperts) puts each token's experts:
// TopKExperts's outputs (ops.h) and the counter its last block takes.
struct TopKExpertsOut {
  int k = 0;
  bool normalize = false;
  int32_t* expert_ids = nullptr;  // (n_tokens, k)
  float* weights = nullptr;       // (n_tokens, k)
  uint32_t* arrival = nullptr;    // one counter, zero on entry, left zero
};

// ops.h's MatMul of a mixture-of-experts router on the decode path (float
// weights, rows the experts; n_tokens <= kMaxDecodeTokens, one launch) then
// TopKExperts of its output (the router logits), in one launch: the last of
// its blocks to finish picks every token's experts, the two ops' bits. With
// round_x, x is also rounded into it for the experts' MatMul that reads it
// next (cols whole chunks of its rule), the quantize launch's bits. logits
// must not overlap x, ids or weights.
// With gate, the shared expert's gate row (qwen2moe's and qwen3-next's
// ffn_gate_inp_shexp: one row of the router's type and cols) goes in the
// launch too: MatMul(gate.w, x, gate.out, n_tokens)'s bits, a logit a token.
struct SharedGateRow {
  WeightMatrix w;
  float* out = nullptr;  // (n_tokens)
};
absl::Status MatMulTopKExperts(const WeightMatrix& router, const float* x, float* logits, int n_tokens,
                               const TopKExpertsOut& top_k, const Exec& exec, const ActQ8Out* round_x = nullptr,
                               const SharedGateRow* gate = nullptr);
// Whether MatMulTopKExperts takes a router of this type (the float ones).
bool RoutesInOneLaunch(GgmlType type);

// ops.h's MatMulGroup of gate and up then SiluMul of their outputs, in one
// decode launch: out (n_tokens, gate.rows) = silu(x · gate^T) * (x · up^T),
// the bits of the two ops (gate and up of one quantized type and shape,
// n_tokens <= kMaxDecodeTokens). x's 8-bit activations: `rounded` (a
// producer's), or rounded here into exec.scratch (MatMulScratchBytes). With
// round_out, out is also rounded into it for the MatMul that reads it
// (gate.rows whole chunks of its rule; round_out->arrivals set, one zeroed
// counter per chunk of a row, left zeroed, when a decode block holds fewer
// rows than a chunk: matmul::DecodeRowsPerBlock).
absl::Status MatMulGlu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out, int n_tokens,
                       const Exec& exec, const ActQ8Out* rounded = nullptr, const ActQ8Out* round_out = nullptr);

// ops.h's MatMulExperts for up to kMaxMatMulGroup stacks of one type and
// layout that read the same x (the gate and up experts), in one decode
// launch after one rounding of x -- or none: with `rounded`, over x's 8-bit
// activations a producer wrote under ExpertsRounding(ws[0]) (SiluMul's for
// the down experts, n_tokens * k rows when x_per_choice). Each outs[i] gets
// MatMulExperts's bits for ws[i]. Scratch: MatMulExpertsScratchBytes(ws[0]).
absl::Status MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids, const float* x,
                                std::span<float* const> outs, const MatMulExpertsParams& p, const Exec& exec,
                                const ActQ8Out* rounded = nullptr);
// A MoE layer's shared expert (qwen2moe's, qwen3-next's) in the routed
// experts' launches: dense matrices of the routed stacks' type, every token
// through them. SharedExpertGlu: gate and up (rows of their own, the routed
// stacks' cols) over the routed experts' x, into out (n_tokens, rows),
// MatMulGlu's bits; with round_out, out also rounded into it as MatMulGlu's
// round_out (its own counters). SharedExpertDown: w over its x (n_tokens,
// w.cols), read as `rounded` (the GLU's round_out), into out (n_tokens,
// w.rows: the routed experts' rows), MatMul's bits.
struct SharedExpertGlu {
  WeightMatrix gate, up;
  float* out = nullptr;
  const ActQ8Out* round_out = nullptr;
};
struct SharedExpertDown {
  WeightMatrix w;
  const float* x = nullptr;
  ActQ8Out rounded;
  float* out = nullptr;
};

// MatMulExpertsGroup of the gate and the up experts (quantized stacks of
// one type, shape and expert stride) then SiluMul of their outputs, in one
// decode launch after one rounding of x: out (n_tokens * k, rows per
// expert) = silu(x · gate_e^T) * (x · up_e^T), the bits of the two ops (an
// id out of range gives NaN rows, as there). With round_out, out is also
// rounded into it for the down experts (rows per expert whole chunks of its
// rule; round_out->arrivals, one zeroed counter per chunk of every choice's
// row, left zeroed, when a decode block holds fewer rows than a chunk:
// matmul::DecodeRowsPerBlock). Scratch: MatMulExpertsScratchBytes(gate).
// rounded: x's 8-bit activations a launch before wrote (under
// ExpertsRounding(gate): MatMulTopKExperts's round_x), or null: x rounded
// here.
// With shared, a shared expert's gate and up (SharedExpertGlu) go in the
// same launch, over the same x.
absl::Status MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                              const float* x, float* out, const MatMulExpertsParams& p, const Exec& exec,
                              const ActQ8Out* round_out = nullptr, const ActQ8Out* rounded = nullptr,
                              const SharedExpertGlu* shared = nullptr);
// The rule by which MatMulExperts on w rounds x (what a producer may round
// for it); nullopt for float weights, which read x.
std::optional<ActQ8Rule> ExpertsRounding(const WeightMatrix& w);

// What a down experts' launch does after its rows (MatMulExpertsCombineNorm):
// MoeCombine(combine) -- its expert_out the launch's out -- then
// AddRmsNorm(x, combine.out, weight, combine.out, combine.n_rows,
// combine.dim, eps), CombineAddRmsNorm's work, in the launch's last block.
struct CombineAfterExperts {
  MoeCombineParams combine;
  float* x = nullptr;  // the residual stream (combine.n_rows, combine.dim)
  const float* weight = nullptr;
  float eps = 0;
  uint32_t* arrival = nullptr;  // one counter, zero on entry, left zero
};
// MatMulExpertsGroup of one stack over `rounded` (the down experts, after
// the SiLU product that rounded their x) then tail's combine and norm, in
// one launch: out, tail.x and tail.combine.out get the bits of the three
// ops apart. The last of the launch's blocks to finish combines each
// token's rows and norms them, its tokens one after another, as
// CombineAddRmsNorm's launch does a token a block: so tokens at most
// kMaxNormAfterAddTokens. With round_norm, combine.out is also rounded into
// it for the MatMul that reads it (dim whole chunks of its rule). The last
// block writes after every block has read `rounded`: round_norm may
// overlap it. CombineAddRmsNorm's and MatMulExpertsGroup's preconditions;
// combine.expert_out is out, combine.n_rows and k are p's, combine.dim
// w's rows per expert. With shared, the shared expert's down goes in the
// launch too, its out combine.shared.
absl::Status MatMulExpertsCombineNorm(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                      const MatMulExpertsParams& p, const CombineAfterExperts& tail,
                                      const Exec& exec, const ActQ8Out& rounded,
                                      const ActQ8Out* round_norm = nullptr, const SharedExpertDown* shared = nullptr);

// Per-head RMS norms before RoPE (qwen3's q_norm and k_norm, head_dim
// wide each): RmsNorm(q, q, n_tokens * n_heads rows) and the same of k. q
// null: none.
struct HeadNorms {
  const float* q = nullptr;
  const float* k = nullptr;
  float eps = 0;
};

// RopeQK (ops.h) then KvAppend of the rotated k and of v (k_heads *
// p.head_dim wide) into the caches at first_pos (or *first_pos_at), in one
// launch: the bytes and values of the two -- and with norms, of the two
// head norms before them. The preconditions of each.
absl::Status RopeQKAppend(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& p,
                          int k_heads, const float* v, void* k_cache, void* v_cache, int first_pos, KvCacheTypes types,
                          StreamHandle stream, const int32_t* first_pos_at = nullptr, HeadNorms norms = {});

// What a q, k and v decode launch does to the heads it outputs
// (MatMulGroupRopeAppend): RopeQKAppend's arguments but q, k and v (the
// group's outputs), and the launch's counters: QkvHeadCounters of them,
// zero on entry, left zero.
struct HeadsAfterQkv {
  const int32_t* positions = nullptr;  // (n_tokens)
  RopeParams p;                        // q's heads (p.n_heads of p.head_dim)
  int k_heads = 0;
  HeadNorms norms;  // q null: none
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int first_pos = 0;
  const int32_t* first_pos_at = nullptr;
  KvCacheTypes types;
  uint32_t* arrivals = nullptr;
  // A gated query (qwen3-next's): q's matrix gives each head's queries then
  // its gate (SplitGatedQuery's qg), split here into q_split, turned, and
  // gate (n_tokens, p.n_heads * head_dim each). Null: q's rows are the
  // queries, turned in place.
  float* q_split = nullptr;
  float* gate = nullptr;
};
inline int64_t QkvHeadCounters(const RopeParams& p, int k_heads) { return int64_t{p.n_heads} + 2 * int64_t{k_heads}; }

// MatMulGroupBias({wq, wk, wv}, biases, x, {q, k, v}, n_tokens) then
// RopeQKAppend(q, k, heads.positions, n_tokens, heads.p, heads.k_heads, v,
// ...) -- with heads.norms, the head norms before it; with heads.q_split,
// SplitGatedQuery(q, heads.q_split, heads.gate, ...) first and the rope of
// q_split -- in the group's
// decode launch (one a weight type among the three): the last of the blocks
// holding a head's rows to finish norms and turns it (q's and k's) and
// appends it to its cache (k's and v's), for every token. q, k, v and the
// caches get the bits and bytes of the ops apart. rounded: as
// MatMulGroupBias's. Besides each op's preconditions (MatMulGroupBias's
// checked when it launches): n_tokens <= kMaxDecodeTokens, the matrices'
// rows q's, k's and v's widths, head_dim <= kMaxCudaHeadDim, a head whole
// cache units (CheckMatMulGroupRopeAppend, INVALID_ARGUMENT naming the first
// unmet).
absl::Status MatMulGroupRopeAppend(std::span<const WeightMatrix> ws, std::span<const float* const> biases,
                                   const float* x, std::span<float* const> outs, int n_tokens, const Exec& exec,
                                   const HeadsAfterQkv& heads, const ActQ8Out* rounded = nullptr);
absl::Status CheckMatMulGroupRopeAppend(std::span<const WeightMatrix> ws, std::span<float* const> outs, int n_tokens,
                                        const HeadsAfterQkv& heads);

// A DeltaNetConv call's arguments (ops.h).
struct DeltaNetConvCall {
  const float* x = nullptr;
  const float* taps = nullptr;
  const float* state_in = nullptr;
  float* state_out = nullptr;
  float* out = nullptr;
  DeltaNetConvParams p;
};

// ops.h's DeltaNetConv(conv) then GatedDeltaRule(conv.out, b, a, dt_bias,
// decay, state_in, state_out, out, p) -- a decode step's DeltaNet mixer, one
// token of one sequence -- in one launch: the rule's blocks convolve the
// channels they read, the two ops' bits (conv.out and both states too).
// Besides each op's preconditions: one token, the conv's channels the
// rule's qkv rows (qkv_stride), the conv's states apart from each other and
// from what the rule writes, and its x apart from every output
// (CheckDeltaNetConvRule, INVALID_ARGUMENT naming the first unmet).
absl::Status DeltaNetConvRule(const DeltaNetConvCall& conv, const float* b, const float* a, const float* dt_bias,
                              const float* decay, const float* state_in, float* state_out, float* out,
                              const GatedDeltaRuleParams& p, StreamHandle stream);
absl::Status CheckDeltaNetConvRule(const DeltaNetConvCall& conv, const float* b, const float* a, const float* dt_bias,
                                   const float* decay, const float* state_in, float* state_out, float* out,
                                   const GatedDeltaRuleParams& p);

// The rule by which MatMulGroup on ws rounds x in one decode launch of
// n_tokens, when that is one rule for all (at least one quantized matrix, no
// float one): what a producer may round for it. nullopt otherwise.
std::optional<ActQ8Rule> SharedRounding(std::span<const WeightMatrix> ws, int n_tokens);

}  // namespace octo::cuda
