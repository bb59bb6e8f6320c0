// ModelConfig: the hyper-parameters of a model, read from GGUF metadata
// (at decompose time) or from manifest.json (at load time), and checked the
// same way in both cases.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "storage/gguf.h"

namespace octo {

// How RoPE pairs dimensions: kNormal rotates adjacent pairs (llama, mistral);
// kNeox rotates dimension i with i + rope_dim/2 (qwen2, qwen3).
enum class RopeStyle { kNormal, kNeox };

// How an embedding is made from a sequence's final hidden states
// (<arch>.pooling_type in GGUF: 1 mean, 2 cls, 3 last, 4 rank). A model
// that states none (or 0, "none") gets its architecture's default:
// kLast for the decoder families (as Qwen3-Embedding-style models need),
// kMean for the encoders (bert, nomic-bert: sentence-transformers' default).
// kRank marks a reranker, which gives scores, not embeddings.
enum class Pooling { kMean, kCls, kLast, kRank };
const char* PoolingName(Pooling pooling);  // "mean", "cls", "last", "rank"
Pooling DefaultPooling(absl::string_view architecture);

struct ModelConfig {
  std::string architecture;    // general.architecture: llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe,
                               // qwen3next, qwen35, qwen35moe, bitnet (llama with sub-norms, NEOX rope);
                               // the encoders bert and nomic-bert (IsEncoderArchitecture)
  std::string name;            // general.name, informational
  uint32_t dim = 0;            // embedding_length
  uint32_t hidden_dim = 0;     // feed_forward_length (dense FFN width)
  uint32_t n_layers = 0;       // block_count
  uint32_t n_heads = 0;        // attention.head_count
  uint32_t n_kv_heads = 0;     // attention.head_count_kv (GQA when < n_heads)
  uint32_t head_dim = 0;       // attention.key_length, default dim / n_heads
  uint32_t vocab_size = 0;     // rows of token_embd
  uint32_t context_length = 0; // trained context
  uint32_t rope_dim = 0;       // rope.dimension_count, default head_dim
  float rope_theta = 10000.f;  // rope.freq_base
  RopeStyle rope_style = RopeStyle::kNormal;
  float norm_eps = 1e-5f;      // attention.layer_norm_rms_epsilon; an encoder's attention.layer_norm_epsilon
  uint32_t n_experts = 0;      // expert_count, 0 for dense models
  uint32_t n_experts_used = 0; // expert_used_count
  uint32_t expert_hidden_dim = 0;  // expert_feed_forward_length, default hidden_dim
  bool tied_embeddings = false;    // no output.weight: the lm_head is token_embd
  // Hybrid gated-DeltaNet models (qwen3next, qwen35, qwen35moe); 0 for the
  // others. Layer l is a gated attention layer when (l + 1) %
  // full_attention_interval == 0, a gated DeltaNet layer otherwise.
  uint32_t full_attention_interval = 0;  // full_attention_interval
  uint32_t ssm_conv_kernel = 0;          // ssm.conv_kernel: the causal conv1d's width
  uint32_t ssm_head_dim = 0;             // ssm.state_size: a DeltaNet key / value head's width
  uint32_t ssm_k_heads = 0;              // ssm.group_count: query/key heads
  uint32_t ssm_v_heads = 0;              // ssm.time_step_rank: value heads
  Pooling pooling = Pooling::kLast;      // pooling_type, else DefaultPooling(architecture)
};

// bert and nomic-bert: bidirectional encoders that embed and do not
// generate (forward.h, ForwardEncoder). Their layers are post-norm
// (LayerNorm with bias after each residual add); bert adds learned absolute
// position embeddings to the input and has biases and a GELU FFN, nomic-bert
// rotates q and k (NEOX) and has a fused qkv and a SwiGLU FFN. Both add the
// token-type embedding of type 0 and LayerNorm the input.
bool IsEncoderArchitecture(absl::string_view arch);

// qwen3next, qwen35 and qwen35moe: gated DeltaNet layers between gated
// attention layers.
bool IsHybridArchitecture(absl::string_view arch);
// Whether layer `layer` of `config` is a gated DeltaNet layer.
bool IsDeltaNetLayer(const ModelConfig& config, uint32_t layer);
// The most conv taps and DeltaNet head width Octo takes (real models: 4, 128).
inline constexpr uint32_t kMaxConvKernel = 16;
inline constexpr uint32_t kMaxDeltaNetHeadDim = 256;

// The architectures whose tensors and hyper-parameters Octo understands.
bool IsSupportedArchitecture(absl::string_view arch);

// Reads `<arch>.*` keys and the tensor shapes (vocab size, tied embeddings).
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

// Checks internal consistency: non-zero sizes, n_heads % n_kv_heads == 0,
// experts_used <= experts, rope_dim <= head_dim, finite eps/theta, limits.
absl::Status ValidateModelConfig(const ModelConfig& config);

nlohmann::json ModelConfigToJson(const ModelConfig& config);
// Parses and validates; INVALID_ARGUMENT naming the field on any defect.
absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& j);

}  // namespace octo
