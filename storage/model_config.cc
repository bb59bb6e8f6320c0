#include "storage/model_config.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/bounded_json.h"
#include "storage/format.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

constexpr uint64_t kMaxDimension = 1u << 20;  // dims, vocab: far above any real model

absl::StatusOr<uint32_t> GetU32(const GgufFile& gguf, const std::string& key, bool required, uint32_t fallback) {
  const GgufValue* v = gguf.Find(key);
  if (v == nullptr) {
    if (required) return absl::InvalidArgumentError("missing metadata key " + key);
    return fallback;
  }
  auto n = v->AsUint64();
  if (!n.ok()) return Annotate(n.status(), key);
  if (*n > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is ", *n, ", too large"));
  }
  return static_cast<uint32_t>(*n);
}

absl::StatusOr<float> GetFloat(const GgufFile& gguf, const std::string& key, float fallback) {
  const GgufValue* v = gguf.Find(key);
  if (v == nullptr) return fallback;
  auto f = v->AsDouble();
  if (!f.ok()) return Annotate(f.status(), key);
  return static_cast<float>(*f);
}

absl::Status Positive(uint64_t v, absl::string_view field) {
  if (v == 0 || v > kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", v, ", must be 1 to ", kMaxDimension));
  }
  return absl::OkStatus();
}

// The DeltaNet hyper-parameters: set (and sane) exactly for the hybrid
// architectures, which also need experts for qwen3next / qwen35moe only.
absl::Status ValidateHybrid(const ModelConfig& c) {
  const bool hybrid = IsHybridArchitecture(c.architecture);
  const std::pair<const char*, uint32_t> fields[] = {{"full_attention_interval", c.full_attention_interval},
                                                     {"ssm_conv_kernel", c.ssm_conv_kernel},
                                                     {"ssm_head_dim", c.ssm_head_dim},
                                                     {"ssm_k_heads", c.ssm_k_heads},
                                                     {"ssm_v_heads", c.ssm_v_heads}};
  for (const auto& [field, value] : fields) {
    if (!hybrid && value != 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is set but ", c.architecture, " has no DeltaNet layers"));
    }
    if (hybrid) OCTO_RETURN_IF_ERROR(Positive(value, field));
  }
  if (!hybrid) return absl::OkStatus();
  if (c.full_attention_interval > c.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("full_attention_interval (", c.full_attention_interval,
                                                   ") is more than n_layers (", c.n_layers, ")"));
  }
  if (c.ssm_conv_kernel < 2 || c.ssm_conv_kernel > kMaxConvKernel) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssm_conv_kernel is ", c.ssm_conv_kernel, ", must be 2 to ", kMaxConvKernel));
  }
  if (c.ssm_head_dim > kMaxDeltaNetHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssm_head_dim is ", c.ssm_head_dim, ", at most ", kMaxDeltaNetHeadDim, " is supported"));
  }
  if (c.ssm_v_heads % c.ssm_k_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ssm_v_heads (", c.ssm_v_heads,
                                                   ") is not a multiple of ssm_k_heads (", c.ssm_k_heads, ")"));
  }
  if ((c.architecture == "qwen35") != (c.n_experts == 0)) {
    return absl::InvalidArgumentError(c.n_experts == 0
                                          ? absl::StrCat(c.architecture, " needs experts")
                                          : absl::StrCat(c.architecture, " is dense but n_experts is ", c.n_experts));
  }
  return absl::OkStatus();
}

constexpr std::pair<Pooling, const char*> kPoolingNames[] = {
    {Pooling::kMean, "mean"}, {Pooling::kCls, "cls"}, {Pooling::kLast, "last"}, {Pooling::kRank, "rank"}};

