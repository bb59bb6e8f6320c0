// RunState: the activations of one forward pass over n tokens (the tokens
// of every sequence in the batch, one row each). Reused from pass to pass;
// Resize grows the buffers, it never shrinks them.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/model_config.h"

namespace octo {

struct RunState {
  std::vector<float> x;     // (n, dim) the residual stream
  std::vector<float> xb;    // (n, dim) normed x, then each block's output
  std::vector<float> q;     // (n, n_heads * head_dim)
  std::vector<float> k;     // (n, n_kv_heads * head_dim)
  std::vector<float> v;     // (n, n_kv_heads * head_dim)
  std::vector<float> att;   // (n, n_heads * head_dim) attention output, before wo
  std::vector<float> hb;    // (n, ffn width) gate, then silu(gate) * up
  std::vector<float> hb2;   // (n, ffn width) up
  std::vector<int32_t> pos; // (n) position of each row in its sequence

  // Mixture of experts.
  std::vector<float> router_logits;   // (n, n_experts)
  std::vector<int32_t> expert_ids;    // (n, n_experts_used)
  std::vector<float> expert_weights;  // (n, n_experts_used)
  std::vector<float> expert_in;       // (n, dim) the rows routed to one expert
  std::vector<float> expert_out;      // (n, n_experts_used, dim) each chosen expert's output
  std::vector<int32_t> expert_rows;   // (n) which rows went to the current expert
  std::vector<int32_t> expert_slots;  // (n) and as which of their k choices

  // Rows whose logits the caller wants, and their final-norm activations.
  std::vector<int32_t> out_rows;  // (n_out)
  std::vector<float> x_out;       // (n_out, dim)

  void Resize(const ModelConfig& config, int n);
};

}  // namespace octo
