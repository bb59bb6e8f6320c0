#include "tests/tools/model_presets.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "storage/status_macros.h"
#include "tests/tools/gguf_writer.h"

namespace octo::testing {
namespace {

ModelShape Shape(std::string name, std::string arch, uint32_t dim, uint32_t hidden_dim, uint32_t n_layers,
                 uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, uint32_t vocab_size,
                 uint32_t context_length, float rope_theta, float norm_eps, std::string tokenizer_model,
                 std::string tokenizer_pre) {
  ModelShape s;
  s.name = std::move(name);
  s.architecture = std::move(arch);
  s.dim = dim;
  s.hidden_dim = hidden_dim;
  s.n_layers = n_layers;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.vocab_size = vocab_size;
  s.context_length = context_length;
  s.rope_theta = rope_theta;
  s.norm_eps = norm_eps;
  s.tokenizer_model = std::move(tokenizer_model);
  s.tokenizer_pre = std::move(tokenizer_pre);
  return s;
}

// A hybrid shape: gated attention every `interval` layers, DeltaNet layers
// of k_heads query/key and v_heads value heads of head width ssm_head, a
// conv of width 4, a quarter of each attention head rotated.
ModelShape Hybrid(ModelShape s, uint32_t interval, uint32_t ssm_head, uint32_t k_heads, uint32_t v_heads) {
  s.full_attention_interval = interval;
  s.rope_dim = s.head_dim / 4;
  s.ssm_conv_kernel = 4;
  s.ssm_head_dim = ssm_head;
  s.ssm_k_heads = k_heads;
  s.ssm_v_heads = v_heads;
  s.qk_norm = true;
  return s;
}

// Qwen3-Next and Qwen3.5/3.6, from their published configs (as llama.cpp
// converts them), then tiny variants for tests.
void AddHybridPresets(std::vector<ModelShape>& p) {
  // Qwen3-Next-80B-A3B: 512 experts of 512, 10 per token, a shared expert.
  p.push_back(Hybrid(Shape("qwen3-next-80b-a3b", "qwen3next", 2048, 512, 48, 16, 2, 256, 151936, 262144, 1e7f,
                           1e-6f, "gpt2", "qwen2"),
                     4, 128, 16, 32));
  p.back().n_experts = 512;
  p.back().n_experts_used = 10;
  p.back().shared_expert_dim = 512;
  // Qwen3.5-35B-A3B (and Qwen3.6-35B-A3B): 256 experts of 512, 8 per token.
  p.push_back(Hybrid(Shape("qwen3.5-35b-a3b", "qwen35moe", 2048, 512, 40, 16, 2, 256, 248320, 262144, 1e7f, 1e-6f,
                           "gpt2", "qwen2"),
                     4, 128, 16, 32));
  p.back().n_experts = 256;
  p.back().n_experts_used = 8;
  p.back().shared_expert_dim = 512;
  // Qwen3.5-27B (and Qwen3.6-27B), dense.
  p.push_back(Hybrid(Shape("qwen3.5-27b", "qwen35", 5120, 17408, 64, 24, 4, 256, 248320, 262144, 1e7f, 1e-6f,
                           "gpt2", "qwen2"),
                     4, 128, 16, 48));
  // Tiny: 4 layers, attention at layers 1 and 3, DeltaNet at 0 and 2.
  p.push_back(Hybrid(Shape("tiny-qwen35", "qwen35", 256, 768, 4, 4, 2, 64, 600, 2048, 1e7f, 1e-6f, "gpt2", "qwen2"),
                     2, 64, 2, 4));
  p.push_back(p.back());
  p.back().name = "tiny-qwen35moe";
  p.back().architecture = "qwen35moe";
  p.back().hidden_dim = 256;
  p.back().n_experts = 8;
  p.back().n_experts_used = 2;
  p.back().shared_expert_dim = 256;
  p.push_back(p.back());
  p.back().name = "tiny-qwen3next";
  p.back().architecture = "qwen3next";
}

// Embedding encoders, from the models' configs as llama.cpp converts them
// (pooling as their sentence-transformers settings), then tiny variants.
void AddEncoderPresets(std::vector<ModelShape>& p) {
  p.push_back(Shape("all-minilm-l6-v2", "bert", 384, 1536, 6, 12, 12, 32, 30522, 512, 10000.0f, 1e-12f, "bert", ""));
  p.back().pooling_type = 1;  // mean
  p.push_back(Shape("bge-base-en-v1.5", "bert", 768, 3072, 12, 12, 12, 64, 30522, 512, 10000.0f, 1e-12f, "bert", ""));
  p.back().pooling_type = 2;  // cls
  p.push_back(Shape("nomic-embed-text-v1.5", "nomic-bert", 768, 3072, 12, 12, 12, 64, 30522, 2048, 1000.0f, 1e-12f,
                    "bert", ""));
  p.back().pooling_type = 1;
  p.push_back(Shape("tiny-bert", "bert", 256, 768, 2, 8, 8, 32, 600, 512, 10000.0f, 1e-12f, "bert", ""));
  p.back().pooling_type = 1;
  p.push_back(Shape("tiny-nomic-bert", "nomic-bert", 256, 768, 2, 8, 8, 32, 600, 2048, 1000.0f, 1e-12f, "bert", ""));
  p.back().pooling_type = 1;
}

std::vector<ModelShape> MakePresets() {
  std::vector<ModelShape> p;
  // Real shapes, from the models' config.json / llama.cpp conversions.
  p.push_back(Shape("llama-3.2-1b", "llama", 2048, 8192, 16, 32, 8, 64, 128256, 131072, 500000.0f, 1e-5f,
                    "gpt2", "llama-bpe"));
  p.back().tied_embeddings = true;
  p.push_back(Shape("llama-3-8b", "llama", 4096, 14336, 32, 32, 8, 128, 128256, 8192, 500000.0f, 1e-5f, "gpt2",
                    "llama-bpe"));
  // Not a real model: a draft for llama-3-8b that it can be widened to
  // (tests/tools/widen_model.h: a quarter of the dim, the same head_dim,
  // group size and vocabulary), for speculative decoding's benchmark.
  p.push_back(Shape("llama-3-8b-draft", "llama", 1024, 3584, 4, 8, 2, 128, 128256, 8192, 500000.0f, 1e-5f, "gpt2",
                    "llama-bpe"));
  p.push_back(
      Shape("llama-2-70b", "llama", 8192, 28672, 80, 64, 8, 128, 32000, 4096, 10000.0f, 1e-5f, "llama", ""));
  p.push_back(Shape("qwen2.5-7b", "qwen2", 3584, 18944, 28, 28, 4, 128, 152064, 32768, 1e6f, 1e-6f, "gpt2",
                    "qwen2"));
  p.back().qkv_bias = true;
  p.push_back(Shape("qwen3-8b", "qwen3", 4096, 12288, 36, 32, 8, 128, 151936, 40960, 1e6f, 1e-6f, "gpt2",
                    "qwen2"));
  p.back().qk_norm = true;
  // Qwen3-Embedding-0.6B: a decoder that embeds by its last token's state.
  p.push_back(Shape("qwen3-embedding-0.6b", "qwen3", 1024, 3072, 28, 16, 8, 128, 151669, 32768, 1e6f, 1e-6f, "gpt2",
                    "qwen2"));
  p.back().qk_norm = true;
  p.back().tied_embeddings = true;
  p.back().pooling_type = 3;
  p.push_back(
      Shape("mixtral-8x7b", "llama", 4096, 14336, 32, 32, 8, 128, 32000, 32768, 1e6f, 1e-5f, "llama", ""));
  p.back().n_experts = 8;
  p.back().n_experts_used = 2;
  // Qwen3-30B-A3B: 128 small experts (768 wide), 8 per token.
  p.push_back(Shape("qwen3-30b-a3b", "qwen3moe", 2048, 768, 48, 32, 4, 128, 151936, 40960, 1e6f, 1e-6f, "gpt2",
                    "qwen2"));
  p.back().qk_norm = true;
  p.back().n_experts = 128;
  p.back().n_experts_used = 8;
  // BitNet b1.58 2B4T (ternary matrices: --type TQ1_0 or TQ2_0), and a
  // BitNet of Llama-3-8B's shape for the 8B benchmarks.
  p.push_back(Shape("bitnet-b1.58-2b", "bitnet", 2560, 6912, 30, 20, 5, 128, 128256, 4096, 500000.0f, 1e-5f, "gpt2",
                    "llama-bpe"));
  p.back().tied_embeddings = true;
  p.push_back(Shape("bitnet-8b", "bitnet", 4096, 14336, 32, 32, 8, 128, 128256, 8192, 500000.0f, 1e-5f, "gpt2",
                    "llama-bpe"));
  p.back().tied_embeddings = true;
  // Tiny shapes for tests: every row a whole number of 256-element blocks.
  p.push_back(Shape("tiny", "llama", 256, 768, 2, 8, 4, 32, 512, 2048, 10000.0f, 1e-5f, "llama", ""));
  p.push_back(p.back());
  p.back().name = "tiny-moe";
  p.back().n_experts = 4;
  p.back().n_experts_used = 2;
  p.push_back(Shape("tiny-qwen2", "qwen2", 256, 768, 2, 8, 4, 32, 600, 2048, 1e6f, 1e-6f, "gpt2", "qwen2"));
  p.back().qkv_bias = true;
  p.push_back(Shape("tiny-bitnet", "bitnet", 256, 768, 2, 8, 4, 32, 512, 2048, 10000.0f, 1e-5f, "llama", ""));
  p.back().tied_embeddings = true;
  // n_heads * head_dim (512) != dim, as in real Qwen3.
  p.push_back(Shape("tiny-qwen3", "qwen3", 256, 768, 2, 8, 4, 64, 600, 2048, 1e6f, 1e-6f, "gpt2", "qwen2"));
  p.back().qk_norm = true;
  p.back().tied_embeddings = true;
  p.push_back(p.back());
  p.back().name = "tiny-qwen3moe";
  p.back().architecture = "qwen3moe";
  p.back().hidden_dim = 256;
  p.back().n_experts = 8;
  p.back().n_experts_used = 2;
  p.push_back(Shape("tiny-qwen2moe", "qwen2moe", 256, 256, 2, 8, 4, 32, 600, 2048, 1e6f, 1e-6f, "gpt2", "qwen2"));
  p.back().qkv_bias = true;
  p.back().n_experts = 8;
  p.back().n_experts_used = 2;
  p.back().shared_expert_dim = 512;
  AddHybridPresets(p);
  AddEncoderPresets(p);
  return p;
}

}  // namespace

bool IsHybrid(const ModelShape& s) {
  return s.architecture == "qwen3next" || s.architecture == "qwen35" || s.architecture == "qwen35moe";
}

bool IsAttentionLayer(const ModelShape& s, uint32_t layer) {
  return !IsHybrid(s) || (s.full_attention_interval > 0 && (layer + 1) % s.full_attention_interval == 0);
}

std::vector<int32_t> RopeSections(const ModelShape& s) {
  const int32_t pairs = static_cast<int32_t>((s.rope_dim == 0 ? s.head_dim : s.rope_dim) / 2);
  const int32_t first = (pairs + 2) / 3;
  return {first, first, pairs - 2 * first, 0};
}

const std::vector<ModelShape>& AllPresets() {
  static const std::vector<ModelShape>* const presets = new std::vector<ModelShape>(MakePresets());
  return *presets;
}

absl::StatusOr<ModelShape> FindPreset(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const ModelShape& shape : AllPresets()) {
    if (shape.name == name) return shape;
    names.push_back(shape.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown preset '", name, "'; known presets: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<ModelShape> ApplyOverrides(ModelShape shape, const ShapeOverrides& overrides) {
  if (overrides.n_layers) shape.n_layers = *overrides.n_layers;
  if (overrides.vocab_size) shape.vocab_size = *overrides.vocab_size;
  if (overrides.context_length) shape.context_length = *overrides.context_length;
  if (absl::Status status = ValidateShape(shape); !status.ok()) return status;
  return shape;
}

namespace {

// The hybrid fields: what llama.cpp's loader needs to build the layers.
absl::Status ValidateHybrid(const ModelShape& s) {
  const std::pair<const char*, uint32_t> counts[] = {{"full_attention_interval", s.full_attention_interval},
                                                     {"ssm_conv_kernel", s.ssm_conv_kernel},
                                                     {"ssm_head_dim", s.ssm_head_dim},
                                                     {"ssm_k_heads", s.ssm_k_heads},
                                                     {"ssm_v_heads", s.ssm_v_heads}};
  for (const auto& [field, value] : counts) {
    if (value == 0) return absl::InvalidArgumentError(absl::StrCat(s.name, ": ", field, " must be positive"));
  }
  if (s.ssm_v_heads % s.ssm_k_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": ssm_v_heads (", s.ssm_v_heads,
                                                   ") is not a multiple of ssm_k_heads (", s.ssm_k_heads, ")"));
  }
  const uint32_t rope_dim = s.rope_dim == 0 ? s.head_dim : s.rope_dim;
  if (rope_dim % 2 != 0 || rope_dim > s.head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.name, ": rope_dim (", rope_dim, ") must be even and at most head_dim (", s.head_dim, ")"));
  }
  const bool moe = s.architecture != "qwen35";
  if (moe != (s.n_experts > 0) || (moe && s.shared_expert_dim == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": ", s.architecture,
                                                   moe ? " needs experts and a shared expert" : " is dense"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateShape(const ModelShape& s) {
  const std::pair<const char*, uint32_t> counts[] = {
      {"dim", s.dim},         {"hidden_dim", s.hidden_dim}, {"n_layers", s.n_layers},
      {"n_heads", s.n_heads}, {"n_kv_heads", s.n_kv_heads}, {"head_dim", s.head_dim},
      {"vocab_size", s.vocab_size}, {"context_length", s.context_length}};
  for (const auto& [field, value] : counts) {
    if (value == 0) return absl::InvalidArgumentError(absl::StrCat(s.name, ": ", field, " must be positive"));
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": n_heads (", s.n_heads,
                                                   ") is not a multiple of n_kv_heads (", s.n_kv_heads, ")"));
  }
  if (s.n_experts > 0 && (s.n_experts_used == 0 || s.n_experts_used > s.n_experts)) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": n_experts_used (", s.n_experts_used,
                                                   ") must be in 1..n_experts (", s.n_experts, ")"));
  }
  if (s.n_experts == 0 && s.n_experts_used != 0) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": n_experts_used set without experts"));
  }
  const bool shared_arch = s.architecture == "qwen2moe" || s.architecture == "qwen3next" || s.architecture == "qwen35moe";
  if (s.shared_expert_dim > 0 && (s.n_experts == 0 || !shared_arch)) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.name, ": a shared expert needs qwen2moe, qwen3next or qwen35moe experts"));
  }
  if (s.architecture != "llama" && s.architecture != "qwen2" && s.architecture != "qwen3" &&
      s.architecture != "qwen2moe" && s.architecture != "qwen3moe" && s.architecture != "bitnet" && !IsHybrid(s) &&
      s.architecture != "bert" && s.architecture != "nomic-bert") {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": unknown architecture '", s.architecture, "'"));
  }
  if (IsHybrid(s)) OCTO_RETURN_IF_ERROR(ValidateHybrid(s));
  const bool spm = s.tokenizer_model == "llama";
  const bool bpe = s.tokenizer_model == "gpt2" && (s.tokenizer_pre == "llama-bpe" || s.tokenizer_pre == "qwen2");
  const bool wpm = s.tokenizer_model == "bert" && s.tokenizer_pre.empty();
  if (!spm && !bpe && !wpm) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": unknown tokenizer '", s.tokenizer_model, "' / pre '",
                                                   s.tokenizer_pre, "'"));
  }
  if (s.vocab_size < MinVocabSize(s)) {
    return absl::InvalidArgumentError(absl::StrCat(s.name, ": vocab_size ", s.vocab_size, " is below the ",
                                                   MinVocabSize(s), " tokens the ", s.tokenizer_model,
                                                   " tokenizer needs"));
  }
  return absl::OkStatus();
}