// <arch>.pooling_type: absent or 0 ("none") takes the architecture's default.
absl::StatusOr<Pooling> GetPooling(const GgufFile& gguf, const std::string& key, absl::string_view arch) {
  OCTO_ASSIGN_OR_RETURN(const uint32_t type, GetU32(gguf, key, false, 0));
  switch (type) {
    case 0: return DefaultPooling(arch);
    case 1: return Pooling::kMean;
    case 2: return Pooling::kCls;
    case 3: return Pooling::kLast;
    case 4: return Pooling::kRank;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(key, " is ", type, "; known are 0 (none), 1 (mean), 2 (cls), 3 (last), 4 (rank)"));
  }
}

}  // namespace

const char* PoolingName(Pooling pooling) {
  for (const auto& [value, name] : kPoolingNames) {
    if (value == pooling) return name;
  }
  return "?";
}

Pooling DefaultPooling(absl::string_view arch) {
  return IsEncoderArchitecture(arch) ? Pooling::kMean : Pooling::kLast;
}

bool IsEncoderArchitecture(absl::string_view arch) { return arch == "bert" || arch == "nomic-bert"; }

bool IsHybridArchitecture(absl::string_view arch) {
  return arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe";
}

bool IsDeltaNetLayer(const ModelConfig& c, uint32_t layer) {
  return IsHybridArchitecture(c.architecture) && c.full_attention_interval > 0 &&
         (layer + 1) % c.full_attention_interval != 0;
}

