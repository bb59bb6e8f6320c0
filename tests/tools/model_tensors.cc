#include "tests/tools/model_tensors.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/model_config.h"
#include "storage/status_macros.h"

namespace octo::testing {
namespace {

constexpr char kQ4KM[] = "Q4_K_M";

// general.file_type (llama_ftype) for a recipe whose weights are all `type`;
// K types map to their "_S" variant, the closest llama.cpp name.
uint32_t FileTypeFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;
    case GgmlType::kQ4_K: return 14;
    case GgmlType::kQ5_K: return 16;
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kIQ4_NL: return 25;
    case GgmlType::kIQ4_XS: return 30;
    case GgmlType::kBF16: return 32;
    case GgmlType::kIQ2_XXS: return 19;
    case GgmlType::kIQ2_XS: return 20;
    case GgmlType::kIQ3_XXS: return 23;
    case GgmlType::kIQ1_S: return 24;
    case GgmlType::kIQ3_S: return 26;
    case GgmlType::kIQ2_S: return 28;
    case GgmlType::kIQ1_M: return 31;
    case GgmlType::kTQ1_0: return 36;
    case GgmlType::kTQ2_0: return 37;
    case GgmlType::kMXFP4: return 38;
  }
  return 0;
}
constexpr uint32_t kFileTypeQ4KM = 15;

GgmlTypeInfo TypeInfo(GgmlType type) { return *LookupGgmlType(static_cast<uint32_t>(type)); }

// Collects TensorSpecs, computing byte counts and naming the first bad one.
// The type a weight of `row`-element rows gets when `type`'s blocks do not
// divide its rows (384-wide encoders under a K-quant): llama.cpp's
// quantizer falls back the same way (IQ4_NL for the 2-3-bit and IQ types,
// Q4_0 for ternary ones, Q5_0 / Q5_1 / Q8_0 for Q4_K / Q5_K / Q6_K).
GgmlTypeInfo RowCompatibleType(GgmlTypeInfo type, uint64_t row) {
  if (row % type.block_size == 0) return type;
  switch (type.type) {
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0: return TypeInfo(GgmlType::kQ4_0);
    case GgmlType::kQ4_K: return TypeInfo(GgmlType::kQ5_0);
    case GgmlType::kQ5_K: return TypeInfo(GgmlType::kQ5_1);
    case GgmlType::kQ6_K: return TypeInfo(GgmlType::kQ8_0);
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
    case GgmlType::kIQ4_XS: return TypeInfo(GgmlType::kIQ4_NL);
    default: return type;  // no fallback: Add names the misfit
  }
}

class TensorListBuilder {
 public:
  explicit TensorListBuilder(const TypeRecipe& recipe) : recipe_(recipe) {}

  // A weight of two or more dims in the recipe's type (or `type` if given).
  void Weight(std::string name, std::vector<uint64_t> dims, std::optional<GgmlTypeInfo> type = std::nullopt) {
    const GgmlTypeInfo chosen = RowCompatibleType(type.value_or(recipe_.base), dims[0]);
    Add(std::move(name), chosen, std::move(dims), TensorInit::kRandomBlocks);
  }
  void Norm(std::string name, uint64_t n) { Add(std::move(name), TypeInfo(GgmlType::kF32), {n}, TensorInit::kNorm); }
  // An F32 tensor filled as `init` says.
  void Float(std::string name, std::vector<uint64_t> dims, TensorInit init) {
    Add(std::move(name), TypeInfo(GgmlType::kF32), std::move(dims), init);
  }
  void Bias(std::string name, uint64_t n) {
    Add(std::move(name), TypeInfo(GgmlType::kF32), {n}, TensorInit::kRandomBlocks);
  }
  // Q6_K under Q4_K_M when `more_bits`, else the recipe's type.
  std::optional<GgmlTypeInfo> MoreBitsType(bool more_bits) const {
    if (recipe_.q4_k_m && more_bits) return TypeInfo(GgmlType::kQ6_K);
    return std::nullopt;
  }

  absl::StatusOr<std::vector<TensorSpec>> Finish() && {
    if (!status_.ok()) return status_;
    return std::move(tensors_);
  }