std::string DescribeShape(const ModelShape& s) {
  std::string out = absl::StrCat(s.name, ": ", s.architecture, ", dim ", s.dim, ", ffn ", s.hidden_dim, ", ",
                                 s.n_layers, " layers, heads ", s.n_heads, "/", s.n_kv_heads, " x ", s.head_dim,
                                 ", vocab ", s.vocab_size, " (", s.tokenizer_model);
  if (!s.tokenizer_pre.empty()) absl::StrAppend(&out, "/", s.tokenizer_pre);
  absl::StrAppend(&out, "), ctx ", s.context_length, ", rope theta ", s.rope_theta, ", eps ", s.norm_eps);
  if (s.n_experts > 0) absl::StrAppend(&out, ", experts ", s.n_experts_used, "/", s.n_experts);
  if (s.shared_expert_dim > 0) absl::StrAppend(&out, ", shared expert ", s.shared_expert_dim);
  if (s.tied_embeddings) absl::StrAppend(&out, ", tied embeddings");
  if (s.qkv_bias) absl::StrAppend(&out, ", qkv bias");
  if (s.qk_norm) absl::StrAppend(&out, ", qk norm");
  if (IsHybrid(s)) {
    absl::StrAppend(&out, ", attention every ", s.full_attention_interval, " layers (rope ",
                    s.rope_dim == 0 ? s.head_dim : s.rope_dim, " dims), DeltaNet heads ", s.ssm_k_heads, "/",
                    s.ssm_v_heads, " x ", s.ssm_head_dim, ", conv ", s.ssm_conv_kernel);
  }
  return out;
}


