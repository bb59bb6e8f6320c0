// An independent forward pass for checking the engine: llama2.c-style, one
// token at a time, every activation in double, written plainly from the
// architectures' definitions rather than from the engine's code.
//
// It reads the F32 weights of a layer directory straight from the files
// (manifest.json gives each tensor's offset) and covers what the engine
// covers: llama and mistral (RoPE on adjacent pairs), qwen2 (q/k/v biases,
// neox RoPE), qwen3 (per-head q/k RMSNorm), partial rotary (rope_dim <
// head_dim), llama-3.1 frequency factors (rope_freqs.weight), GQA, tied or
// separate lm_head, and mixture-of-experts FFNs: softmax router, top k,
// weights renormalized over the k (llama/mixtral, qwen3moe) or the raw
// softmax probabilities (qwen2moe), plus qwen2moe's shared expert scaled by
// sigmoid(ffn_gate_inp_shexp · x).
//
// Which RoPE pairing and which expert weighting apply is decided here from
// config.architecture, not from the manifest's rope_style, so a config that
// disagrees with its architecture shows up as a disagreement with the engine.
// Optional tensors (biases, q/k norms, the shared expert, rope_freqs) are
// used when the directory has them, as the engine does.
//
// The only roundings are the ones the engine documents as part of its
// numerics, so that a float engine can be compared closely (each can be
// turned off to measure what it is worth):
//   - keys and values are stored as fp16 (daemon/engine/kv_cache.h);
//   - q is rounded to fp16 before q·k (kernels/ops.h, Attention).
// Everything else (norms, matmuls, RoPE angles, softmax, SwiGLU) is double.
//
// Not thread-safe; one object per sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/model_config.h"

namespace octo::testing {

struct ReferenceOptions {
  bool fp16_kv = true;  // store k and v as fp16, as the engine's KV cache does
  bool fp16_q = true;   // round q to fp16 before q·k, as the engine's attention does
  // Scales each value of q, k and v by (1 + perturb * u), u uniform in
  // [-1, 1] from a fixed seed, before the fp16 rounding: perturb ~ 2^-22
  // mimics fp32 arithmetic error, so the change in the logits measures how
  // far a correct float pass can land from this one through values that
  // round to the other fp16 neighbour (the comparison's noise floor).
  double perturb = 0;
  // Changes the manifest's config before use: a test can ask what a pass
  // with the wrong architecture (rope pairing, expert weighting) or the
  // wrong rope_dim would give. nullptr: the config as stored.
  std::function<void(ModelConfig&)> edit_config;
  // Optional tensors to act as if absent, by suffix ("attn_q.bias",
  // "ffn_gate_inp_shexp.weight", "rope_freqs.weight", ...): what a pass that
  // forgot that feature would give.
  std::vector<std::string> ignore_tensors;
};

class ReferenceForward {
 public:
  // Reads manifest.json and every tensor the forward pass needs from the
  // layer directory `dir`. INVALID_ARGUMENT when a needed tensor is missing,
  // is not F32, or has a shape the config does not predict; NOT_FOUND /
  // the manifest reader's errors for an unreadable directory.
  static absl::StatusOr<std::unique_ptr<ReferenceForward>> Load(const std::string& dir,
                                                                const ReferenceOptions& options = {});
  ~ReferenceForward();

  const ModelConfig& config() const { return config_; }
  int position() const { return position_; }  // positions run so far

  // Runs `token` at position position() and returns its logits
  // (vocab_size). INVALID_ARGUMENT for a token outside the vocabulary.
  absl::StatusOr<std::vector<double>> Step(int32_t token);

  // Layer `layer`'s cached keys / values so far: (position(), n_kv_heads *
  // head_dim), after RoPE, fp16-rounded when options.fp16_kv, as the
  // engine's KvCache holds them.
  const std::vector<double>& keys(int layer) const { return key_cache_[layer]; }
  const std::vector<double>& values(int layer) const { return value_cache_[layer]; }

  // MoE only: the smallest gap seen so far between the k-th and (k+1)-th
  // largest router probability of a token (infinity when k == n_experts or
  // for a dense model). A float pass may pick another expert when this is
  // within its rounding (~1e-6), which is then no bug.
  double min_router_margin() const { return min_router_margin_; }

 private:
  struct Weights;
  ReferenceForward() = default;

  ModelConfig config_;
  ReferenceOptions options_;
  std::unique_ptr<Weights> w_;
  int position_ = 0;
  // Per layer: keys and values of every position so far, (position, n_kv_heads * head_dim).
  std::vector<std::vector<double>> key_cache_;
  std::vector<std::vector<double>> value_cache_;
  double min_router_margin_ = std::numeric_limits<double>::infinity();
  std::mt19937_64 perturb_rng_{1};
};

}  // namespace octo::testing