 private:
  void Add(std::string name, GgmlTypeInfo type, std::vector<uint64_t> dims, TensorInit init) {
    if (!status_.ok()) return;
    uint64_t n_elements = 1;
    for (uint64_t dim : dims) n_elements *= dim;  // shapes are u32 fields: at most 3 of them, no overflow
    absl::StatusOr<uint64_t> bytes = GgmlTensorBytes(type, dims[0], n_elements);
    if (!bytes.ok()) {
      status_ = Annotate(bytes.status(), absl::StrCat("tensor '", name, "' [", absl::StrJoin(dims, ", "), "] as ",
                                                      type.name));
      return;
    }
    tensors_.push_back(TensorSpec{std::move(name), type, std::move(dims), init, *bytes});
  }

  const TypeRecipe& recipe_;
  absl::Status status_;
  std::vector<TensorSpec> tensors_;
};

// The dense FFN, or the router, experts and shared expert, of layer `blk`.
void AddFfn(const ModelShape& s, const std::string& blk, bool more_bits, TensorListBuilder& b) {
  if (s.n_experts == 0) {
    b.Weight(blk + "ffn_gate.weight", {s.dim, s.hidden_dim});
    b.Weight(blk + "ffn_up.weight", {s.dim, s.hidden_dim});
    b.Weight(blk + "ffn_down.weight", {s.hidden_dim, s.dim}, b.MoreBitsType(more_bits));
    return;
  }
  b.Weight(blk + "ffn_gate_inp.weight", {s.dim, s.n_experts}, TypeInfo(GgmlType::kF32));
  b.Weight(blk + "ffn_gate_exps.weight", {s.dim, s.hidden_dim, s.n_experts});
  b.Weight(blk + "ffn_up_exps.weight", {s.dim, s.hidden_dim, s.n_experts});
  b.Weight(blk + "ffn_down_exps.weight", {s.hidden_dim, s.dim, s.n_experts}, b.MoreBitsType(more_bits));
  if (s.shared_expert_dim > 0) {  // a shared expert, gated by sigmoid(gate_inp_shexp . x)
    b.Weight(blk + "ffn_gate_inp_shexp.weight", {s.dim}, TypeInfo(GgmlType::kF32));
    b.Weight(blk + "ffn_gate_shexp.weight", {s.dim, s.shared_expert_dim});
    b.Weight(blk + "ffn_up_shexp.weight", {s.dim, s.shared_expert_dim});
    b.Weight(blk + "ffn_down_shexp.weight", {s.shared_expert_dim, s.dim}, b.MoreBitsType(more_bits));
  }
}

// A hybrid layer's norm and token mixer: gated attention, or gated DeltaNet.
void AddHybridMixer(const ModelShape& s, uint32_t layer, TensorListBuilder& b) {
  const std::string blk = absl::StrCat("blk.", layer, ".");
  b.Norm(blk + "attn_norm.weight", s.dim);
  if (IsAttentionLayer(s, layer)) {
    const uint64_t q_dim = uint64_t{s.n_heads} * s.head_dim;
    const uint64_t kv_dim = uint64_t{s.n_kv_heads} * s.head_dim;
    b.Weight(blk + "attn_q.weight", {s.dim, 2 * q_dim});  // per head: its queries, then its gate
    b.Weight(blk + "attn_k.weight", {s.dim, kv_dim});
    b.Weight(blk + "attn_v.weight", {s.dim, kv_dim}, b.MoreBitsType(UseMoreBits(layer, s.n_layers)));
    b.Norm(blk + "attn_q_norm.weight", s.head_dim);
    b.Norm(blk + "attn_k_norm.weight", s.head_dim);
    b.Weight(blk + "attn_output.weight", {q_dim, s.dim});
    return;
  }
  const uint64_t key_dim = uint64_t{s.ssm_k_heads} * s.ssm_head_dim;
  const uint64_t value_dim = uint64_t{s.ssm_v_heads} * s.ssm_head_dim;
  b.Weight(blk + "attn_qkv.weight", {s.dim, 2 * key_dim + value_dim});
  b.Weight(blk + "attn_gate.weight", {s.dim, value_dim});
  b.Float(blk + "ssm_conv1d.weight", {s.ssm_conv_kernel, 2 * key_dim + value_dim}, TensorInit::kConv);
  b.Float(blk + "ssm_dt.bias", {s.ssm_v_heads}, TensorInit::kNorm);
  b.Float(blk + "ssm_a", {s.ssm_v_heads}, TensorInit::kDecay);
  if (s.architecture == "qwen3next") {
    b.Weight(blk + "ssm_ba.weight", {s.dim, 2 * uint64_t{s.ssm_v_heads}});  // beta, alpha per key head group
  } else {
    b.Weight(blk + "ssm_beta.weight", {s.dim, s.ssm_v_heads});
    b.Weight(blk + "ssm_alpha.weight", {s.dim, s.ssm_v_heads});
  }
  b.Norm(blk + "ssm_norm.weight", s.ssm_head_dim);
  b.Weight(blk + "ssm_out.weight", {value_dim, s.dim});
}

