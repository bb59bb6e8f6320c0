// The encoders' pass (bert, nomic-bert): every token of a sequence sees every
// other, so a sequence runs whole in one step, into an empty cache.
//
// Per layer, post-norm as the models were trained:
//   q, k, v = x·Wq (+bq), x·Wk (+bk), x·Wv (+bv)   nomic-bert: one fused matrix
//   nomic-bert: RoPE (NEOX) on q and k
//   a = attention over all the sequence's tokens, then a·Wo (+bo)
//   x = LayerNorm(x + a)                           attn_output_norm
//   f = GELU(x·Wup + bup)·Wdown + bdown            nomic-bert: SwiGLU, no biases
//   x = LayerNorm(x + f)                           layer_output_norm
// The input is LayerNorm(token + token type 0 (+ bert's learned position)),
// summed on the host like the decoders' embedding row, and the output is x
// itself: no final norm, no lm_head.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "daemon/engine/forward.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

absl::Status CheckEncoderBatch(const ModelConfig& c, std::span<const SequenceStep> batch, bool has_hidden) {
  if (batch.empty()) return absl::InvalidArgumentError("empty batch");
  if (!has_hidden) return absl::InvalidArgumentError("an encoder's pass needs a place for its hidden states");
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceStep& step = batch[i];
    const std::string which = absl::StrCat("sequence ", i, " of the batch");
    if (step.kv == nullptr || step.tokens.empty()) return absl::InvalidArgumentError(which + " has no cache or no tokens");
    if (!step.hidden) {
      return absl::InvalidArgumentError(absl::StrCat(which, " asks for logits; ", c.architecture,
                                                     " is an encoder: it gives embeddings only"));
    }
    if (step.kv->size() != 0 || !step.tree_mask.empty() || step.checkpoint_rows != 0) {
      return absl::InvalidArgumentError(
          which + " continues a cache or is a draft step; an encoder takes each sequence whole, in one step");
    }
    if (step.tokens.size() > c.context_length) {
      return absl::InvalidArgumentError(absl::StrCat(which, " has ", step.tokens.size(),
                                                     " tokens; the model's context is ", c.context_length));
    }
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].kv == step.kv) return absl::InvalidArgumentError(which + " shares a cache with another");
    }
    for (int32_t token : step.tokens) {
      if (token < 0 || static_cast<uint32_t>(token) >= c.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", token, " is outside the vocabulary (", c.vocab_size, " tokens)"));
      }
    }
  }
  return absl::OkStatus();
}

// x[row] = token + token type 0 (`type_row`, decoded once a pass) (+
// position), on the host.
absl::Status EmbedInput(const GlobalWeights& g, const WeightMatrix& token_embd, std::span<const float> type_row,
                        int32_t token, int pos, int dim, float* x, std::vector<float>& scratch) {
  OCTO_RETURN_IF_ERROR(cpu::DequantizeRows(token_embd, token, 1, x));
  for (int i = 0; i < dim; ++i) x[i] += type_row[i];
  if (g.position_embd.data != nullptr) {
    OCTO_RETURN_IF_ERROR(cpu::DequantizeRows(g.position_embd, pos, 1, scratch.data()));
    for (int i = 0; i < dim; ++i) x[i] += scratch[i];
  }
  return absl::OkStatus();
}

