#include "daemon/engine/forward.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// A tree step's masks (SequenceStep): each row sees its own row last, and
// nothing past kMaxTreeAttentionRows rows from tree_base.
absl::Status CheckTreeStep(const ModelConfig& c, const SequenceStep& step) {
  if (IsHybridArchitecture(c.architecture)) {
    return absl::InvalidArgumentError("a tree step needs an attention-only model (a hybrid's state follows one path)");
  }
  if (step.tree_mask.size() != step.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the tree step has ", step.tree_mask.size(), " masks for ",
                                                   step.tokens.size(), " tokens"));
  }
  const int first = step.kv->size();
  if (step.tree_base < 0 || step.tree_base > first) {
    return absl::InvalidArgumentError(
        absl::StrCat("tree_base ", step.tree_base, " is outside the cache's ", first, " positions"));
  }
  for (size_t t = 0; t < step.tree_mask.size(); ++t) {
    const int64_t bit = first + static_cast<int64_t>(t) - step.tree_base;
    if (bit >= kMaxTreeAttentionRows) {
      return absl::InvalidArgumentError(absl::StrCat("tree row ", t, " lies ", bit, " rows past tree_base; the limit is ",
                                                     kMaxTreeAttentionRows));
    }
    if ((step.tree_mask[t] >> bit) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tree row ", t, "'s mask must hold its own row (bit ", bit, ") and no later one"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBatch(const ModelConfig& c, std::span<const SequenceStep> batch, bool has_hidden) {
  if (batch.empty()) return absl::InvalidArgumentError("empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceStep& step = batch[i];
    if (step.kv == nullptr || step.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " of the batch has no cache or no tokens"));
    }
    if (step.hidden && !has_hidden) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " asks for hidden states and the pass has no place for them"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].kv == step.kv) {
        return absl::InvalidArgumentError(absl::StrCat("sequences ", j, " and ", i, " of the batch share a cache"));
      }
    }
    for (int32_t token : step.tokens) {
      if (token < 0 || static_cast<uint32_t>(token) >= c.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", token, " is outside the vocabulary (", c.vocab_size, " tokens)"));
      }
    }
    if (step.checkpoint_rows < 0 || static_cast<size_t>(step.checkpoint_rows) > step.tokens.size()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": checkpoint_rows ", step.checkpoint_rows,
                                                     " is outside its ", step.tokens.size(), " tokens"));
    }
    if (!step.tree_mask.empty()) OCTO_RETURN_IF_ERROR(Annotate(CheckTreeStep(c, step), absl::StrCat("sequence ", i)));
  }
  return absl::OkStatus();
}

// x += xb (the mixer's output); then the FFN of norm(x) into xb, which the
// caller adds to x (fused with the next layer's norm where it can be).
absl::Status ResidualAndFfn(const ModelConfig& c, const LayerWeights& lw, uint32_t layer, LayerSource& layers, int n,
                            RunState& s, Backend& backend) {
  const int dim = static_cast<int>(c.dim);
  // The residual and the FFN norm (a hybrid's post_attention_norm), in one op.
  OCTO_RETURN_IF_ERROR(backend.AddRmsNorm(s.x.data(), s.xb.data(), lw.ffn_norm, s.xb.data(), n, dim, c.norm_eps));
  if (c.n_experts > 0) {
    // Routed experts (and the gated shared one, where the model has it).
    OCTO_RETURN_IF_ERROR(MoeFfn(c, lw, layer, layers, n, s, backend));
  } else {
    // gate, up; silu(gate) * up (BitNet: RMS-normed); down.
    OCTO_RETURN_IF_ERROR(
        SwiGlu(lw.w_gate, lw.w_up, lw.w_down, s.xb.data(), s.xb.data(), n, s, backend, lw.ffn_sub_norm, c.norm_eps));
  }
  return absl::OkStatus();
}

static_assert(kLogitCandidates == kTopLogits, "a reduced row holds the candidates the sampler reads");

// The pass's reduced rows (TopLogits), as the sampler reads them.
void ToCandidates(std::span<const TopLogitsRow> rows, size_t vocab, std::vector<LogitCandidates>& out) {
  out.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const TopLogitsRow& row = rows[r];
    LogitCandidates& c = out[r];
    c.top.resize(std::min<size_t>(vocab, kTopLogits));
    for (size_t j = 0; j < c.top.size(); ++j) c.top[j] = {row.top[j].id, row.top[j].logit};
    c.vocab = vocab;
    c.max_logit = row.max_logit;
    c.sum_exp = row.sum_exp;
    c.n_finite = row.n_finite;
    c.bad_id = row.bad_id;
    c.bad_logit = row.bad_logit;
  }
}

}  // namespace

