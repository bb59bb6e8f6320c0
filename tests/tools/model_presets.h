// Model shapes for the generator: real models' hyper-parameters (so benchmarks
// see real tensor sizes) and tiny ones for tests, plus a generated tokenizer
// vocabulary that llama.cpp-style tokenizers can actually run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo::testing {

// Hyper-parameters in llama.cpp's vocabulary (the GGUF "<arch>.*" keys).
struct ModelShape {
  std::string name;          // preset name, written as general.name
  std::string architecture;  // "llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe", a hybrid (IsHybrid), "bert", "nomic-bert"
  uint32_t dim = 0;          // embedding_length
  uint32_t hidden_dim = 0;   // feed_forward_length (per expert for MoE)
  uint32_t n_layers = 0;
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;  // n_heads * head_dim need not equal dim (qwen3)
  uint32_t vocab_size = 0;
  uint32_t context_length = 0;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  uint32_t n_experts = 0;       // 0: dense FFN
  uint32_t n_experts_used = 0;  // experts per token when n_experts > 0
  uint32_t shared_expert_dim = 0;  // the gated shared expert (ffn_*_shexp) width; 0: none
  // Hybrid architectures (qwen3next, qwen35, qwen35moe): gated DeltaNet
  // layers, with a gated attention layer (q_proj yields queries and a
  // per-head output gate) wherever (layer + 1) % full_attention_interval == 0.
  uint32_t full_attention_interval = 0;
  uint32_t rope_dim = 0;          // rotated dims per head (partial rotary); 0: head_dim
  uint32_t ssm_conv_kernel = 0;   // ssm.conv_kernel: the causal conv1d's width
  uint32_t ssm_head_dim = 0;      // ssm.state_size: a DeltaNet key and value head's width
  uint32_t ssm_k_heads = 0;       // ssm.group_count: query/key heads
  uint32_t ssm_v_heads = 0;       // ssm.time_step_rank: value heads (a multiple of ssm_k_heads)
  bool tied_embeddings = false;  // no output.weight; token_embd is reused
  uint32_t pooling_type = 0;     // <arch>.pooling_type (1 mean, 2 cls, 3 last, 4 rank); 0: not written
  bool qkv_bias = false;         // attn_{q,k,v}.bias (qwen2)
  bool qk_norm = false;          // attn_{q,k}_norm.weight (qwen3)
  std::string tokenizer_model;   // "llama" (SentencePiece), "gpt2" (byte-level BPE) or "bert" (WordPiece)
  std::string tokenizer_pre;     // tokenizer.ggml.pre for gpt2: "llama-bpe", "qwen2"
};

// Flags applied on top of a preset.
struct ShapeOverrides {
  std::optional<uint32_t> n_layers;
  std::optional<uint32_t> vocab_size;
  std::optional<uint32_t> context_length;
};

// qwen3next, qwen35 and qwen35moe: DeltaNet layers between attention layers.
bool IsHybrid(const ModelShape& shape);
// Whether layer `layer` of a hybrid shape is a (gated) attention layer.
bool IsAttentionLayer(const ModelShape& shape, uint32_t layer);
// qwen35's rope.dimension_sections: rope_dim / 2 rotated pairs split as
// Qwen3.5's mrope_section is ([11, 11, 10] for 32 pairs), then a 0.
std::vector<int32_t> RopeSections(const ModelShape& shape);

// Every preset, in a fixed order (real models first, then the tiny ones).
const std::vector<ModelShape>& AllPresets();

// The preset called `name`; NOT_FOUND listing the known names.
absl::StatusOr<ModelShape> FindPreset(absl::string_view name);

// `shape` with `overrides` applied, then validated (ValidateShape).
absl::StatusOr<ModelShape> ApplyOverrides(ModelShape shape, const ShapeOverrides& overrides);

// INVALID_ARGUMENT naming the field when a count is zero, n_heads is not a
// multiple of n_kv_heads, the expert counts disagree, the architecture or
// tokenizer is unknown, or the vocabulary is too small for the tokenizer
// (MinVocabSize).
absl::Status ValidateShape(const ModelShape& shape);

// One line describing the shape, for logs.
std::string DescribeShape(const ModelShape& shape);

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenByte = 6,
};

// A generated tokenizer, ready for the tokenizer.ggml.* keys.
//  SPM ("llama"): <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then
//    single characters, then pieces made by joining two earlier pieces (the
//    "▁" word marker only ever at the start); scores strictly descending.
//  BPE ("gpt2"): the 256 byte-level tokens (GPT-2's byte -> unicode map), then
//    tokens each the join of two earlier tokens with merges[i] = "a b" for
//    the i-th of them (so merge ranks follow token order), then the control
//    tokens. scores is empty.
//  WordPiece ("bert"): [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4; control but
//    [UNK], which is unknown), then each of a-z, 0-9 and ASCII punctuation as
//    a word start "▁c" and as a bare continuation "c", then common English
//    words ("▁the") and suffixes ("ing"), Greek letters and CJK ideographs,
//    then joins of an earlier token and a lowercase continuation. All
//    lowercase, as WordPiece lowercases its input. bos is [CLS], eos and sep
//    [SEP]; add_bos and add_eos are set. scores and merges are empty.
// All tokens are unique, valid UTF-8 and free of spaces; tokens.size() is
// exactly shape.vocab_size. Deterministic: depends only on the tokenizer kind,
// pre string and vocab size.
struct GeneratedVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;
  uint32_t bos_id = 0;
  uint32_t eos_id = 0;
  std::optional<uint32_t> unk_id;
  std::optional<uint32_t> sep_id;   // WordPiece's [SEP]
  std::optional<uint32_t> pad_id;   // WordPiece's [PAD]
  std::optional<uint32_t> mask_id;  // WordPiece's [MASK]
  bool add_bos = true;
  bool add_eos = false;
  std::string chat_template;  // a short Jinja template; empty for WordPiece
};

// Smallest vocab_size MakeVocab accepts for the shape's tokenizer.
uint32_t MinVocabSize(const ModelShape& shape);

// The tokenizer for `shape` (its tokenizer_model, tokenizer_pre, vocab_size).
absl::StatusOr<GeneratedVocab> MakeVocab(const ModelShape& shape);

// GPT-2's byte -> unicode-character map, as UTF-8 strings (256 entries).
const std::vector<std::string>& Gpt2ByteToUnicode();

}  // namespace octo::testing