// --- Generated tokenizers -------------------------------------------------------

namespace {

constexpr char kSpmWordMarker[] = "\xE2\x96\x81";  // U+2581 '▁'
// Longest merged token, in bytes (real vocabularies rarely go past this).
constexpr size_t kMaxMergedTokenBytes = 24;

std::string Utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

bool IsLower(absl::string_view s) {
  for (char c : s) {
    if (c < 'a' || c > 'z') return false;
  }
  return true;
}

std::vector<std::string> ControlTokens(const ModelShape& shape) {
  if (shape.tokenizer_pre == "qwen2") {
    return {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  }
  // llama-bpe: Llama 3's specials; a full-size vocabulary reserves 256 ids.
  std::vector<std::string> out = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                  "<|end_header_id|>", "<|eot_id|>"};
  for (int i = 0; shape.vocab_size >= 32768 && out.size() < 256; ++i) {
    out.push_back(absl::StrCat("<|reserved_special_token_", i, "|>"));
  }
  return out;
}

// An index in [0, n) drawn as n * u^power: small indices (older, shorter
// tokens) are picked more often.
size_t PickBiased(Rng& rng, size_t n, int power) {
  double x = 1.0;
  const double u = rng.Uniform();
  for (int i = 0; i < power; ++i) x *= u;
  return std::min(n - 1, static_cast<size_t>(x * static_cast<double>(n)));
}

// Vocabulary under construction: tokens in id order, plus the pools merges
// draw from. A merged token is head + tail: heads are words or word starts
// (they may begin with the word marker), tails are lowercase-only pieces.
struct VocabBuilder {
  GeneratedVocab vocab;
  absl::flat_hash_set<std::string> seen;
  std::vector<uint32_t> heads, tails;