// One layer over the n rows of s.x (see the top of the file).
absl::Status EncoderLayer(const ModelConfig& c, const GlobalWeights& g, const LayerWeights& lw, uint32_t layer,
                          std::span<const SequenceStep> batch, int n, RunState& s, Backend& backend) {
  const int dim = static_cast<int>(c.dim);
  const int head_dim = static_cast<int>(c.head_dim);
  const int q_dim = static_cast<int>(c.n_heads) * head_dim;
  const int kv_dim = static_cast<int>(c.n_kv_heads) * head_dim;
  const WeightMatrix qkv[] = {lw.wq, lw.wk, lw.wv};
  float* const qkv_out[] = {s.q.data(), s.k.data(), s.v.data()};
  OCTO_RETURN_IF_ERROR(backend.MatMulGroup(qkv, s.x.data(), qkv_out, n));
  if (lw.bq != nullptr) {
    OCTO_RETURN_IF_ERROR(backend.AddBias(s.q.data(), lw.bq, n, q_dim));
    OCTO_RETURN_IF_ERROR(backend.AddBias(s.k.data(), lw.bk, n, kv_dim));
    OCTO_RETURN_IF_ERROR(backend.AddBias(s.v.data(), lw.bv, n, kv_dim));
  }
  if (c.architecture == "nomic-bert") {
    const RopeParams rope{.n_heads = static_cast<int>(c.n_heads), .head_dim = head_dim,
                          .rope_dim = static_cast<int>(c.rope_dim), .freq_base = c.rope_theta,
                          .neox = c.rope_style == RopeStyle::kNeox, .freq_factors = g.rope_freqs};
    OCTO_RETURN_IF_ERROR(backend.RopeQK(s.q.data(), s.k.data(), s.pos.data(), n, rope, static_cast<int>(c.n_kv_heads)));
  }
  for (int b = 0, row = 0; b < static_cast<int>(batch.size()); ++b) {
    const SequenceStep& step = batch[b];
    const int n_new = static_cast<int>(step.tokens.size());
    uint8_t* k_cache = step.kv->keys(static_cast<int>(layer));  // an encoder's layers share one slot
    uint8_t* v_cache = step.kv->values(static_cast<int>(layer));
    OCTO_RETURN_IF_ERROR(backend.KvAppend(s.k.data() + static_cast<size_t>(row) * kv_dim,
                                          s.v.data() + static_cast<size_t>(row) * kv_dim, n_new, kv_dim, k_cache,
                                          v_cache, 0, step.kv->types()));
    const AttentionParams ap{.n_tokens = n_new, .first_pos = 0, .n_heads = static_cast<int>(c.n_heads),
                             .n_kv_heads = static_cast<int>(c.n_kv_heads), .head_dim = head_dim,
                             .scale = 1.0f / std::sqrt(static_cast<float>(head_dim)), .causal = false,
                             .types = step.kv->types()};
    OCTO_RETURN_IF_ERROR(backend.Attention(s.q.data() + static_cast<size_t>(row) * q_dim, k_cache, v_cache,
                                           s.att.data() + static_cast<size_t>(row) * q_dim, ap));
    row += n_new;
  }
  const int64_t n_x = static_cast<int64_t>(n) * dim;
  OCTO_RETURN_IF_ERROR(backend.MatMul(lw.wo, s.att.data(), s.xb.data(), n));
  if (lw.bo != nullptr) OCTO_RETURN_IF_ERROR(backend.AddBias(s.xb.data(), lw.bo, n, dim));
  OCTO_RETURN_IF_ERROR(backend.Add(s.x.data(), s.xb.data(), s.x.data(), n_x));
  OCTO_RETURN_IF_ERROR(backend.LayerNorm(s.x.data(), lw.attn_out_norm, lw.attn_out_norm_b, s.x.data(), n, dim, c.norm_eps));
  if (lw.b_up != nullptr) {  // bert: GELU(x·Wup + bup)·Wdown + bdown
    const int width = static_cast<int>(lw.w_up.rows);
    OCTO_RETURN_IF_ERROR(backend.MatMul(lw.w_up, s.x.data(), s.hb.data(), n));
    OCTO_RETURN_IF_ERROR(backend.AddBias(s.hb.data(), lw.b_up, n, width));
    OCTO_RETURN_IF_ERROR(backend.Gelu(s.hb.data(), s.hb.data(), static_cast<int64_t>(n) * width));
    OCTO_RETURN_IF_ERROR(backend.MatMul(lw.w_down, s.hb.data(), s.xb.data(), n));
    OCTO_RETURN_IF_ERROR(backend.AddBias(s.xb.data(), lw.b_down, n, dim));
  } else {
    OCTO_RETURN_IF_ERROR(SwiGlu(lw.w_gate, lw.w_up, lw.w_down, s.x.data(), s.xb.data(), n, s, backend));
  }
  OCTO_RETURN_IF_ERROR(backend.Add(s.x.data(), s.xb.data(), s.x.data(), n_x));
  return backend.LayerNorm(s.x.data(), lw.layer_out_norm, lw.layer_out_norm_b, s.x.data(), n, dim, c.norm_eps);
}

}  // namespace

