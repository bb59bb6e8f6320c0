// The gated DeltaNet token mixer and the gated attention output on CUDA.
// Semantics and preconditions: kernels/ops.h; the CPU twin is
// kernels/cpu/delta_net.cc, whose sums these keep in the same order.
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/gates.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

constexpr int kMaxKernel = 16;
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// --- Kernels -----------------------------------------------------------------

// Head h's state in state_out, thread j's column first copied from
// state_in when the two differ.
__device__ __forceinline__ float* AdoptState(const float* state_in, float* state_out, int h, int d, int j) {
  float* s = state_out + static_cast<int64_t>(h) * d * d;
  const float* s_in = state_in + static_cast<int64_t>(h) * d * d;
  if (s != s_in) {
    for (int i = 0; i < d; ++i) s[i * d + j] = s_in[i * d + j];
  }
  return s;
}

// Channel c of DeltaNetConv over p.n_tokens tokens in order, the channel's
// window of inputs in registers: its outputs into out and its last inputs
// into state_out, each when non-null (a block that shares the channel with
// another leaves them to it); returns the last token's output.
__device__ __forceinline__ float ConvChannel(const float* x, const float* taps, const float* state_in,
                                             float* state_out, float* out, const DeltaNetConvParams& p,
                                             int64_t c) {
  const int64_t channels = p.channels;
  const int history = p.kernel - 1;
  float window[kMaxKernel];
  float last = 0.0f;
  for (int j = 0; j < history; ++j) window[j] = state_in[j * channels + c];
  for (int t = 0; t < p.n_tokens; ++t) {
    window[history] = x[t * channels + c];
    float sum = 0.0f;
    for (int j = 0; j < p.kernel; ++j) sum += taps[c * p.kernel + j] * window[j];
    last = Silu(sum);
    if (out != nullptr) out[t * channels + c] = last;
    for (int j = 0; j < history; ++j) window[j] = window[j + 1];
  }
  if (state_out != nullptr) {
    for (int j = 0; j < history; ++j) state_out[j * channels + c] = window[j];
  }
  return last;
}

// One thread per channel (grid-stride).
__global__ void DeltaNetConvKernel(const float* x,         // (n_tokens, channels)
                                   const float* taps,      // (channels, kernel)
                                   const float* state_in,  // (kernel - 1, channels)
                                   float* state_out,       // (kernel - 1, channels)
                                   float* out,             // (n_tokens, channels)
                                   DeltaNetConvParams p) {
  GridStart();
  for (int64_t c = GridStrideBegin(); c < p.channels; c += GridStrideStep()) {
    ConvChannel(x, taps, state_in, state_out, out, p, c);
  }
}

// Where head h's key head and its b and a sit (ops.h's GatedDeltaRule), and
// whether h is the first value head of its key head.
struct HeadIndex {
  int kh;
  int64_t b_at, a_at;
  bool first_of_kh;
};
__device__ __forceinline__ HeadIndex HeadIndexOf(const GatedDeltaRuleParams& p, int h) {
  const int r = p.v_heads / p.k_heads;
  const int64_t b_at = p.grouped_ba ? (h / r) * 2 * r + h % r : h;
  return HeadIndex{p.grouped_heads ? h / r : h % p.k_heads, b_at, p.grouped_ba ? b_at + r : h,
                   p.grouped_heads ? h % r == 0 : h < p.k_heads};
}

