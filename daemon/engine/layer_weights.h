// The weights of a model as the forward pass sees them: views into the bytes
// of the layer-directory files, in their GGUF block encoding. Nothing here
// owns memory; a view is valid while the buffer holding its file is (see
// weight_store.h for who holds which buffer and for how long).
//
// Shapes are written (rows, cols) as the math uses them: a WeightMatrix of
// (n_out, n_in) maps an n_in vector to an n_out one (ggml's shape [n_in, n_out]).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/ops.h"
#include "storage/manifest.h"
#include "storage/model_config.h"

namespace octo {

struct LayerWeights {
  const float* attn_norm = nullptr;  // (dim)
  WeightMatrix wq;                   // (n_heads * head_dim, dim)
  WeightMatrix wk;                   // (n_kv_heads * head_dim, dim)
  WeightMatrix wv;                   // (n_kv_heads * head_dim, dim)
  WeightMatrix wo;                   // (dim, n_heads * head_dim)
  const float* bq = nullptr;         // (n_heads * head_dim)     qwen2 biases, else null
  const float* bk = nullptr;         // (n_kv_heads * head_dim)
  const float* bv = nullptr;         // (n_kv_heads * head_dim)
  const float* q_norm = nullptr;     // (head_dim)  qwen3 per-head RMSNorm, else null
  const float* k_norm = nullptr;     // (head_dim)
  const float* ffn_norm = nullptr;   // (dim)
  // BitNet's sub-norms, else null: an RMSNorm of the attention output before
  // wo, and of silu(gate) * up before w_down.
  const float* attn_sub_norm = nullptr;  // (n_heads * head_dim)
  const float* ffn_sub_norm = nullptr;   // (hidden_dim)

  // Dense FFN (n_experts == 0).
  WeightMatrix w_gate;  // (hidden_dim, dim)
  WeightMatrix w_up;    // (hidden_dim, dim)
  WeightMatrix w_down;  // (dim, hidden_dim)

  // Mixture of experts (n_experts > 0). The expert tensors stack the experts:
  // ExpertSlice(gate_exps, e) is expert e's (expert_hidden_dim, dim) matrix.
  WeightMatrix router;     // (n_experts, dim)
  WeightMatrix gate_exps;  // (n_experts * expert_hidden_dim, dim)
  WeightMatrix up_exps;    // (n_experts * expert_hidden_dim, dim)
  WeightMatrix down_exps;  // (n_experts * dim, expert_hidden_dim)

  // qwen2moe's shared expert, run for every token beside the routed ones and
  // scaled by sigmoid(shexp_gate_inp · x). data == nullptr when absent.
  WeightMatrix shexp_gate_inp;  // (1, dim)
  WeightMatrix shexp_gate;      // (shexp_hidden_dim, dim)
  WeightMatrix shexp_up;        // (shexp_hidden_dim, dim)
  WeightMatrix shexp_down;      // (dim, shexp_hidden_dim)

  // Hybrid models (qwen3next, qwen35, qwen35moe). ffn_norm is their
  // post_attention_norm. An attention layer's wq is (2 * n_heads * head_dim,
  // dim): each head's queries, then its output gate (gated_q).
  bool gated_q = false;
  // A gated DeltaNet layer (no wq/wk/wv/wo): key_dim = ssm_k_heads *
  // ssm_head_dim, value_dim = ssm_v_heads * ssm_head_dim.
  bool deltanet = false;
  WeightMatrix dn_qkv;               // attn_qkv (2 * key_dim + value_dim, dim): conv channels [q | k | v]
  WeightMatrix dn_z;                 // attn_gate (value_dim, dim): the output norm's gate
  WeightMatrix dn_beta;              // ssm_beta (ssm_v_heads, dim); null for qwen3next
  WeightMatrix dn_alpha;             // ssm_alpha (ssm_v_heads, dim); null for qwen3next
  WeightMatrix dn_ba;                // qwen3next's ssm_ba (2 * ssm_v_heads, dim), grouped per key head
  const float* dn_conv = nullptr;    // ssm_conv1d (2 * key_dim + value_dim, conv_kernel)
  const float* dn_dt_bias = nullptr; // ssm_dt.bias (ssm_v_heads)
  const float* dn_decay = nullptr;   // ssm_a (ssm_v_heads): -exp(A_log)
  const float* dn_norm = nullptr;    // ssm_norm (ssm_head_dim)
  WeightMatrix dn_out;               // ssm_out (dim, value_dim)

  // Encoders (bert, nomic-bert): post-norm LayerNorms with biases; no
  // attn_norm or ffn_norm. nomic-bert's fused attn_qkv is bound as wq, wk
  // and wv over its three row ranges. bert has the biases and a GELU FFN
  // (w_up, w_down only); nomic-bert a SwiGLU FFN without biases.
  bool encoder = false;
  const float* bo = nullptr;                // (dim) bert
  const float* attn_out_norm = nullptr;     // (dim) after x + attention
  const float* attn_out_norm_b = nullptr;   // (dim)
  const float* b_up = nullptr;              // (hidden_dim) bert
  const float* b_down = nullptr;            // (dim) bert
  const float* layer_out_norm = nullptr;    // (dim) after x + FFN
  const float* layer_out_norm_b = nullptr;  // (dim)
};

// Whole-model tensors: always resident.
struct GlobalWeights {
  WeightMatrix token_embd;           // (vocab_size, dim); backend memory but an encoder's (host; see ModelView)
  WeightMatrix lm_head;              // (vocab_size, dim); token_embd when tied; unused by encoders
  const float* final_norm = nullptr; // (dim); null for encoders
  const float* rope_freqs = nullptr; // (rope_dim / 2) llama-3.1 frequency factors, or null
  // Encoders: the input's LayerNorm (token_embd_norm), else null.
  const float* embd_norm = nullptr;    // (dim)
  const float* embd_norm_b = nullptr;  // (dim)
  // Encoders, host memory like token_embd: bert's learned positions
  // (context_length rows, or more) and the token-type rows (row 0 is used).
  WeightMatrix position_embd;  // (n_positions, dim); data null for nomic-bert
  WeightMatrix token_types;    // (n_types, dim)
};

// Expert e's rows of a stacked expert matrix of `n_experts` experts.
WeightMatrix ExpertSlice(const WeightMatrix& stacked, int n_experts, int expert);

// Binds the views of layer `file` (its manifest entry) over `bytes`, the
// whole file as read from disk (header page included). Checks every tensor
// the config needs is there with a usable type: norms and biases must be F32.
// INVALID_ARGUMENT naming the tensor otherwise.
absl::StatusOr<LayerWeights> BindLayerWeights(const ModelConfig& config, const ManifestFile& file,
                                              const uint8_t* bytes);

// A view of one tensor of a file: the matrix view (any type), or an F32 vector.
absl::StatusOr<WeightMatrix> BindMatrix(const ManifestFile& file, const uint8_t* bytes,
                                        absl::string_view name);
absl::StatusOr<const float*> BindF32(const ManifestFile& file, const uint8_t* bytes,
                                     absl::string_view name);

}  // namespace octo