// An encoder's input tensors (bert and nomic-bert: token types and the
// input LayerNorm; bert: learned positions), F32 as converters write them.
void AddEncoderInput(const ModelShape& s, TensorListBuilder& b) {
  b.Weight("token_types.weight", {s.dim, 2}, TypeInfo(GgmlType::kF32));
  if (s.architecture == "bert") b.Weight("position_embd.weight", {s.dim, s.context_length}, TypeInfo(GgmlType::kF32));
  b.Norm("token_embd_norm.weight", s.dim);
  b.Bias("token_embd_norm.bias", s.dim);
}

// An encoder layer, post-norm: bert's separate q/k/v with biases and a GELU
// FFN with biases; nomic-bert's fused qkv and SwiGLU FFN without.
void AddEncoderLayer(const ModelShape& s, uint32_t layer, TensorListBuilder& b) {
  const std::string blk = absl::StrCat("blk.", layer, ".");
  const uint64_t q_dim = uint64_t{s.n_heads} * s.head_dim;
  const uint64_t kv_dim = uint64_t{s.n_kv_heads} * s.head_dim;
  const bool bert = s.architecture == "bert";
  if (bert) {
    b.Weight(blk + "attn_q.weight", {s.dim, q_dim});
    b.Bias(blk + "attn_q.bias", q_dim);
    b.Weight(blk + "attn_k.weight", {s.dim, kv_dim});
    b.Bias(blk + "attn_k.bias", kv_dim);
    b.Weight(blk + "attn_v.weight", {s.dim, kv_dim});
    b.Bias(blk + "attn_v.bias", kv_dim);
  } else {
    b.Weight(blk + "attn_qkv.weight", {s.dim, q_dim + 2 * kv_dim});
  }
  b.Weight(blk + "attn_output.weight", {q_dim, s.dim});
  if (bert) b.Bias(blk + "attn_output.bias", s.dim);
  b.Norm(blk + "attn_output_norm.weight", s.dim);
  b.Bias(blk + "attn_output_norm.bias", s.dim);
  b.Weight(blk + "ffn_up.weight", {s.dim, s.hidden_dim});
  if (bert) b.Bias(blk + "ffn_up.bias", s.hidden_dim);
  if (!bert) b.Weight(blk + "ffn_gate.weight", {s.dim, s.hidden_dim});
  b.Weight(blk + "ffn_down.weight", {s.hidden_dim, s.dim});
  if (bert) b.Bias(blk + "ffn_down.bias", s.dim);
  b.Norm(blk + "layer_output_norm.weight", s.dim);
  b.Bias(blk + "layer_output_norm.bias", s.dim);
}

}  // namespace

absl::StatusOr<TypeRecipe> ParseTypeRecipe(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  if (upper == kQ4KM) return TypeRecipe{upper, TypeInfo(GgmlType::kQ4_K), true, kFileTypeQ4KM};
  absl::StatusOr<GgmlTypeInfo> info = LookupGgmlTypeByName(upper);
  if (!info.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown type '", name, "'; known types: ",
                                                   absl::StrJoin(AllTypeRecipeNames(), ", ")));
  }
  return TypeRecipe{upper, *info, false, FileTypeFor(info->type)};
}

std::vector<std::string> AllTypeRecipeNames() {
  std::vector<std::string> names;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) names.emplace_back(info.name);
  names.emplace_back(kQ4KM);
  return names;
}

bool UseMoreBits(uint32_t layer, uint32_t n_layers) {
  const uint32_t eighth = n_layers / 8;
  return layer < eighth || layer >= 7 * n_layers / 8 || (layer >= eighth && (layer - eighth) % 3 == 2);
}