// One token of the step form for value head h, thread j (value dim j) of
// its block: q and k (the head's, head_dim each) in shared memory, loaded
// by the block before the call; v thread j's value; s the head's state,
// updated in place; b_raw and a_raw the token's b and a of the head.
// Thread 0 takes the L2 sums in index order, as the CPU does. Returns out's
// value j. Every thread of the block calls it (a barrier inside), and the
// block syncs before a next call (which rewrites the scales).
__device__ __forceinline__ float DeltaRuleStep(const GatedDeltaRuleParams& p, const float* q, const float* k,
                                               float* s, float v, float b_raw, float a_raw, float dt_bias,
                                               float decay) {
  __shared__ float scales[2];
  const int d = p.head_dim, j = threadIdx.x;
  const float out_scale = 1.0f / sqrtf(static_cast<float>(d));
  if (j == 0) {
    float qs = 0.0f, ks = 0.0f;
    for (int i = 0; i < d; ++i) qs += q[i] * q[i];
    for (int i = 0; i < d; ++i) ks += k[i] * k[i];
    scales[0] = 1.0f / fmaxf(sqrtf(qs), p.eps);
    scales[1] = 1.0f / fmaxf(sqrtf(ks), p.eps);
  }
  __syncthreads();  // the scales are written
  const float q_scale = scales[0], k_scale = scales[1];
  const float beta = Sigmoid(b_raw);
  const float keep = expf(Softplus(a_raw + dt_bias) * decay);
  float mem = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float decayed = s[i * d + j] * keep;
    s[i * d + j] = decayed;
    mem += decayed * (k[i] * k_scale);
  }
  const float delta = (v - mem) * beta;
  float acc = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float updated = s[i * d + j] + (k[i] * k_scale) * delta;
    s[i * d + j] = updated;
    acc += updated * (q[i] * q_scale);
  }
  return acc * out_scale;
}

// One block per value head, thread j owning column j (value dim j) of the
// head's state, which stays in global memory (rows of a column are
// head_dim apart, so a warp's accesses to one row are contiguous).
// Launch: grid (v_heads), block (head_dim).
__global__ void GatedDeltaRuleKernel(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                     const float* decay, const float* state_in, float* state_out, float* out,
                                     GatedDeltaRuleParams p) {
  GridStart();
  __shared__ float q[kMaxHeadDim];
  __shared__ float k[kMaxHeadDim];
  const int d = p.head_dim, h = blockIdx.x, j = threadIdx.x;
  const HeadIndex at = HeadIndexOf(p, h);
  float* s = AdoptState(state_in, state_out, h, d, j);
  for (int t = 0; t < p.n_tokens; ++t) {
    const float* row = qkv + t * p.qkv_stride;
    q[j] = row[at.kh * d + j];
    k[j] = row[(p.k_heads + at.kh) * d + j];
    __syncthreads();  // q and k are loaded
    out[(static_cast<int64_t>(t) * p.v_heads + h) * d + j] =
        DeltaRuleStep(p, q, k, s, row[(2 * p.k_heads + h) * d + j], b[t * p.ba_stride + at.b_at],
                      a[t * p.ba_stride + at.a_at], dt_bias[h], decay[h]);
    __syncthreads();  // q and k are read before the next token's
  }
}

// DeltaNetConvRule's launch (fused.h): GatedDeltaRuleKernel's blocks, each
// first convolving the channels its head reads -- thread j its query, key
// and value channels (ConvChannel) -- for the call's one token. A query or
// key channel is read by every value head of its key head: the first of
// them writes its conv output and state, the others only use the value.
// Launch: grid (v_heads), block (head_dim).
__global__ void ConvDeltaRuleKernel(const float* x, const float* taps, const float* conv_in, float* conv_state,
                                    float* conv_out, DeltaNetConvParams cp, const float* b, const float* a,
                                    const float* dt_bias, const float* decay, const float* state_in,
                                    float* state_out, float* out, GatedDeltaRuleParams p) {
  GridStart();
  __shared__ float q[kMaxHeadDim];
  __shared__ float k[kMaxHeadDim];
  const int d = p.head_dim, h = blockIdx.x, j = threadIdx.x;
  const HeadIndex at = HeadIndexOf(p, h);
  float* qk_state = at.first_of_kh ? conv_state : nullptr;
  float* qk_out = at.first_of_kh ? conv_out : nullptr;
  q[j] = ConvChannel(x, taps, conv_in, qk_state, qk_out, cp, static_cast<int64_t>(at.kh) * d + j);
  k[j] = ConvChannel(x, taps, conv_in, qk_state, qk_out, cp, static_cast<int64_t>(p.k_heads + at.kh) * d + j);
  const float v = ConvChannel(x, taps, conv_in, conv_state, conv_out, cp, static_cast<int64_t>(2 * p.k_heads + h) * d + j);
  float* s = AdoptState(state_in, state_out, h, d, j);
  __syncthreads();  // q and k are written
  out[static_cast<int64_t>(h) * d + j] = DeltaRuleStep(p, q, k, s, v, b[at.b_at], a[at.a_at], dt_bias[h], decay[h]);
}