absl::Status ForwardEncoder(const ModelView& model, std::span<const SequenceStep> batch, RunState& s,
                            Backend& backend, std::vector<float>* hidden) {
  const ModelConfig& c = *model.config;
  const GlobalWeights& g = *model.globals;
  OCTO_RETURN_IF_ERROR(CheckEncoderBatch(c, batch, hidden != nullptr));
  for (const SequenceStep& step : batch) OCTO_RETURN_IF_ERROR(step.kv->Reserve(static_cast<int>(step.tokens.size())));

  const int dim = static_cast<int>(c.dim);
  OCTO_ASSIGN_OR_RETURN(const int n, SizePass(c, batch, s, backend));

  // The input rows and positions; the rows to output (every token's, or the
  // last one's), in batch order.
  int n_out = 0;
  std::vector<float> type_row(static_cast<size_t>(dim)), scratch(static_cast<size_t>(dim));
  OCTO_RETURN_IF_ERROR(cpu::DequantizeRows(g.token_types, 0, 1, type_row.data()));
  for (int b = 0, row = 0; b < static_cast<int>(batch.size()); ++b) {
    const SequenceStep& step = batch[b];
    for (size_t t = 0; t < step.tokens.size(); ++t, ++row) {
      OCTO_RETURN_IF_ERROR(EmbedInput(g, *model.token_embd, type_row, step.tokens[t], static_cast<int>(t), dim,
                                      &s.x_host[static_cast<size_t>(row) * dim], scratch));
      s.pos_host[row] = static_cast<int32_t>(t);
      if (step.all_logits || t + 1 == step.tokens.size()) s.out_rows[n_out++] = row;
    }
  }
  OCTO_RETURN_IF_ERROR(backend.Upload(s.x.data(), s.x_host.data(), sizeof(float) * n * dim));
  OCTO_RETURN_IF_ERROR(backend.Upload(s.pos.data(), s.pos_host.data(), sizeof(int32_t) * n));
  OCTO_RETURN_IF_ERROR(backend.LayerNorm(s.x.data(), g.embd_norm, g.embd_norm_b, s.x.data(), n, dim, c.norm_eps));

  for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
    OCTO_ASSIGN_OR_RETURN(const LayerWeights* w, model.layers->Acquire(layer));
    const absl::Status step_status = EncoderLayer(c, g, *w, layer, batch, n, s, backend);
    model.layers->Release(layer);
    OCTO_RETURN_IF_ERROR(Annotate(step_status, absl::StrCat("layer ", layer)));
  }

  for (int i = 0; i < n_out; ++i) {
    OCTO_RETURN_IF_ERROR(backend.Copy(s.x_out.data() + static_cast<size_t>(i) * dim,
                                      s.x.data() + static_cast<size_t>(s.out_rows[i]) * dim, sizeof(float) * dim));
  }
  hidden->resize(static_cast<size_t>(n_out) * dim);
  OCTO_RETURN_IF_ERROR(Annotate(backend.Download(hidden->data(), s.x_out.data(), sizeof(float) * hidden->size()),
                                "the pass's hidden states"));
  for (const SequenceStep& step : batch) step.kv->Commit(static_cast<int>(step.tokens.size()), 0);
  return absl::OkStatus();
}

absl::Status ForwardModel(const ModelView& model, std::span<const SequenceStep> batch, RunState& s, Backend& backend,
                          std::vector<float>& logits, std::vector<float>* hidden,
                          std::vector<LogitCandidates>* candidates) {
  absl::Status status;
  backend.BeginPass();
  if (IsEncoderArchitecture(model.config->architecture)) {
    logits.clear();
    if (candidates != nullptr) candidates->clear();
    status = ForwardEncoder(model, batch, s, backend, hidden);
  } else {
    status = ForwardLlama(model, batch, s, backend, logits, hidden, candidates);
  }
  // A failed pass ends before its Download: what the backend kept of it is
  // launched now (as it would have been without graphs).
  if (!status.ok()) backend.Flush().IgnoreError();
  return status;
}

}  // namespace octo