  bool Add(std::string token, TokenType type) {
    if (!seen.insert(token).second) return false;
    vocab.tokens.push_back(std::move(token));
    vocab.token_types.push_back(type);
    return true;
  }
  void AddPoolEntry(uint32_t id) {
    const std::string& token = vocab.tokens[id];
    heads.push_back(id);
    if (IsLower(token)) tails.push_back(id);
  }
  // Adds merged tokens until the vocabulary has `target` entries. Picks favour
  // early (short) tokens, as real merge lists do. When `record_merges`, the
  // i-th merged token gets merges[i] = "head tail".
  absl::Status Merge(size_t target, bool record_merges, Rng& rng) {
    const size_t budget = 64 * target + 4096;  // retries on duplicates/over-long joins
    for (size_t attempt = 0; vocab.tokens.size() < target; ++attempt) {
      if (attempt > budget) return absl::InternalError("vocabulary generation made no progress");
      const std::string& head = vocab.tokens[heads[PickBiased(rng, heads.size(), 2)]];
      const std::string& tail = vocab.tokens[tails[PickBiased(rng, tails.size(), 3)]];
      if (head.size() + tail.size() > kMaxMergedTokenBytes) continue;
      std::string joined = head + tail;
      std::string merge = record_merges ? absl::StrCat(head, " ", tail) : std::string();
      if (!Add(std::move(joined), kTokenNormal)) continue;
      if (record_merges) vocab.merges.push_back(std::move(merge));
      AddPoolEntry(static_cast<uint32_t>(vocab.tokens.size() - 1));
    }
    return absl::OkStatus();
  }
};

// Single characters for SPM: ASCII, then Latin-1 letters, Greek, Cyrillic, CJK.
std::vector<std::string> SpmCharacters() {
  std::vector<std::string> out = {kSpmWordMarker};
  for (uint32_t c = 'a'; c <= 'z'; ++c) out.push_back(Utf8(c));
  for (uint32_t c = 'A'; c <= 'Z'; ++c) out.push_back(Utf8(c));
  for (uint32_t c = '!'; c <= '~'; ++c) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) out.push_back(Utf8(c));
  }
  for (uint32_t c = 0xC0; c <= 0xFF; ++c) out.push_back(Utf8(c));
  for (uint32_t c = 0x3B1; c <= 0x3C9; ++c) out.push_back(Utf8(c));
  for (uint32_t c = 0x430; c <= 0x44F; ++c) out.push_back(Utf8(c));
  for (uint32_t c = 0x4E00; c < 0x4E00 + 256; ++c) out.push_back(Utf8(c));
  return out;
}