// The chunked form over p.n_tokens / p.chunk whole chunks, one block per
// value head, thread j owning value dim j as in GatedDeltaRuleKernel. A
// chunk's normalised keys, its decay sums and its two L x L coefficient
// tables sit in shared memory; the queries pass through one at a time.
// Thread j keeps its column's S^T k_t, S^T q_t and delta_t for the chunk.
// Launch: grid (v_heads), block (head_dim).
__global__ void GatedDeltaChunkKernel(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                      const float* decay, const float* state_in, float* state_out, float* out,
                                      GatedDeltaRuleParams p) {
  GridStart();
  __shared__ float k[kMaxDeltaRuleChunk][kMaxHeadDim];
  __shared__ float q[kMaxHeadDim];
  __shared__ float akk[kMaxDeltaRuleChunk][kMaxDeltaRuleChunk];
  __shared__ float aqk[kMaxDeltaRuleChunk][kMaxDeltaRuleChunk];
  __shared__ float g[kMaxDeltaRuleChunk], e[kMaxDeltaRuleChunk], w[kMaxDeltaRuleChunk], beta[kMaxDeltaRuleChunk];
  __shared__ float scale;
  const int d = p.head_dim, h = blockIdx.x, j = threadIdx.x, L = p.chunk;
  const HeadIndex head = HeadIndexOf(p, h);
  const int kh = head.kh;
  const int64_t b_at = head.b_at, a_at = head.a_at;
  const float out_scale = 1.0f / sqrtf(static_cast<float>(d));
  float* s = AdoptState(state_in, state_out, h, d, j);
  float sk[kMaxDeltaRuleChunk], sq[kMaxDeltaRuleChunk], delta[kMaxDeltaRuleChunk];
  for (int t0 = 0; t0 < p.n_tokens; t0 += L) {
    // The chunk's keys, each normalised by the thread of its index.
    for (int t = 0; t < L; ++t) k[t][j] = qkv[(t0 + t) * p.qkv_stride + (p.k_heads + kh) * d + j];
    __syncthreads();  // the keys are loaded
    float key_scale[kMaxDeltaRuleChunk];
    for (int t = j; t < L; t += d) {
      float ss = 0.0f;
      for (int i = 0; i < d; ++i) ss += k[t][i] * k[t][i];
      key_scale[t / d] = 1.0f / fmaxf(sqrtf(ss), p.eps);
    }
    if (j == 0) {
      for (int t = 0; t < L; ++t) {
        const int64_t at = (t0 + t) * p.ba_stride;
        const float log_keep = Softplus(a[at + a_at] + dt_bias[h]) * decay[h];
        g[t] = t == 0 ? log_keep : g[t - 1] + log_keep;
        beta[t] = Sigmoid(b[at + b_at]);
      }
      for (int t = 0; t < L; ++t) {
        e[t] = expf(g[t]);
        w[t] = expf(g[L - 1] - g[t]);
      }
    }
    __syncthreads();  // every key's sum of squares is taken
    for (int t = j; t < L; t += d) {
      for (int i = 0; i < d; ++i) k[t][i] *= key_scale[t / d];
    }
    __syncthreads();  // the keys are normalised
    for (int at = j; at < L * L; at += d) {
      const int t = at / L, i = at % L;
      float kk = 0.0f;
      for (int x = 0; x < d; ++x) kk += k[t][x] * k[i][x];
      akk[t][i] = i < t ? expf(g[t] - g[i]) * kk : 0.0f;
    }
    // Column j's S^T k_t, and per query S^T q_t and the row of aqk.
    for (int t = 0; t < L; ++t) {
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += s[i * d + j] * k[t][i];
      sk[t] = acc;
    }
    for (int t = 0; t < L; ++t) {
      q[j] = qkv[(t0 + t) * p.qkv_stride + kh * d + j];
      __syncthreads();  // the query is loaded
      if (j == 0) {
        float ss = 0.0f;
        for (int i = 0; i < d; ++i) ss += q[i] * q[i];
        scale = 1.0f / fmaxf(sqrtf(ss), p.eps);
      }
      __syncthreads();  // its scale is written
      q[j] *= scale;
      __syncthreads();  // the query is normalised
      for (int i = j; i <= t; i += d) {
        float qk = 0.0f;
        for (int x = 0; x < d; ++x) qk += q[x] * k[i][x];
        aqk[t][i] = expf(g[t] - g[i]) * qk;
      }
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += s[i * d + j] * q[i];
      sq[t] = acc;
      __syncthreads();  // the query is read before the next one
    }
    // The deltas and outputs of column j, token by token.
    for (int t = 0; t < L; ++t) {
      float acc = e[t] * sk[t];
      for (int i = 0; i < t; ++i) acc += akk[t][i] * delta[i];
      delta[t] = (qkv[(t0 + t) * p.qkv_stride + (2 * p.k_heads + h) * d + j] - acc) * beta[t];
      acc = e[t] * sq[t];
      for (int i = 0; i <= t; ++i) acc += aqk[t][i] * delta[i];
      out[(static_cast<int64_t>(t0 + t) * p.v_heads + h) * d + j] = acc * out_scale;
    }
    for (int i = 0; i < d; ++i) {
      float acc = s[i * d + j] * e[L - 1];
      for (int t = 0; t < L; ++t) acc += (w[t] * k[t][i]) * delta[t];
      s[i * d + j] = acc;
    }
    __syncthreads();  // the chunk's shared tables are read before the next chunk's
  }
}