bool IsSupportedArchitecture(absl::string_view arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3" || arch == "qwen2moe" ||
         arch == "qwen3moe" || arch == "bitnet" || IsHybridArchitecture(arch) || IsEncoderArchitecture(arch);
}

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  const GgufValue* arch = gguf.Find("general.architecture");
  if (arch == nullptr) return absl::InvalidArgumentError("missing metadata key general.architecture");
  OCTO_ASSIGN_OR_RETURN(absl::string_view arch_name, arch->AsString());
  c.architecture = std::string(arch_name);
  if (!IsSupportedArchitecture(c.architecture)) {
    return absl::UnimplementedError(absl::StrCat("architecture ", QuotePrefix(c.architecture),
                                                 " is not supported (llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, qwen3next, qwen35, "
                                                 "qwen35moe, bitnet, bert and nomic-bert are)"));
  }
  if (const GgufValue* name = gguf.Find("general.name"); name != nullptr && name->AsString().ok()) {
    c.name = std::string(*name->AsString());
  }
  const std::string p = c.architecture + ".";
  OCTO_ASSIGN_OR_RETURN(c.n_layers, GetU32(gguf, p + "block_count", true, 0));
  OCTO_ASSIGN_OR_RETURN(c.dim, GetU32(gguf, p + "embedding_length", true, 0));
  OCTO_ASSIGN_OR_RETURN(c.n_heads, GetU32(gguf, p + "attention.head_count", true, 0));
  OCTO_ASSIGN_OR_RETURN(c.n_kv_heads, GetU32(gguf, p + "attention.head_count_kv", false, c.n_heads));
  OCTO_ASSIGN_OR_RETURN(c.hidden_dim, GetU32(gguf, p + "feed_forward_length", false, 0));
  OCTO_ASSIGN_OR_RETURN(c.context_length, GetU32(gguf, p + "context_length", false, 2048));
  OCTO_ASSIGN_OR_RETURN(c.head_dim, GetU32(gguf, p + "attention.key_length", false,
                                          c.n_heads == 0 ? 0 : c.dim / c.n_heads));
  OCTO_ASSIGN_OR_RETURN(c.rope_dim, GetU32(gguf, p + "rope.dimension_count", false, c.head_dim));
  OCTO_ASSIGN_OR_RETURN(c.rope_theta, GetFloat(gguf, p + "rope.freq_base", 10000.f));
  if (IsEncoderArchitecture(c.architecture)) {
    OCTO_ASSIGN_OR_RETURN(c.norm_eps, GetFloat(gguf, p + "attention.layer_norm_epsilon", 1e-12f));
    // Converted encoders say attention.causal = false; a causal one would
    // need the decoder's masks, which this pass does not take.
    if (const GgufValue* causal = gguf.Find(p + "attention.causal"); causal != nullptr) {
      absl::StatusOr<bool> is_causal = causal->AsBool();
      if (!is_causal.ok()) return Annotate(is_causal.status(), p + "attention.causal");
      if (*is_causal) {
        return absl::UnimplementedError(absl::StrCat(p, "attention.causal is true: Octo runs ", c.architecture,
                                                     " models as bidirectional encoders only"));
      }
    }
  } else {
    OCTO_ASSIGN_OR_RETURN(c.norm_eps, GetFloat(gguf, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  }
  OCTO_ASSIGN_OR_RETURN(c.n_experts, GetU32(gguf, p + "expert_count", false, 0));
  OCTO_ASSIGN_OR_RETURN(c.n_experts_used, GetU32(gguf, p + "expert_used_count", false, 0));
  OCTO_ASSIGN_OR_RETURN(c.expert_hidden_dim, GetU32(gguf, p + "expert_feed_forward_length", false, c.hidden_dim));
  OCTO_ASSIGN_OR_RETURN(c.pooling, GetPooling(gguf, p + "pooling_type", c.architecture));
  c.rope_style = (c.architecture == "llama" || c.architecture == "mistral") ? RopeStyle::kNormal : RopeStyle::kNeox;
  if (IsHybridArchitecture(c.architecture)) {
    // Text positions give every qwen35 rope section the same angle, so its
    // sectioned rope is NEOX over rope.dimension_count dims.
    OCTO_ASSIGN_OR_RETURN(c.full_attention_interval, GetU32(gguf, p + "full_attention_interval", false, 4));
    OCTO_ASSIGN_OR_RETURN(c.ssm_conv_kernel, GetU32(gguf, p + "ssm.conv_kernel", true, 0));
    OCTO_ASSIGN_OR_RETURN(c.ssm_head_dim, GetU32(gguf, p + "ssm.state_size", true, 0));
    OCTO_ASSIGN_OR_RETURN(c.ssm_k_heads, GetU32(gguf, p + "ssm.group_count", true, 0));
    OCTO_ASSIGN_OR_RETURN(c.ssm_v_heads, GetU32(gguf, p + "ssm.time_step_rank", true, 0));
    OCTO_ASSIGN_OR_RETURN(const uint32_t inner, GetU32(gguf, p + "ssm.inner_size", true, 0));
    if (static_cast<uint64_t>(inner) != uint64_t{c.ssm_v_heads} * c.ssm_head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(p, "ssm.inner_size (", inner, ") is not ssm.time_step_rank (",
                                                     c.ssm_v_heads, ") x ssm.state_size (", c.ssm_head_dim, ")"));
    }
  }

  const GgufTensorInfo* embed = gguf.FindTensor("token_embd.weight");
  if (embed == nullptr) return absl::InvalidArgumentError("missing tensor token_embd.weight");
  if (embed->dims.size() != 2) return absl::InvalidArgumentError("token_embd.weight is not 2-D");
  if (embed->dims[1] > kMaxDimension) return absl::InvalidArgumentError("token_embd.weight has too many rows");
  c.vocab_size = static_cast<uint32_t>(embed->dims[1]);
  c.tied_embeddings = gguf.FindTensor("output.weight") == nullptr;
  // Dense models must state their FFN width; MoE ones may give only the expert width.
  if (c.hidden_dim == 0 && c.n_experts == 0) {
    return absl::InvalidArgumentError("missing metadata key " + p + "feed_forward_length");
  }
  if (c.hidden_dim == 0) c.hidden_dim = c.expert_hidden_dim;
  OCTO_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

absl::Status ValidateModelConfig(const ModelConfig& c) {
  if (!IsSupportedArchitecture(c.architecture)) {
    return absl::InvalidArgumentError(absl::StrCat("architecture ", QuotePrefix(c.architecture), " is not supported"));
  }
  OCTO_RETURN_IF_ERROR(Positive(c.dim, "dim"));
  OCTO_RETURN_IF_ERROR(Positive(c.hidden_dim, "hidden_dim"));
  OCTO_RETURN_IF_ERROR(Positive(c.n_heads, "n_heads"));
  OCTO_RETURN_IF_ERROR(Positive(c.n_kv_heads, "n_kv_heads"));
  OCTO_RETURN_IF_ERROR(Positive(c.head_dim, "head_dim"));
  OCTO_RETURN_IF_ERROR(Positive(c.vocab_size, "vocab_size"));
  OCTO_RETURN_IF_ERROR(Positive(c.context_length, "context_length"));
  if (c.n_layers == 0 || c.n_layers > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("n_layers is ", c.n_layers, ", must be 1 to ", kMaxLayers));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_heads (", c.n_heads, ") is not a multiple of n_kv_heads (", c.n_kv_heads, ")"));
  }
  if (c.rope_dim == 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope_dim is ", c.rope_dim, ", must be even and 1 to head_dim (", c.head_dim, ")"));
  }
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 0) return absl::InvalidArgumentError("rope_theta must be > 0");
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0 || c.norm_eps > 1) {
    return absl::InvalidArgumentError("norm_eps must be in (0, 1]");
  }
  if (c.n_experts > 0) {
    OCTO_RETURN_IF_ERROR(Positive(c.expert_hidden_dim, "expert_hidden_dim"));
    if (c.n_experts > kMaxExperts || c.n_experts_used == 0 || c.n_experts_used > c.n_experts) {
      return absl::InvalidArgumentError(absl::StrCat("expert counts are inconsistent: ", c.n_experts_used, " used of ",
                                                     c.n_experts, " (need 1 <= used <= experts <= ", kMaxExperts, ")"));
    }
  } else if (c.n_experts_used != 0) {
    return absl::InvalidArgumentError("n_experts_used is set but n_experts is 0");
  }
  if (IsEncoderArchitecture(c.architecture) && c.n_experts != 0) {
    return absl::InvalidArgumentError(absl::StrCat(c.architecture, " has no experts but n_experts is ", c.n_experts));
  }
  return ValidateHybrid(c);
}