absl::StatusOr<std::vector<TensorSpec>> BuildTensorList(const ModelShape& s, const TypeRecipe& recipe) {
  TensorListBuilder b(recipe);
  const uint64_t q_dim = uint64_t{s.n_heads} * s.head_dim;
  const uint64_t kv_dim = uint64_t{s.n_kv_heads} * s.head_dim;
  // Tied: token_embd doubles as the output projection and, as in llama.cpp,
  // takes output.weight's type.
  b.Weight("token_embd.weight", {s.dim, s.vocab_size}, b.MoreBitsType(s.tied_embeddings));
  if (IsEncoderArchitecture(s.architecture)) {  // no output_norm, no output
    AddEncoderInput(s, b);
    for (uint32_t l = 0; l < s.n_layers; ++l) AddEncoderLayer(s, l, b);
    return std::move(b).Finish();
  }
  for (uint32_t l = 0; l < s.n_layers; ++l) {
    const std::string blk = absl::StrCat("blk.", l, ".");
    const bool more_bits = UseMoreBits(l, s.n_layers);
    if (IsHybrid(s)) {
      AddHybridMixer(s, l, b);
      b.Norm(blk + "post_attention_norm.weight", s.dim);
      AddFfn(s, blk, more_bits, b);
      continue;
    }
    b.Norm(blk + "attn_norm.weight", s.dim);
    b.Weight(blk + "attn_q.weight", {s.dim, q_dim});
    b.Weight(blk + "attn_k.weight", {s.dim, kv_dim});
    b.Weight(blk + "attn_v.weight", {s.dim, kv_dim}, b.MoreBitsType(more_bits));
    if (s.qkv_bias) {
      b.Bias(blk + "attn_q.bias", q_dim);
      b.Bias(blk + "attn_k.bias", kv_dim);
      b.Bias(blk + "attn_v.bias", kv_dim);
    }
    if (s.qk_norm) {
      b.Norm(blk + "attn_q_norm.weight", s.head_dim);
      b.Norm(blk + "attn_k_norm.weight", s.head_dim);
    }
    if (s.architecture == "bitnet") {  // RMSNorms before attn_output and ffn_down
      b.Norm(blk + "attn_sub_norm.weight", q_dim);
      b.Norm(blk + "ffn_sub_norm.weight", s.hidden_dim);
    }
    b.Weight(blk + "attn_output.weight", {q_dim, s.dim});
    b.Norm(blk + "ffn_norm.weight", s.dim);
    AddFfn(s, blk, more_bits, b);
  }
  b.Norm("output_norm.weight", s.dim);
  if (!s.tied_embeddings) b.Weight("output.weight", {s.dim, s.vocab_size}, b.MoreBitsType(true));
  return std::move(b).Finish();
}