__global__ void SplitGatedQueryKernel(const float* qg, float* q, float* gate, int64_t n, int head_dim) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const int64_t head = i / head_dim, e = i % head_dim;
    q[i] = qg[head * 2 * head_dim + e];
    gate[i] = qg[head * 2 * head_dim + head_dim + e];
  }
}

__global__ void SigmoidMulKernel(const float* gate, float* x, int64_t n) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) x[i] *= Sigmoid(gate[i]);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                          const DeltaNetConvParams& p, StreamHandle stream) {
  absl::Status args = CheckDeltaNetConvArgs(x, taps, state_in, state_out, out, p);
  if (!args.ok()) return args;
  OCTO_LAUNCH(DeltaNetConvKernel, ElementwiseBlocks(p.channels), kElementwiseThreads, 0, stream, x, taps, state_in,
              state_out, out, p);
  return absl::OkStatus();
}

absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, StreamHandle stream) {
  absl::Status args = CheckGatedDeltaRuleArgs(qkv, b, a, dt_bias, decay, state_in, state_out, out, p);
  if (!args.ok()) return args;
  // Up to three launches in stream order: the step form's lead tokens, the
  // whole chunks, the step form's tail; the state carried in state_out.
  const DeltaRuleSplit split = SplitDeltaRule(p);
  const int spans[3][2] = {{0, split.lead}, {split.lead, split.whole}, {split.lead + split.whole, 0}};
  const float* from = state_in;
  for (int part = 0; part < 3; ++part) {
    const int t0 = spans[part][0], count = part == 2 ? p.n_tokens - t0 : spans[part][1];
    if (count == 0) continue;
    GatedDeltaRuleParams span = p;
    span.n_tokens = count;
    const float* part_qkv = qkv + t0 * p.qkv_stride;
    const float* part_b = b + t0 * p.ba_stride;
    const float* part_a = a + t0 * p.ba_stride;
    float* part_out = out + static_cast<int64_t>(t0) * p.v_heads * p.head_dim;
    if (part == 1) {
      OCTO_LAUNCH(GatedDeltaChunkKernel, p.v_heads, p.head_dim, 0, stream, part_qkv, part_b, part_a, dt_bias, decay,
                  from, state_out, part_out, span);
    } else {
      OCTO_LAUNCH(GatedDeltaRuleKernel, p.v_heads, p.head_dim, 0, stream, part_qkv, part_b, part_a, dt_bias, decay,
                  from, state_out, part_out, span);
    }
    from = state_out;
  }
  return absl::OkStatus();
}