constexpr char kLlama2Template[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}";
constexpr char kLlama3Template[] =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

absl::StatusOr<GeneratedVocab> MakeSpmVocab(const ModelShape& shape, Rng& rng) {
  VocabBuilder b;
  b.Add("<unk>", kTokenUnknown);
  b.Add("<s>", kTokenControl);
  b.Add("</s>", kTokenControl);
  for (int byte = 0; byte < 256; ++byte) b.Add(absl::StrFormat("<0x%02X>", byte), kTokenByte);
  const size_t first_piece = b.vocab.tokens.size();
  // Characters take at most half of the remaining ids; merges get the rest.
  const size_t n_chars = std::max<size_t>(1, (shape.vocab_size - first_piece) / 2);
  for (const std::string& c : SpmCharacters()) {
    if (b.vocab.tokens.size() >= first_piece + n_chars) break;
    b.Add(c, kTokenNormal);
    const uint32_t id = static_cast<uint32_t>(b.vocab.tokens.size() - 1);
    if (c == kSpmWordMarker || (c.size() == 1 && std::isalpha(static_cast<unsigned char>(c[0])))) {
      b.AddPoolEntry(id);
    }
  }
  if (b.tails.empty()) b.tails = b.heads;  // vocabularies too small for a letter
  OCTO_RETURN_IF_ERROR(b.Merge(shape.vocab_size, /*record_merges=*/false, rng));
  b.vocab.scores.assign(b.vocab.tokens.size(), 0.0f);
  for (size_t i = first_piece; i < b.vocab.tokens.size(); ++i) {
    b.vocab.scores[i] = -static_cast<float>(i - first_piece + 1);
  }
  b.vocab.unk_id = 0;
  b.vocab.bos_id = 1;
  b.vocab.eos_id = 2;
  b.vocab.add_bos = true;
  b.vocab.chat_template = kLlama2Template;
  return std::move(b.vocab);
}