absl::StatusOr<int> SizePass(const ModelConfig& c, std::span<const SequenceStep> batch, RunState& s,
                             Backend& backend) {
  int n = 0;
  for (const SequenceStep& step : batch) n += static_cast<int>(step.tokens.size());
  OCTO_RETURN_IF_ERROR(s.Resize(backend, c, n));
  s.row_groups.clear();
  for (const SequenceStep& step : batch) s.row_groups.push_back(static_cast<int>(step.tokens.size()));
  backend.SetRowGroups(s.row_groups);
  return n;
}

absl::Status SwiGlu(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                    float* out, int n, RunState& s, Backend& backend, const float* sub_norm, float eps) {
  const size_t width = static_cast<size_t>(gate.rows);
  OCTO_RETURN_IF_ERROR(s.hb.Grow(backend, n * width));
  OCTO_RETURN_IF_ERROR(s.hb2.Grow(backend, n * width));
  OCTO_RETURN_IF_ERROR(backend.MatMulGlu(gate, up, in, s.hb.data(), s.hb2.data(), n));
  if (sub_norm != nullptr) {
    OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.hb.data(), sub_norm, s.hb.data(), n, static_cast<int>(width), eps));
  }
  return backend.MatMul(down, s.hb.data(), out, n);
}

absl::Status ForwardLlama(const ModelView& model, std::span<const SequenceStep> batch, RunState& s,
                          Backend& backend, std::vector<float>& logits, std::vector<float>* hidden,
                          std::vector<LogitCandidates>* candidates) {
  const ModelConfig& c = *model.config;
  const GlobalWeights& g = *model.globals;
  OCTO_RETURN_IF_ERROR(CheckBatch(c, batch, hidden != nullptr));
  for (const SequenceStep& step : batch) {
    OCTO_RETURN_IF_ERROR(step.kv->Reserve(static_cast<int>(step.tokens.size())));
    if (step.checkpoint_rows > 0) OCTO_RETURN_IF_ERROR(step.kv->ReserveCheckpoint());
  }

  const int dim = static_cast<int>(c.dim);
  const int head_dim = static_cast<int>(c.head_dim);
  const int q_dim = static_cast<int>(c.n_heads) * head_dim;
  const int kv_dim = static_cast<int>(c.n_kv_heads) * head_dim;
  OCTO_ASSIGN_OR_RETURN(const int n, SizePass(c, batch, s, backend));  // rows: every new token of every sequence
  int n_out = 0;
  std::vector<int>& groups = s.row_groups;

  // Each row's position (and tree mask) and token id, uploaded together; the
  // embedding lookup then runs on the backend. The output rows: the logits
  // steps' first, then the hidden steps' (which are gathered at the end of
  // out_rows, then moved down).
  int n_hidden = 0;
  for (const SequenceStep& step : batch) {
    if (step.hidden) n_hidden += step.all_logits ? static_cast<int>(step.tokens.size()) : 1;
  }
  int n_logits = 0;
  bool any_tree = false;
  for (int b = 0, row = 0, hidden_row = n - n_hidden; b < static_cast<int>(batch.size()); ++b) {
    const SequenceStep& step = batch[b];
    const bool tree = !step.tree_mask.empty();
    any_tree |= tree;
    for (size_t t = 0; t < step.tokens.size(); ++t, ++row) {
      s.pos_host[n + row] = step.tokens[t];
      s.pos_host[row] = tree ? step.tree_base + std::popcount(step.tree_mask[t]) - 1
                             : step.kv->size() + static_cast<int>(t);
      s.tree_mask_host[row] = tree ? step.tree_mask[t] : 0;
      if (step.all_logits || t + 1 == step.tokens.size()) s.out_rows[step.hidden ? hidden_row++ : n_logits++] = row;
    }
  }
  n_out = n_logits + n_hidden;
  std::copy(s.out_rows.begin() + (n - n_hidden), s.out_rows.begin() + n, s.out_rows.begin() + n_logits);
  OCTO_RETURN_IF_ERROR(backend.Upload(s.pos.data(), s.pos_host.data(), sizeof(int32_t) * 2 * n));
  OCTO_RETURN_IF_ERROR(backend.GetRows(g.token_embd, s.pos.data() + n, n, s.x.data()));
  if (any_tree) OCTO_RETURN_IF_ERROR(backend.Upload(s.tree_mask.data(), s.tree_mask_host.data(), sizeof(uint64_t) * n));

  const RopeParams rope_q{.n_heads = static_cast<int>(c.n_heads), .head_dim = head_dim,
                          .rope_dim = static_cast<int>(c.rope_dim), .freq_base = c.rope_theta,
                          .neox = c.rope_style == RopeStyle::kNeox, .freq_factors = g.rope_freqs};

  // Between layers s.xb holds the last layer's FFN output, not yet added to
  // s.x: the add goes with the next layer's attention norm (one op), and
  // after the last layer before the final norm.
  const int64_t n_x = static_cast<int64_t>(n) * dim;
  for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
    // Weights: resident, or streamed in now (may wait for the read or the copy).
    OCTO_ASSIGN_OR_RETURN(const LayerWeights* w, model.layers->Acquire(layer));
    const LayerWeights& lw = *w;
    const bool ffn_pending = layer > 0;
    auto step_status = [&]() -> absl::Status {
      // A MoE layer streamed in two phases: start reading its likely experts
      // (routed from the whole residual), then the attention norm.
      if (model.layers->TwoPhase(layer)) {
        if (ffn_pending) OCTO_RETURN_IF_ERROR(backend.Add(s.x.data(), s.xb.data(), s.x.data(), n_x));
        OCTO_RETURN_IF_ERROR(PrefetchExperts(c, lw, layer, *model.layers, n, s, backend));
        OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.x.data(), lw.attn_norm, s.xb.data(), n, dim, c.norm_eps));
      } else if (ffn_pending) {
        OCTO_RETURN_IF_ERROR(backend.AddRmsNorm(s.x.data(), s.xb.data(), lw.attn_norm, s.xb.data(), n, dim, c.norm_eps));
      } else {
        OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.x.data(), lw.attn_norm, s.xb.data(), n, dim, c.norm_eps));
      }
      if (lw.deltanet) {
        OCTO_RETURN_IF_ERROR(DeltaNetMixer(c, lw, layer, batch, n, s, backend));
        return ResidualAndFfn(c, lw, layer, *model.layers, n, s, backend);
      }
      // q, k, v (+ biases for qwen2); a hybrid's q_proj gives each head's
      // queries and gate (its q bias, if any, goes on the queries after).
      const WeightMatrix qkv[] = {lw.wq, lw.wk, lw.wv};
      float* const qkv_out[] = {lw.gated_q ? s.qg.data() : s.q.data(), s.k.data(), s.v.data()};
      const float* const qkv_bias[] = {lw.gated_q ? nullptr : lw.bq, lw.bk, lw.bv};
      OCTO_RETURN_IF_ERROR(backend.MatMulGroupBias(qkv, qkv_bias, s.xb.data(), qkv_out, n));
      if (lw.gated_q) {
        OCTO_RETURN_IF_ERROR(
            backend.SplitGatedQuery(s.qg.data(), s.q.data(), s.gate.data(), n, static_cast<int>(c.n_heads), head_dim));
        if (lw.bq != nullptr) OCTO_RETURN_IF_ERROR(backend.AddBias(s.q.data(), lw.bq, n, q_dim));
      }
      // Per-head q/k norm (qwen3).
      if (lw.q_norm != nullptr) {
        OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.q.data(), lw.q_norm, s.q.data(), n * c.n_heads, head_dim, c.norm_eps));
      }
      if (lw.k_norm != nullptr) {
        OCTO_RETURN_IF_ERROR(
            backend.RmsNorm(s.k.data(), lw.k_norm, s.k.data(), n * c.n_kv_heads, head_dim, c.norm_eps));
      }
      // RoPE on q and k.
      OCTO_RETURN_IF_ERROR(backend.RopeQK(s.q.data(), s.k.data(), s.pos.data(), n, rope_q, static_cast<int>(c.n_kv_heads)));
      // Append k, v to each sequence's cache (in its types), then attend over it.
      for (int b = 0, row = 0; b < static_cast<int>(batch.size()); ++b) {
        const SequenceStep& step = batch[b];
        const int n_new = static_cast<int>(step.tokens.size());
        const int first_pos = step.kv->size();
        uint8_t* k_cache = step.kv->keys(static_cast<int>(layer));
        uint8_t* v_cache = step.kv->values(static_cast<int>(layer));
        const bool tree = !step.tree_mask.empty();
        // A decode step's position is read from the device's copy of the
        // positions when the ops run (AttentionParams::first_pos_at), so the
        // ops' arguments stay the same from token to token and a recorded
        // step replays (CUDA graphs; the cache's capacity bounds the
        // position). Longer steps pass theirs.
        const int32_t* first_pos_at = !tree && n_new == 1 ? s.pos.data() + row : nullptr;
        const int call_first_pos = first_pos_at != nullptr ? 0 : first_pos;
        OCTO_RETURN_IF_ERROR(backend.KvAppend(s.k.data() + static_cast<size_t>(row) * kv_dim,
                                              s.v.data() + static_cast<size_t>(row) * kv_dim, n_new, kv_dim, k_cache,
                                              v_cache, call_first_pos, step.kv->types(), first_pos_at));
        const AttentionParams ap{.n_tokens = n_new, .first_pos = call_first_pos,
                                 .n_heads = static_cast<int>(c.n_heads),
                                 .n_kv_heads = static_cast<int>(c.n_kv_heads), .head_dim = head_dim,
                                 .scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                                 .tree_mask = tree ? s.tree_mask.data() + row : nullptr,
                                 .tree_base = tree ? step.tree_base : 0,
                                 .types = step.kv->types(),
                                 .first_pos_at = first_pos_at,
                                 .max_ctx = step.kv->capacity()};
        OCTO_RETURN_IF_ERROR(backend.Attention(s.q.data() + static_cast<size_t>(row) * q_dim, k_cache, v_cache,
                                               s.att.data() + static_cast<size_t>(row) * q_dim, ap));
        row += n_new;
      }
      // The hybrid's output gate: each head's output times sigmoid(its gate).
      if (lw.gated_q) {
        OCTO_RETURN_IF_ERROR(backend.SigmoidMul(s.gate.data(), s.att.data(), static_cast<int64_t>(n) * q_dim));
      }
      // BitNet: the attention output RMS-normed before its projection.
      if (lw.attn_sub_norm != nullptr) {
        OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.att.data(), lw.attn_sub_norm, s.att.data(), n, q_dim, c.norm_eps));
      }
      // Output projection, then residual and FFN.
      OCTO_RETURN_IF_ERROR(backend.MatMul(lw.wo, s.att.data(), s.xb.data(), n));
      return ResidualAndFfn(c, lw, layer, *model.layers, n, s, backend);
    }();
    // Done with this layer's weights (a streamed layer's buffer is reused).
    model.layers->Release(layer);
    OCTO_RETURN_IF_ERROR(Annotate(step_status, absl::StrCat("layer ", layer)));
  }

  OCTO_RETURN_IF_ERROR(backend.Add(s.x.data(), s.xb.data(), s.x.data(), n_x));  // the last layer's FFN
  // Final norm and lm_head, for the rows whose logits were asked for.
  for (int i = 0; i < n_out; ++i) {
    OCTO_RETURN_IF_ERROR(backend.Copy(s.x_out.data() + static_cast<size_t>(i) * dim,
                                      s.x.data() + static_cast<size_t>(s.out_rows[i]) * dim, sizeof(float) * dim));
  }
  OCTO_RETURN_IF_ERROR(backend.RmsNorm(s.x_out.data(), g.final_norm, s.x_out.data(), n_out, dim, c.norm_eps));
  // Each logits row whole, or (when every one may be) reduced to its candidates.
  const bool reduce = candidates != nullptr && std::all_of(batch.begin(), batch.end(), [](const SequenceStep& step) {
    return step.hidden || (step.candidates && !step.all_logits);
  });
  logits.resize(reduce ? 0 : static_cast<size_t>(n_logits) * c.vocab_size);
  if (candidates != nullptr) candidates->clear();
  if (n_logits > 0) {
    groups.clear();
    for (const SequenceStep& step : batch) {
      if (!step.hidden) groups.push_back(step.all_logits ? static_cast<int>(step.tokens.size()) : 1);
    }
    backend.SetRowGroups(groups);
    OCTO_RETURN_IF_ERROR(s.logits.Grow(backend, static_cast<size_t>(n_logits) * c.vocab_size));
    OCTO_RETURN_IF_ERROR(backend.MatMul(g.lm_head, s.x_out.data(), s.logits.data(), n_logits));
    if (reduce) {
      OCTO_RETURN_IF_ERROR(s.top_logits.Grow(backend, n_logits));
      OCTO_RETURN_IF_ERROR(
          backend.TopLogits(s.logits.data(), n_logits, static_cast<int>(c.vocab_size), s.top_logits.data()));
      s.top_logits_host.resize(n_logits);
      OCTO_RETURN_IF_ERROR(Annotate(backend.Download(s.top_logits_host.data(), s.top_logits.data(),
                                                     sizeof(TopLogitsRow) * n_logits),
                                    "the pass's logit candidates"));
      ToCandidates(s.top_logits_host, c.vocab_size, *candidates);
    } else {
      OCTO_RETURN_IF_ERROR(Annotate(backend.Download(logits.data(), s.logits.data(), sizeof(float) * logits.size()),
                                    "the pass's logits"));
    }
  }
  if (hidden != nullptr) {
    hidden->resize(static_cast<size_t>(n_hidden) * dim);
    if (n_hidden > 0) {
      OCTO_RETURN_IF_ERROR(Annotate(backend.Download(hidden->data(), s.x_out.data() + static_cast<size_t>(n_logits) * dim,
                                                     sizeof(float) * hidden->size()),
                                    "the pass's hidden states"));
    }
  }

  for (const SequenceStep& step : batch) step.kv->Commit(static_cast<int>(step.tokens.size()), step.checkpoint_rows);
  return absl::OkStatus();
}

}  // namespace octo
