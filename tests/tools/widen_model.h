// Widening: a big llama model that computes a small one's function, so that
// speculative decoding has a target and a draft that agree (tests, benches).
//
// The wide model holds the small one in the corner of every matrix, in the
// small tensor's own type, copied block for block; every other byte is zero.
// With x = [small x, 0...] in the residual stream, each layer's outputs keep
// that form, so the wide logits are the small logits:
//
//   token_embd, output        each row: the small row, then zero bytes (rows = vocab)
//   attn_q/k/v, ffn_gate/up   the first small rows, zero-padded; the other rows zero
//   attn_output, ffn_down     the first small-dim rows, zero-padded; the other rows zero
//   RMSNorm weights           small * 1/sqrt(R), then zeros; eps = small eps / R
//
// where R = wide dim / small dim is a power of 4: the wide mean square is the
// small one / R, so the norm's scale is the small scale * sqrt(R), a power of
// 2, and both the weight scaling and the eps division are exact in float.
// Head h of the wide model is small head h (head_dim unchanged, the same group
// size n_heads / n_kv_heads, so it reads the same kv head); the extra heads
// see zero q, k and v and add nothing. Zero bytes are a zero block for every
// type the generator writes (each element is a product with the block's
// zero scale), so padding is never re-quantized.
//
// The small model's layers come first; the extra layers after them have
// random matrices (the generator's FillRandomBlocks, each in the type the
// small model uses for that tensor in layer 0) and RMSNorm weights all equal
// to extra_layer_norm: 0 makes their inputs zero, so they add exactly
// nothing; a small value makes them a perturbation (a draft that is mostly,
// not always, right). Generated models keep a small residual stream, so the
// value goes a long way: on tiny widened 4x, 0.02 moves the logits by 2-8% of
// their range and keeps 72-97% of top tokens, 0.05 keeps 45-97%
// (widen_model_test).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "storage/ggml_type.h"
#include "tests/tools/gguf_writer.h"

namespace octo::testing {

// Whether `type.type_size` zero bytes decode to `type.block_size` zeros:
// true for every type the generator writes (widen_model_test holds this to
// the CPU dequantizer); WidenModel refuses to pad a tensor of any other type.
bool ZeroBytesAreZeroBlock(GgmlType type);

struct WidenOptions {
  // The wide shape; 0 keeps the small model's value.
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  // Must equal the small model's when set (a preset carries them).
  uint32_t head_dim = 0, vocab_size = 0;
  float extra_layer_norm = 0;  // norm weights of the layers past the small model's (0: identity layers)
  std::string name = "wide";   // general.name is "<name> widened from <the small's general.name>"
};

// Reads the small GGUF at `small_gguf` (a dense llama model written by
// octo-make-model; it is read whole into memory) and streams the wide model
// to `out_gguf` (via out_gguf + ".tmp", as WriteModel: memory bounded by
// kGgufFillChunkBytes plus the small model). The extra layers' random blocks
// come from Rng(seed, tensor index), so the same inputs give the same bytes.
// Metadata is the generator's for the wide shape (the small's vocabulary,
// tokenizer, context length, rope and file type; eps divided by R).
//
// INVALID_ARGUMENT naming what is wrong when: the small model is not a dense
// llama (qwen2, qwen3, MoE and hybrid models are not supported), its tensors
// are not the generator's list for its shape, its vocabulary is not the one
// the generator makes for its tokenizer settings, an RMSNorm weight is not
// F32, a padded tensor's type has an all-zero block that does not decode to
// zeros; or the wide shape has a dim that is not a power-of-4 multiple of the
// small's, a hidden_dim or n_layers below the small's, n_heads or n_kv_heads
// that are not multiples of the small's, another group size, another head_dim
// or vocab_size, or a non-finite extra_layer_norm. File errors as
// GgufFile::Open and GgufWriter::WriteFile.
absl::Status WidenModel(const std::string& small_gguf, const WidenOptions& options, const std::string& out_gguf,
                        uint64_t seed, const WriteProgress& progress = nullptr);

}  // namespace octo::testing
