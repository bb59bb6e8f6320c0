// RunState: the activations of one forward pass over n tokens (the tokens
// of every sequence in the batch, one row each), in backend memory (host for
// the CPU, device for CUDA), plus the few host-side arrays the pass fills
// before uploading them. Reused from pass to pass; Resize grows the
// buffers, it never shrinks them.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/engine/backend.h"
#include "storage/model_config.h"

namespace octo {

// A backend array of T that only grows (its contents are not kept).
template <typename T>
class BackendArray {
 public:
  T* data() const { return buffer_.as<T>(); }
  size_t size() const { return buffer_.size() / sizeof(T); }
  absl::Status Grow(Backend& backend, size_t count) {
    if (count <= size()) return absl::OkStatus();
    buffer_ = BackendBuffer();  // free first: the old and the new need not fit at once
    absl::StatusOr<BackendBuffer> b = backend.Allocate(count * sizeof(T));
    if (!b.ok()) return b.status();
    buffer_ = std::move(*b);
    return absl::OkStatus();
  }

 private:
  BackendBuffer buffer_;
};

struct RunState {
  // Backend memory.
  BackendArray<float> x;      // (n, dim) the residual stream
  BackendArray<float> xb;     // (n, dim) normed x, then each block's output
  BackendArray<float> q;      // (n, n_heads * head_dim)
  BackendArray<float> k;      // (n, n_kv_heads * head_dim)
  BackendArray<float> v;      // (n, n_kv_heads * head_dim)
  BackendArray<float> att;    // (n, n_heads * head_dim) attention output, before wo
  BackendArray<float> hb;     // (n, ffn width) gate, then silu(gate) * up; (n, k, expert width) for experts
  BackendArray<float> hb2;    // (n, ffn width) up; likewise
  BackendArray<int32_t> pos;  // (2n) position of each row in its sequence; decoders: then each row's token id
  BackendArray<uint64_t> tree_mask;  // (n) the tree steps' rows' ancestor masks (SequenceStep)

  // Mixture of experts.
  BackendArray<float> router_logits;   // (n, n_experts)
  BackendArray<int32_t> expert_ids;    // (n, n_experts_used)
  BackendArray<float> expert_weights;  // (n, n_experts_used)
  BackendArray<float> expert_out;      // (n, n_experts_used, dim) each chosen expert's output
  BackendArray<float> shared_out;      // (n, dim) the shared expert's output (qwen2moe)
  BackendArray<float> shared_gate;     // (n) its gate logit
  BackendArray<float> shared_hb;       // (n, shared width) its gate, then silu(gate) * up (grown by the pass)
  BackendArray<float> shared_hb2;      // (n, shared width) its up

  // Hybrid models (forward_deltanet.cc).
  BackendArray<float> qg;       // (n, 2 * q_dim) a gated attention layer's queries and gates
  BackendArray<float> gate;     // (n, q_dim) the gates
  BackendArray<float> dn_qkv;   // (n, conv channels) a DeltaNet layer's input projection
  BackendArray<float> dn_conv;  // (n, conv channels) after its conv and SiLU
  BackendArray<float> dn_z;     // (n, value_dim) the output norm's gate
  BackendArray<float> dn_b;     // (n, v_heads) beta logits; qwen3next: (n, 2 v_heads), b and a grouped
  BackendArray<float> dn_a;     // (n, v_heads) alpha
  BackendArray<float> dn_o;     // (n, value_dim) the delta rule's output

  // The rows whose logits the caller wants: their final-norm activations
  // and logits.
  BackendArray<float> x_out;   // (n_out, dim)
  BackendArray<float> logits;  // (n_out, vocab_size)
  BackendArray<TopLogitsRow> top_logits;  // (n_out) the logits rows reduced (the candidates path)

  // Host memory: filled by the pass, then uploaded.
  std::vector<float> x_host;        // (n, dim) the embedding rows
  std::vector<int32_t> pos_host;    // (2n) as pos
  std::vector<uint64_t> tree_mask_host;  // (n) 0 for a causal step's rows
  std::vector<int32_t> out_rows;    // (n_out) rows of x whose logits are wanted
  std::vector<int> row_groups;      // rows per sequence (Backend::SetRowGroups)
  std::vector<TopLogitsRow> top_logits_host;  // (n_out) top_logits, downloaded

  // Room for n rows (logits: grown by the pass to the rows it outputs).
  // RESOURCE_EXHAUSTED when the
  // backend's memory runs out.
  absl::Status Resize(Backend& backend, const ModelConfig& config, int n);
};

}  // namespace octo