nlohmann::json ModelConfigToJson(const ModelConfig& c) {
  return nlohmann::json{
      {"architecture", c.architecture},
      {"name", c.name},
      {"dim", c.dim},
      {"hidden_dim", c.hidden_dim},
      {"n_layers", c.n_layers},
      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"context_length", c.context_length},
      {"rope_dim", c.rope_dim},
      {"rope_theta", c.rope_theta},
      {"rope_style", c.rope_style == RopeStyle::kNormal ? "normal" : "neox"},
      {"norm_eps", c.norm_eps},
      {"n_experts", c.n_experts},
      {"n_experts_used", c.n_experts_used},
      {"expert_hidden_dim", c.expert_hidden_dim},
      {"tied_embeddings", c.tied_embeddings},
      {"full_attention_interval", c.full_attention_interval},
      {"ssm_conv_kernel", c.ssm_conv_kernel},
      {"ssm_head_dim", c.ssm_head_dim},
      {"ssm_k_heads", c.ssm_k_heads},
      {"ssm_v_heads", c.ssm_v_heads},
      {"pooling", PoolingName(c.pooling)},
  };
}

namespace {

// Reads config.<key> into *out when the JSON value has out's type (a u32,
// a number, a string or a boolean); INVALID_ARGUMENT naming the key otherwise.
template <typename T>
absl::Status ReadField(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  bool ok = it != j.end();
  const char* wanted = "a string";
  if constexpr (std::is_same_v<T, uint32_t>) {
    ok = ok && it->is_number_unsigned() && it->get<uint64_t>() <= std::numeric_limits<uint32_t>::max();
    wanted = "a 32-bit unsigned integer";
  } else if constexpr (std::is_same_v<T, float>) {
    ok = ok && it->is_number();
    wanted = "a number";
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = ok && it->is_boolean();
    wanted = "a boolean";
  } else {
    ok = ok && it->is_string();
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("config.", key, " is missing or not ", wanted));
  *out = it->get<T>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("config is not an object");
  ModelConfig c;
  std::string rope_style;
  OCTO_RETURN_IF_ERROR(ReadField(j, "architecture", &c.architecture));
  OCTO_RETURN_IF_ERROR(ReadField(j, "name", &c.name));
  OCTO_RETURN_IF_ERROR(ReadField(j, "dim", &c.dim));
  OCTO_RETURN_IF_ERROR(ReadField(j, "hidden_dim", &c.hidden_dim));
  OCTO_RETURN_IF_ERROR(ReadField(j, "n_layers", &c.n_layers));
  OCTO_RETURN_IF_ERROR(ReadField(j, "n_heads", &c.n_heads));
  OCTO_RETURN_IF_ERROR(ReadField(j, "n_kv_heads", &c.n_kv_heads));
  OCTO_RETURN_IF_ERROR(ReadField(j, "head_dim", &c.head_dim));
  OCTO_RETURN_IF_ERROR(ReadField(j, "vocab_size", &c.vocab_size));
  OCTO_RETURN_IF_ERROR(ReadField(j, "context_length", &c.context_length));
  OCTO_RETURN_IF_ERROR(ReadField(j, "rope_dim", &c.rope_dim));
  OCTO_RETURN_IF_ERROR(ReadField(j, "rope_theta", &c.rope_theta));
  OCTO_RETURN_IF_ERROR(ReadField(j, "rope_style", &rope_style));
  OCTO_RETURN_IF_ERROR(ReadField(j, "norm_eps", &c.norm_eps));
  OCTO_RETURN_IF_ERROR(ReadField(j, "n_experts", &c.n_experts));
  OCTO_RETURN_IF_ERROR(ReadField(j, "n_experts_used", &c.n_experts_used));
  OCTO_RETURN_IF_ERROR(ReadField(j, "expert_hidden_dim", &c.expert_hidden_dim));
  OCTO_RETURN_IF_ERROR(ReadField(j, "tied_embeddings", &c.tied_embeddings));
  // The DeltaNet fields came with the hybrid architectures: a manifest
  // written before them has none (and no hybrid model).
  for (const auto& [key, field] : {std::pair{"full_attention_interval", &c.full_attention_interval},
                                   std::pair{"ssm_conv_kernel", &c.ssm_conv_kernel},
                                   std::pair{"ssm_head_dim", &c.ssm_head_dim}, std::pair{"ssm_k_heads", &c.ssm_k_heads},
                                   std::pair{"ssm_v_heads", &c.ssm_v_heads}}) {
    if (j.contains(key)) OCTO_RETURN_IF_ERROR(ReadField(j, key, field));
  }
  // Pooling came with embeddings: a manifest written before has the default.
  c.pooling = DefaultPooling(c.architecture);
  if (j.contains("pooling")) {
    std::string pooling;
    OCTO_RETURN_IF_ERROR(ReadField(j, "pooling", &pooling));
    bool known = false;
    for (const auto& [value, name] : kPoolingNames) {
      if (pooling == name) c.pooling = value, known = true;
    }
    if (!known) return absl::InvalidArgumentError("config.pooling must be \"mean\", \"cls\", \"last\" or \"rank\"");
  }
  if (rope_style == "normal") c.rope_style = RopeStyle::kNormal;
  else if (rope_style == "neox") c.rope_style = RopeStyle::kNeox;
  else return absl::InvalidArgumentError("config.rope_style must be \"normal\" or \"neox\"");
  OCTO_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

}  // namespace octo
