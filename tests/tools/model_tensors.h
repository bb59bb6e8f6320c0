// What a generated model file holds: the tensor list for a shape and a type
// recipe (llama.cpp names, ggml-order dims), the metadata keys, and the
// streaming writer that fills every tensor with valid random blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/ggml_type.h"
#include "tests/tools/gguf_writer.h"
#include "tests/tools/model_presets.h"

namespace octo::testing {

// How the type of each weight is chosen.
//  A single type name (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
//  Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS): that type for every weight of
//  two or more dims; 1-D tensors (norms, biases) are always F32.
//  "Q4_K_M": Q4_K, except Q6_K for output.weight (token_embd.weight when the
//  embeddings are tied, since it is then the output projection) and for
//  attn_v / ffn_down (ffn_down_exps) of the layers UseMoreBits picks: the
//  subset of llama.cpp's llama_tensor_get_type rules for LLAMA_FTYPE_MOSTLY_Q4_K_M
//  that applies to these architectures (its GQA/expert-count bumps are left out).
struct TypeRecipe {
  std::string name;    // as given, upper-cased
  GgmlTypeInfo base;   // the type of most weights
  bool q4_k_m = false;
  uint32_t file_type = 0;  // llama_ftype, for general.file_type
};

// Case-insensitive; INVALID_ARGUMENT listing the accepted names.
absl::StatusOr<TypeRecipe> ParseTypeRecipe(absl::string_view name);
// Every accepted recipe name.
std::vector<std::string> AllTypeRecipeNames();

// llama.cpp's use_more_bits(i, n): the first n/8 layers, the last n/8, and
// every third layer in between get more bits:
//   i < n/8 || i >= 7*n/8 || (i - n/8) % 3 == 2   (integer division)
bool UseMoreBits(uint32_t layer, uint32_t n_layers);

// How the generator fills a tensor.
enum class TensorInit {
  kRandomBlocks,  // FillRandomBlocks (weights and biases)
  kNorm,          // F32 near 1.0 (RMSNorm weights), so activations keep their scale
  kDecay,         // F32 in [-16, -1): a DeltaNet head's A = -exp(A_log), so its state decays
  kConv,          // F32 of standard deviation 0.5: a short conv1d's taps (fan-in 4)
};

struct TensorSpec {
  std::string name;            // llama.cpp's, e.g. "blk.3.attn_q.weight"
  GgmlTypeInfo type;
  std::vector<uint64_t> dims;  // ne0 (row length) first
  TensorInit init = TensorInit::kRandomBlocks;
  uint64_t n_bytes = 0;        // GgmlTensorBytes
};

// The tensors of `shape` in file order: token_embd, output_norm, output
// (absent when tied), then per layer attn_norm, attn_q/k/v (+ biases for
// qkv_bias, + attn_q_norm/attn_k_norm for qk_norm), attn_output, ffn_norm,
// and ffn_gate/up/down, or ffn_gate_inp + ffn_{gate,up,down}_exps for MoE.
// Hybrid shapes (IsHybrid) as llama.cpp's qwen3next / qwen35 loaders want
// them: attention layers with a doubled attn_q (queries and gates), the
// DeltaNet layers with attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a,
// ssm_ba (qwen3next) or ssm_beta + ssm_alpha, ssm_norm and ssm_out, and
// post_attention_norm in place of ffn_norm.
// INVALID_ARGUMENT naming the tensor when its row length is not a whole
// number of blocks of the type the recipe picks for it.
absl::StatusOr<std::vector<TensorSpec>> BuildTensorList(const ModelShape& shape, const TypeRecipe& recipe);

// Adds general.*, <arch>.* and tokenizer.* keys to `writer` (see the .cc for
// the list). general.alignment is written as writer.alignment().
void AddModelMetadata(const ModelShape& shape, const TypeRecipe& recipe, const GeneratedVocab& vocab,
                      GgufWriter& writer);

// A model ready to be written: the writer holds metadata and tensor infos,
// `tensors[i]` describes writer.tensors()[i].
struct ModelPlan {
  ModelShape shape;
  TypeRecipe recipe;
  GgufWriter writer;
  std::vector<TensorSpec> tensors;
};

// Validates the shape, builds vocabulary, metadata and tensor list. Errors
// from ValidateShape, MakeVocab, BuildTensorList or an invalid `alignment`.
absl::StatusOr<ModelPlan> PlanModel(const ModelShape& shape, const TypeRecipe& recipe,
                                    uint32_t alignment = kGgufDefaultAlignment);

// Streams the planned file to `path` (via path + ".tmp"), tensor data from
// FillRandomBlocks with a per-tensor Rng(seed, tensor index): the same seed
// gives the same bytes. Memory stays bounded by kGgufFillChunkBytes plus the
// header. Errors as GgufWriter::WriteFile.
absl::Status WriteModel(const ModelPlan& plan, const std::string& path, uint64_t seed,
                        const WriteProgress& progress = nullptr);

}  // namespace octo::testing