absl::Status CheckDeltaNetConvRule(const DeltaNetConvCall& conv, const float* b, const float* a, const float* dt_bias,
                                   const float* decay, const float* state_in, float* state_out, float* out,
                                   const GatedDeltaRuleParams& p) {
  const DeltaNetConvParams& cp = conv.p;
  if (absl::Status s = CheckDeltaNetConvArgs(conv.x, conv.taps, conv.state_in, conv.state_out, conv.out, cp); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckGatedDeltaRuleArgs(conv.out, b, a, dt_bias, decay, state_in, state_out, out, p); !s.ok()) {
    return s;
  }
  if (cp.n_tokens != 1 || p.n_tokens != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DeltaNetConvRule: %d and %d tokens (one, a decode step's)", cp.n_tokens, p.n_tokens));
  }
  if (p.qkv_stride != cp.channels || cp.channels != int64_t{2 * p.k_heads + p.v_heads} * p.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DeltaNetConvRule: %d conv channels are not the rule's %d heads of %d (stride %d)", cp.channels,
        2 * p.k_heads + p.v_heads, p.head_dim, p.qkv_stride));
  }
  // Unlike the two launches, a block's conv reads may follow another
  // block's writes: the conv's reads and the rule's writes stay apart, and
  // the conv states too (a block reads a shared channel's state another
  // block writes).
  const int64_t io = cp.channels * 4, state = int64_t{cp.kernel - 1} * cp.channels * 4;
  const int64_t rule_state = int64_t{p.v_heads} * p.head_dim * p.head_dim * 4;
  const int64_t rule_out = int64_t{p.v_heads} * p.head_dim * 4;
  for (const auto& [read, bytes] : {std::pair<const float*, int64_t>{conv.x, io}, {conv.state_in, state}}) {
    if (Overlaps(read, bytes, out, rule_out) || Overlaps(read, bytes, state_out, rule_state) ||
        Overlaps(read, bytes, conv.out, io)) {
      return absl::InvalidArgumentError("DeltaNetConvRule: the conv's x or state_in overlaps what the launch writes");
    }
  }
  if (Overlaps(conv.state_in, state, conv.state_out, state)) {
    return absl::InvalidArgumentError("DeltaNetConvRule: the conv's state_in overlaps its state_out");
  }
  if (Overlaps(conv.state_out, state, state_in, rule_state) || Overlaps(conv.state_out, state, out, rule_out) ||
      Overlaps(conv.state_out, state, state_out, rule_state)) {
    return absl::InvalidArgumentError("DeltaNetConvRule: the conv's state_out overlaps the rule's state or out");
  }
  return absl::OkStatus();
}

absl::Status DeltaNetConvRule(const DeltaNetConvCall& conv, const float* b, const float* a, const float* dt_bias,
                              const float* decay, const float* state_in, float* state_out, float* out,
                              const GatedDeltaRuleParams& p, StreamHandle stream) {
  absl::Status args = CheckDeltaNetConvRule(conv, b, a, dt_bias, decay, state_in, state_out, out, p);
  if (!args.ok()) return args;
  OCTO_LAUNCH(ConvDeltaRuleKernel, p.v_heads, p.head_dim, 0, stream, conv.x, conv.taps, conv.state_in,
              conv.state_out, conv.out, conv.p, b, a, dt_bias, decay, state_in, state_out, out, p);
  return absl::OkStatus();
}

absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads, int head_dim,
                             StreamHandle stream) {
  absl::Status args = CheckSplitGatedQueryArgs(qg, q, gate, n_tokens, n_heads, head_dim);
  if (!args.ok()) return args;
  const int64_t n = int64_t{n_tokens} * n_heads * head_dim;
  OCTO_LAUNCH(SplitGatedQueryKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, qg, q, gate, n, head_dim);
  return absl::OkStatus();
}

absl::Status SigmoidMul(const float* gate, float* x, int64_t n, StreamHandle stream) {
  absl::Status args = CheckSigmoidMulArgs(gate, x, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(SigmoidMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, x, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