void AddModelMetadata(const ModelShape& s, const TypeRecipe& recipe, const GeneratedVocab& vocab,
                      GgufWriter& w) {
  const std::string& arch = s.architecture;
  w.AddString("general.architecture", arch);
  w.AddString("general.name", s.name);
  w.AddU32("general.file_type", recipe.file_type);
  w.AddU32("general.quantization_version", 2);
  w.AddU32("general.alignment", w.alignment());

  w.AddU32(arch + ".block_count", s.n_layers);
  w.AddU32(arch + ".context_length", s.context_length);
  w.AddU32(arch + ".embedding_length", s.dim);
  w.AddU32(arch + ".feed_forward_length", s.hidden_dim);
  w.AddU32(arch + ".attention.head_count", s.n_heads);
  w.AddU32(arch + ".attention.head_count_kv", s.n_kv_heads);
  w.AddU32(arch + ".attention.key_length", s.head_dim);
  w.AddU32(arch + ".attention.value_length", s.head_dim);
  if (IsEncoderArchitecture(arch)) {
    w.AddF32(arch + ".attention.layer_norm_epsilon", s.norm_eps);
    w.AddBool(arch + ".attention.causal", false);
    w.AddU32("tokenizer.ggml.token_type_count", 2);  // token_types.weight's rows
  } else {
    w.AddF32(arch + ".attention.layer_norm_rms_epsilon", s.norm_eps);
  }
  w.AddF32(arch + ".rope.freq_base", s.rope_theta);
  w.AddU32(arch + ".rope.dimension_count", s.rope_dim == 0 ? s.head_dim : s.rope_dim);
  if (s.pooling_type != 0) w.AddU32(arch + ".pooling_type", s.pooling_type);
  w.AddU32(arch + ".vocab_size", s.vocab_size);
  if (s.n_experts > 0) {
    w.AddU32(arch + ".expert_count", s.n_experts);
    w.AddU32(arch + ".expert_used_count", s.n_experts_used);
    // Qwen MoE models name the expert width separately (Mixtral reuses
    // feed_forward_length).
    if (arch != "llama") w.AddU32(arch + ".expert_feed_forward_length", s.hidden_dim);
    if (s.shared_expert_dim > 0) w.AddU32(arch + ".expert_shared_feed_forward_length", s.shared_expert_dim);
  }
  if (IsHybrid(s)) {
    w.AddU32(arch + ".full_attention_interval", s.full_attention_interval);
    w.AddU32(arch + ".ssm.conv_kernel", s.ssm_conv_kernel);
    w.AddU32(arch + ".ssm.state_size", s.ssm_head_dim);
    w.AddU32(arch + ".ssm.group_count", s.ssm_k_heads);
    w.AddU32(arch + ".ssm.time_step_rank", s.ssm_v_heads);
    w.AddU32(arch + ".ssm.inner_size", s.ssm_v_heads * s.ssm_head_dim);
    if (arch != "qwen3next") w.AddI32Array(arch + ".rope.dimension_sections", RopeSections(s));
  }

  w.AddString("tokenizer.ggml.model", s.tokenizer_model);
  if (s.tokenizer_model == "gpt2") w.AddString("tokenizer.ggml.pre", s.tokenizer_pre);
  w.AddStringArray("tokenizer.ggml.tokens", vocab.tokens);
  if (!vocab.scores.empty()) w.AddF32Array("tokenizer.ggml.scores", vocab.scores);
  w.AddI32Array("tokenizer.ggml.token_type", vocab.token_types);
  if (!vocab.merges.empty()) w.AddStringArray("tokenizer.ggml.merges", vocab.merges);
  w.AddU32("tokenizer.ggml.bos_token_id", vocab.bos_id);
  w.AddU32("tokenizer.ggml.eos_token_id", vocab.eos_id);
  if (vocab.unk_id) w.AddU32("tokenizer.ggml.unknown_token_id", *vocab.unk_id);
  if (vocab.sep_id) w.AddU32("tokenizer.ggml.seperator_token_id", *vocab.sep_id);  // llama.cpp's spelling
  if (vocab.pad_id) w.AddU32("tokenizer.ggml.padding_token_id", *vocab.pad_id);
  if (vocab.mask_id) w.AddU32("tokenizer.ggml.mask_token_id", *vocab.mask_id);
  w.AddBool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  w.AddBool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  if (!vocab.chat_template.empty()) w.AddString("tokenizer.chat_template", vocab.chat_template);
}

absl::StatusOr<ModelPlan> PlanModel(const ModelShape& shape, const TypeRecipe& recipe, uint32_t alignment) {
  OCTO_RETURN_IF_ERROR(ValidateShape(shape));
  OCTO_ASSIGN_OR_RETURN(const GeneratedVocab vocab, MakeVocab(shape));
  OCTO_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, BuildTensorList(shape, recipe));
  ModelPlan plan{shape, recipe, GgufWriter(alignment), std::move(tensors)};
  AddModelMetadata(shape, recipe, vocab, plan.writer);
  for (const TensorSpec& tensor : plan.tensors) {
    OCTO_RETURN_IF_ERROR(plan.writer.AddTensor(tensor.name, tensor.type.type, tensor.dims));
  }
  return plan;
}

absl::Status WriteModel(const ModelPlan& plan, const std::string& path, uint64_t seed,
                        const WriteProgress& progress) {
  size_t current = std::numeric_limits<size_t>::max();
  Rng rng(seed);
  auto fill = [&](size_t index, uint64_t /*offset*/, std::span<uint8_t> out) -> absl::Status {
    if (index != current) {  // chunks arrive in order: one stream per tensor
      current = index;
      rng = Rng(seed, index);
    }
    const TensorSpec& spec = plan.tensors[index];
    if (spec.init == TensorInit::kRandomBlocks) return FillRandomBlocks(spec.type, out, rng);
    for (size_t i = 0; i + 4 <= out.size(); i += 4) {
      float v = 0;
      switch (spec.init) {
        case TensorInit::kNorm: v = 1.0f + kRandomWeightStd * rng.Normalish(); break;
        case TensorInit::kDecay: v = -std::exp(static_cast<float>(rng.Uniform()) * std::log(16.0f)); break;
        case TensorInit::kConv: v = 0.5f * rng.Normalish(); break;
        case TensorInit::kRandomBlocks: break;
      }
      std::memcpy(out.data() + i, &v, 4);
    }
    return absl::OkStatus();
  };
  return plan.writer.WriteFile(path, fill, progress);
}

}  // namespace octo::testing
