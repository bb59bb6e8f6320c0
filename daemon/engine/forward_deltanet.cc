// The gated DeltaNet token mixer of the hybrid Qwen models (qwen3next,
// qwen35, qwen35moe): for the n rows of s.xb (the normed input), the
// projections for every row at once, then per sequence the causal conv and
// the gated delta rule over its new tokens in order, reading the state its
// cache committed and writing the next one (KvCache::Commit adopts it), then
// the gated RMSNorm and the output projection into s.xb.
//
// The delta rule runs in its chunked form over every aligned chunk of
// kMaxDeltaRuleChunk positions a step holds whole (prefill), and token by
// token otherwise (decode, and a prompt's ragged ends); kernels/ops.h. The
// bits depend on the positions and on which aligned chunks one step holds:
// a prompt split at multiples of the chunk (as the default --prefill-chunk
// of 512 splits it) gives the bits of one step; any split agrees to float
// rounding.
#include "absl/strings/str_cat.h"
#include "daemon/engine/forward.h"
#include "storage/status_macros.h"

namespace octo {

absl::Status DeltaNetMixer(const ModelConfig& c, const LayerWeights& w, uint32_t layer,
                           std::span<const SequenceStep> batch, int n, RunState& s, Backend& backend) {
  const int hd = static_cast<int>(c.ssm_head_dim);
  const int k_heads = static_cast<int>(c.ssm_k_heads), v_heads = static_cast<int>(c.ssm_v_heads);
  const int value_dim = v_heads * hd;
  const int channels = 2 * k_heads * hd + value_dim;
  const bool fused_ba = w.dn_ba.data != nullptr;  // qwen3next
  // Projections: the conv channels, the norm's gate z, beta and alpha.
  if (fused_ba) {
    const WeightMatrix ws[] = {w.dn_qkv, w.dn_z, w.dn_ba};
    float* const outs[] = {s.dn_qkv.data(), s.dn_z.data(), s.dn_b.data()};
    OCTO_RETURN_IF_ERROR(backend.MatMulGroup(ws, s.xb.data(), outs, n));
  } else {
    const WeightMatrix ws[] = {w.dn_qkv, w.dn_z, w.dn_beta, w.dn_alpha};
    float* const outs[] = {s.dn_qkv.data(), s.dn_z.data(), s.dn_b.data(), s.dn_a.data()};
    OCTO_RETURN_IF_ERROR(backend.MatMulGroup(ws, s.xb.data(), outs, n));
  }
  const int ba_stride = fused_ba ? 2 * v_heads : v_heads;
  // Per sequence: conv then the delta rule, from its committed state. A
  // step with checkpoint rows runs in two calls, token by token, and the
  // state between them is saved as the cache's checkpoint.
  for (int b = 0, row = 0; b < static_cast<int>(batch.size()); ++b) {
    KvCache& kv = *batch[b].kv;
    const int n_new = static_cast<int>(batch[b].tokens.size());
    const int checkpoint = batch[b].checkpoint_rows;
    const int splits[] = {checkpoint > 0 ? checkpoint : n_new, n_new};
    for (int part = 0, from = 0; part < 2 && from < n_new; from = splits[part++]) {
      const int n_part = splits[part] - from;
      const size_t at = static_cast<size_t>(row + from);
      // The first call reads the committed state; a second continues the one it wrote.
      const bool next_in = from > 0;
      const int l = static_cast<int>(layer);
      const DeltaNetConvParams conv{.n_tokens = n_part, .channels = channels,
                                    .kernel = static_cast<int>(c.ssm_conv_kernel)};
      OCTO_RETURN_IF_ERROR(backend.DeltaNetConv(s.dn_qkv.data() + at * channels, w.dn_conv, kv.conv_state(l, next_in),
                                                kv.conv_state(l, true), s.dn_conv.data() + at * channels, conv));
      const GatedDeltaRuleParams rule{.n_tokens = n_part,
                                      .k_heads = k_heads,
                                      .v_heads = v_heads,
                                      .head_dim = hd,
                                      .qkv_stride = channels,
                                      .ba_stride = ba_stride,
                                      .grouped_heads = fused_ba,
                                      .grouped_ba = fused_ba,
                                      .eps = c.norm_eps,
                                      .chunk = checkpoint > 0 ? 0 : kMaxDeltaRuleChunk,
                                      // One token takes the step form wherever it sits (SplitDeltaRule):
                                      // position 0 keeps a decode step's arguments the same from token
                                      // to token (a replayed CUDA graph).
                                      .first_position = n_part == 1 ? 0 : static_cast<int64_t>(kv.size()) + from};
      const float* beta = s.dn_b.data() + at * ba_stride;
      const float* alpha = fused_ba ? beta : s.dn_a.data() + at * v_heads;
      OCTO_RETURN_IF_ERROR(backend.GatedDeltaRule(s.dn_conv.data() + at * channels, beta, alpha, w.dn_dt_bias,
                                                  w.dn_decay, kv.delta_state(l, next_in), kv.delta_state(l, true),
                                                  s.dn_o.data() + at * value_dim, rule));
      if (part == 0 && checkpoint > 0) OCTO_RETURN_IF_ERROR(kv.CheckpointLayer(l));
    }
    row += n_new;
  }
  // RMSNorm per value head, gated by silu(z); then the output projection.
  OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.dn_o.data(), w.dn_norm, s.dn_o.data(), n * v_heads, hd, c.norm_eps));
  OCTO_RETURN_IF_ERROR(backend.SiluMul(s.dn_z.data(), s.dn_o.data(), s.dn_o.data(), static_cast<int64_t>(n) * value_dim));
  return backend.MatMul(w.dn_out, s.dn_o.data(), s.xb.data(), n);
}

}  // namespace octo
