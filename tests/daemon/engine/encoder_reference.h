// An independent pass for the encoder architectures (bert, nomic-bert), in
// double, written from the architectures' published descriptions and
// llama.cpp's GGUF layout (tensor names, shapes, the fused qkv's row order),
// not from the engine. It reads an F32 GGUF directly, so it shares no code
// with the layer directory or the kernels it checks.
//
//   x = LayerNorm(token + token type 0 (+ bert: learned position))
//   per layer:  q, k, v (+ biases); nomic-bert: NEOX RoPE on q and k
//               a = softmax(q.k / sqrt(head_dim)) v over every token (no mask)
//               x = LayerNorm(x + a Wo (+ bo))
//               bert: f = GELU_tanh(x Wup + bup) Wdown + bdown
//               nomic-bert: f = (SiLU(x Wgate) * x Wup) Wdown
//               x = LayerNorm(x + f)
// LayerNorm(x) = (x - mean) / sqrt(var + eps) * w + b. The embedding pools
// the last layer's states (mean, cls: the first token's, last) and scales
// the result to unit length.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace octo::testing {

struct EncoderReferenceOptions {
  // Deliberately wrong variants, which a comparison must catch:
  bool causal = false;         // each token sees only itself and earlier ones
  bool skip_positions = false; // bert: no learned position embeddings
};

class EncoderReference {
 public:
  // INVALID_ARGUMENT naming a key or tensor that is missing, not F32, or of
  // a shape the hyper-parameters do not predict.
  static absl::StatusOr<std::unique_ptr<EncoderReference>> Load(const std::string& gguf_path,
                                                                const EncoderReferenceOptions& options = {});
  ~EncoderReference();

  // Every token's last-layer state: tokens.size() rows of dim().
  std::vector<std::vector<double>> Hidden(std::span<const int32_t> tokens) const;
  // The pooled, unit-length embedding (pooling: "mean", "cls" or "last").
  std::vector<double> Embedding(std::span<const int32_t> tokens, const std::string& pooling) const;
  int dim() const;

  struct Model;  // hyper-parameters and weights; in the .cc

 private:
  EncoderReference() = default;
  std::unique_ptr<Model> m_;
  EncoderReferenceOptions options_;
};

}  // namespace octo::testing