absl::StatusOr<GeneratedVocab> MakeBpeVocab(const ModelShape& shape, Rng& rng) {
  VocabBuilder b;
  const std::vector<std::string>& byte_chars = Gpt2ByteToUnicode();
  for (int byte = 0; byte < 256; ++byte) {
    b.Add(byte_chars[byte], kTokenNormal);
    if (byte == ' ' || std::isalpha(byte)) b.AddPoolEntry(static_cast<uint32_t>(byte));
  }
  const std::vector<std::string> controls = ControlTokens(shape);
  OCTO_RETURN_IF_ERROR(b.Merge(shape.vocab_size - controls.size(), /*record_merges=*/true, rng));
  const uint32_t first_control = static_cast<uint32_t>(b.vocab.tokens.size());
  for (const std::string& control : controls) {
    if (!b.Add(control, kTokenControl)) return absl::InternalError("control token collides: " + control);
  }
  if (shape.tokenizer_pre == "qwen2") {
    b.vocab.bos_id = first_control;      // <|endoftext|>
    b.vocab.eos_id = first_control + 2;  // <|im_end|>
    b.vocab.add_bos = false;
    b.vocab.chat_template = kChatMlTemplate;
  } else {
    b.vocab.bos_id = first_control;      // <|begin_of_text|>
    b.vocab.eos_id = first_control + 1;  // <|end_of_text|>
    b.vocab.add_bos = true;
    b.vocab.chat_template = kLlama3Template;
  }
  return std::move(b.vocab);
}

