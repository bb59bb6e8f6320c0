// The forward pass of the llama family: llama 1/2/3, mistral, qwen2 (q/k/v
// biases), qwen3 (per-head q/k RMSNorm) and their mixture-of-experts forms
// (llama/mixtral, qwen2moe with its shared expert, qwen3moe); and of the
// hybrid Qwen models (qwen3next, qwen35, qwen35moe), whose gated DeltaNet
// layers replace attention in three layers of four and whose attention
// layers gate each head's output by sigmoid(gate) from q_proj. The
// encoders (bert, nomic-bert) have their own pass, ForwardEncoder.
//
// One pass takes a batch of sequences through every layer at once: a
// sequence contributes one token (decode) or many (prefill, or a chunk of a
// long prompt), so one walk over the weights -- one read of each streamed
// layer -- serves all of them. Each token's logits are the same bits
// whether it runs alone or in a batch, resident or streamed (the kernels'
// determinism contract in kernels/ops.h).
//
// The pass runs on a Backend (backend.h) and does not know which: the CPU
// or a CUDA device. The layer weights, the caches and the RunState are that
// backend's memory, the token embedding too: a pass uploads its token ids
// with the positions (a few bytes per row) and looks the rows up there
// (GetRows). The encoders sum their input rows on the host (ModelView's
// host copy).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "daemon/engine/backend.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/layer_source.h"
#include "daemon/engine/layer_weights.h"
#include "daemon/engine/run_state.h"
#include "daemon/sampling/logit_candidates.h"
#include "kernels/ops.h"
#include "storage/model_config.h"