// WordPiece: lowercase ASCII characters, each as a word start and as a
// continuation; then words and suffixes so that English text comes out in a
// few pieces per word, and some non-ASCII letters.
std::vector<std::string> WpmCharacters() {
  std::vector<std::string> out;
  for (uint32_t c = '!'; c <= '~'; ++c) {
    if (!(c >= 'A' && c <= 'Z')) out.push_back(Utf8(c));
  }
  return out;
}
constexpr const char* kWpmWords[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "that", "on", "with", "as", "by", "it", "he", "at",
    "from", "his", "an", "be", "are", "this", "or", "not", "have", "one", "had", "but", "they", "which",
    "new", "first", "time", "all", "were", "her", "she", "there", "been", "who", "their", "more", "we", "you",
    "hello", "world", "model", "token", "text", "test", "small", "large", "story", "once", "upon", "day"};
constexpr const char* kWpmSuffixes[] = {"s", "ing", "ed", "er", "ly", "ion", "es", "est", "al", "ment",
                                        "ness", "ity", "ous", "ive", "able", "th", "re", "in", "on", "an"};

absl::StatusOr<GeneratedVocab> MakeWpmVocab(const ModelShape& shape, Rng& rng) {
  VocabBuilder b;
  b.Add("[PAD]", kTokenControl);
  b.Add("[UNK]", kTokenUnknown);
  b.Add("[CLS]", kTokenControl);
  b.Add("[SEP]", kTokenControl);
  b.Add("[MASK]", kTokenControl);
  // Only a-z tokens join: digits, punctuation and CJK are words of their own.
  auto add_pooled = [&b](std::string token) {
    const bool joins = IsLower(absl::StripPrefix(token, kSpmWordMarker));
    if (b.Add(std::move(token), kTokenNormal) && joins) {
      b.AddPoolEntry(static_cast<uint32_t>(b.vocab.tokens.size() - 1));
    }
  };
  for (const std::string& c : WpmCharacters()) {
    add_pooled(kSpmWordMarker + c);
    add_pooled(c);
  }
  std::vector<std::string> extras;
  for (const char* word : kWpmWords) extras.push_back(absl::StrCat(kSpmWordMarker, word));
  for (const char* suffix : kWpmSuffixes) extras.push_back(suffix);
  for (uint32_t c = 0x3B1; c <= 0x3C9; ++c) {  // α..ω, both forms
    extras.push_back(kSpmWordMarker + Utf8(c));
    extras.push_back(Utf8(c));
  }
  // CJK ideographs are words of their own: only the word-start form.
  for (uint32_t c = 0x4E00; c < 0x4E00 + 64; ++c) extras.push_back(kSpmWordMarker + Utf8(c));
  for (std::string& extra : extras) {
    if (b.vocab.tokens.size() >= shape.vocab_size) break;
    add_pooled(std::move(extra));
  }
  OCTO_RETURN_IF_ERROR(b.Merge(shape.vocab_size, /*record_merges=*/false, rng));
  b.vocab.pad_id = 0;
  b.vocab.unk_id = 1;
  b.vocab.bos_id = 2;  // [CLS]
  b.vocab.eos_id = 3;  // [SEP]
  b.vocab.sep_id = 3;
  b.vocab.mask_id = 4;
  b.vocab.add_bos = true;
  b.vocab.add_eos = true;
  return std::move(b.vocab);
}

}  // namespace

const std::vector<std::string>& Gpt2ByteToUnicode() {
  static const std::vector<std::string>* const table = [] {
    // Printable bytes map to themselves; the rest, in order, to U+0100.. .
    auto* out = new std::vector<std::string>(256);
    uint32_t next = 256;
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      (*out)[byte] = Utf8(printable ? byte : next++);
    }
    return out;
  }();
  return *table;
}

uint32_t MinVocabSize(const ModelShape& shape) {
  if (shape.tokenizer_model == "llama") return 3 + 256 + 1;
  if (shape.tokenizer_model == "bert") return 5 + 2 * static_cast<uint32_t>(WpmCharacters().size());
  ModelShape small = shape;
  small.vocab_size = 0;  // the control list without the reserved ids
  return 256 + static_cast<uint32_t>(ControlTokens(small).size());
}

absl::StatusOr<GeneratedVocab> MakeVocab(const ModelShape& shape) {
  OCTO_RETURN_IF_ERROR(ValidateShape(shape));
  Rng rng(/*seed=*/0x70C0ull, /*stream=*/shape.vocab_size);
  if (shape.tokenizer_model == "llama") return MakeSpmVocab(shape, rng);
  if (shape.tokenizer_model == "bert") return MakeWpmVocab(shape, rng);
  return MakeBpeVocab(shape, rng);
}

}  // namespace octo::testing