namespace octo {

// A model as the forward pass needs it. Not owned.
struct ModelView {
  const ModelConfig* config = nullptr;
  const WeightMatrix* token_embd = nullptr;  // host memory (the encoders' input; decoders use globals->token_embd)
  const GlobalWeights* globals = nullptr;    // token_embd, lm_head, final_norm, rope_freqs: backend memory
  LayerSource* layers = nullptr;             // backend memory
};

// One sequence's share of a batch.
struct SequenceStep {
  KvCache* kv = nullptr;              // its cache; the new tokens go at positions kv->size()...
  std::span<const int32_t> tokens;    // the new tokens, at least one
  bool all_logits = false;            // logits for every new token (perplexity, drafts), else the last only
  // An embedding's step: its rows (every new token's when all_logits, else
  // the last's) give final-normed hidden states, not logits.
  bool hidden = false;
  // A draft tree's step (speculative decoding, attention-only models). Row t
  // is still written at cache row kv->size() + t, but it sees only the rows
  // [0, tree_base) and tree_base + j for every set bit j of tree_mask[t]
  // (its ancestors and itself), and sits at position tree_base +
  // popcount(tree_mask[t]) - 1. Its own row's bit must be its highest, and
  // at most kMaxTreeAttentionRows rows may follow tree_base. Empty: causal.
  std::span<const uint64_t> tree_mask = {};
  int tree_base = 0;
  // Hybrid models: > 0 saves the recurrent state after the step's first
  // checkpoint_rows rows as the cache's checkpoint (KvCache::Commit), so a
  // verification can roll rejected draft tokens back; such a step runs the
  // delta rule token by token, as decoding those tokens one by one would.
  int checkpoint_rows = 0;
  // The caller can take this step's logits row reduced to its candidates
  // (daemon/sampling/logit_candidates.h). Ignored for all_logits.
  bool candidates = false;
};

// Runs `batch` through the model. On success each sequence's cache holds the
// new positions, and `logits` holds (n_out, vocab_size) rows: for each step
// in order, one row per new token when all_logits, else one for its last.
// The steps marked `hidden` add no logits rows: their rows go, in the same
// order, to `hidden` as (rows, dim) final-normed hidden states.
// With `candidates`, when every step that has logits rows is marked
// `candidates` (and none all_logits), only each row's reduction
// (Backend::TopLogits) comes back: `candidates` gets one per logits row in
// the same order and `logits` is left empty. Otherwise `logits` holds them
// whole and `candidates` is emptied.
// Errors (nothing is committed to any cache then):
//   INVALID_ARGUMENT  an empty step, a null cache, a token id out of range,
//                     a hidden step with no `hidden` to write to;
//   RESOURCE_EXHAUSTED a sequence past its cache's max_positions;
//   whatever the LayerSource returns (DATA_LOSS for a damaged layer, ...).
absl::Status ForwardLlama(const ModelView& model, std::span<const SequenceStep> batch, RunState& s,
                          Backend& backend, std::vector<float>& logits, std::vector<float>* hidden = nullptr,
                          std::vector<LogitCandidates>* candidates = nullptr);

// The pass of the encoders, bert and nomic-bert (forward_encoder.cc). Every
// step must be `hidden` and bring a whole sequence into an empty cache (a
// token sees every token of its sequence): its rows (every token's when
// all_logits, else the last's) go to `hidden` as (rows, dim) final hidden
// states (an encoder's last layer ends in its LayerNorm). INVALID_ARGUMENT
// for a logits step, a cache already holding positions, a tree or
// checkpoint step, or a sequence longer than the model's context; the rest
// as ForwardLlama.
absl::Status ForwardEncoder(const ModelView& model, std::span<const SequenceStep> batch, RunState& s,
                            Backend& backend, std::vector<float>* hidden);

// The pass for the model's architecture: ForwardEncoder (no logits) or
// ForwardLlama.
absl::Status ForwardModel(const ModelView& model, std::span<const SequenceStep> batch, RunState& s, Backend& backend,
                          std::vector<float>& logits, std::vector<float>* hidden = nullptr,
                          std::vector<LogitCandidates>* candidates = nullptr);

// Both passes' set-up: s sized for the batch's rows (every new token of
// every sequence), and the backend told each sequence's rows
// (Backend::SetRowGroups). Returns the row count.
absl::StatusOr<int> SizePass(const ModelConfig& c, std::span<const SequenceStep> batch, RunState& s,
                             Backend& backend);

// The dense FFN down(silu(gate · in) * (up · in)) for n rows of `in`
// (n, dim) into `out` (n, dim); s.hb/s.hb2 hold (n, width). With
// `sub_norm` (BitNet's ffn_sub_norm), the product is RMS-normed (eps)
// before down.
absl::Status SwiGlu(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                    float* out, int n, RunState& s, Backend& backend, const float* sub_norm = nullptr,
                    float eps = 0.0f);

// The mixture-of-experts FFN of one layer (forward_moe.cc): for the n rows of
// s.xb, route, run the chosen experts (and the shared one), and write the
// weighted sum to s.xb.
// A two-phase layer (layers.TwoPhase) gets the experts its rows route to
// from `layers` before they are used.
absl::Status MoeFfn(const ModelConfig& c, const LayerWeights& w, uint32_t layer, LayerSource& layers, int n,
                    RunState& s, Backend& backend);

// A hybrid model's gated DeltaNet layer (forward_deltanet.cc): mixes the n
// rows of s.xb (normed input) into s.xb, reading each sequence's committed
// recurrent state and writing the next one.
absl::Status DeltaNetMixer(const ModelConfig& c, const LayerWeights& w, uint32_t layer,
                           std::span<const SequenceStep> batch, int n, RunState& s, Backend& backend);

// A two-phase layer, before its attention: routes the layer's input x
// through its own FFN norm and router, and asks `layers` for those experts
// (a prediction of the routing to come after attention, so their reads run
// while attention computes). Leaves s.x as it was.
absl::Status PrefetchExperts(const ModelConfig& c, const LayerWeights& w, uint32_t layer, LayerSource& layers, int n,
                             RunState& s, Backend& backend);

}  // namespace octo
