#include "storage/tensor_layout.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using Shape = std::vector<uint64_t>;

std::string ShapeString(const Shape& s) { return "[" + absl::StrJoin(s, ", ") + "]"; }

absl::Status Expect(const ShapeLookup& lookup, const std::string& name, const Shape& want, bool required) {
  const Shape* got = lookup(name);
  if (got == nullptr) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
    return absl::OkStatus();
  }
  if (*got != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " has shape ", ShapeString(*got), ", expected ", ShapeString(want)));
  }
  return absl::OkStatus();
}

// The FFN of layer `b`: dense, or router and stacked experts.
absl::Status CheckFfn(const ModelConfig& c, const std::string& b, const ShapeLookup& lookup) {
  if (c.n_experts == 0) {
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate.weight", {c.dim, c.hidden_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_up.weight", {c.dim, c.hidden_dim}, true));
    return Expect(lookup, b + "ffn_down.weight", {c.hidden_dim, c.dim}, true);
  }
  const uint64_t e = c.n_experts, h = c.expert_hidden_dim;
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate_inp.weight", {c.dim, e}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate_exps.weight", {c.dim, h, e}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_up_exps.weight", {c.dim, h, e}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_down_exps.weight", {h, c.dim, e}, true));
  if (!IsHybridArchitecture(c.architecture)) return absl::OkStatus();
  // The hybrid MoE forms always carry the gated shared expert.
  const Shape* gate = lookup(b + "ffn_gate_shexp.weight");
  if (gate == nullptr || gate->size() != 2) return absl::InvalidArgumentError("missing tensor " + b + "ffn_gate_shexp.weight");
  const uint64_t sh = (*gate)[1];
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate_inp_shexp.weight", {c.dim}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate_shexp.weight", {c.dim, sh}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_up_shexp.weight", {c.dim, sh}, true));
  return Expect(lookup, b + "ffn_down_shexp.weight", {sh, c.dim}, true);
}

// A hybrid layer's norms and token mixer: gated attention (attn_q gives
// each head's queries and gate) or gated DeltaNet, as llama.cpp lays them out.
absl::Status CheckHybridMixer(const ModelConfig& c, uint32_t layer, const ShapeLookup& lookup) {
  const std::string b = absl::StrCat("blk.", layer, ".");
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_norm.weight", {c.dim}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "post_attention_norm.weight", {c.dim}, true));
  if (!IsDeltaNetLayer(c, layer)) {
    const uint64_t q_dim = uint64_t{c.n_heads} * c.head_dim, kv_dim = uint64_t{c.n_kv_heads} * c.head_dim;
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q.weight", {c.dim, 2 * q_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k.weight", {c.dim, kv_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_v.weight", {c.dim, kv_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output.weight", {q_dim, c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q_norm.weight", {c.head_dim}, true));
    return Expect(lookup, b + "attn_k_norm.weight", {c.head_dim}, true);
  }
  const uint64_t key = uint64_t{c.ssm_k_heads} * c.ssm_head_dim, value = uint64_t{c.ssm_v_heads} * c.ssm_head_dim;
  const uint64_t conv = 2 * key + value, vh = c.ssm_v_heads;
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_qkv.weight", {c.dim, conv}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_gate.weight", {c.dim, value}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_conv1d.weight", {c.ssm_conv_kernel, conv}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_dt.bias", {vh}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_a", {vh}, true));
  if (c.architecture == "qwen3next") {
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_ba.weight", {c.dim, 2 * vh}, true));
  } else {
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_beta.weight", {c.dim, vh}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_alpha.weight", {c.dim, vh}, true));
  }
  OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ssm_norm.weight", {c.ssm_head_dim}, true));
  return Expect(lookup, b + "ssm_out.weight", {value, c.dim}, true);
}

// An encoder (bert, nomic-bert): the input's embeddings and LayerNorm, and
// each post-norm layer, as llama.cpp lays them out.
absl::Status CheckEncoder(const ModelConfig& c, const ShapeLookup& lookup) {
  const uint64_t q_dim = uint64_t{c.n_heads} * c.head_dim, kv_dim = uint64_t{c.n_kv_heads} * c.head_dim;
  const bool bert = c.architecture == "bert";
  const Shape* types = lookup("token_types.weight");
  if (types == nullptr || types->size() != 2 || (*types)[0] != c.dim || (*types)[1] == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor token_types.weight must be [", c.dim, ", n_types] with n_types >= 1",
                     types == nullptr ? " (missing)" : absl::StrCat(", not ", ShapeString(*types))));
  }
  if (bert) {
    const Shape* positions = lookup("position_embd.weight");
    if (positions == nullptr || positions->size() != 2 || (*positions)[0] != c.dim ||
        (*positions)[1] < c.context_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor position_embd.weight must be [", c.dim, ", n] with n >= the context length ", c.context_length,
          positions == nullptr ? " (missing)" : absl::StrCat(", not ", ShapeString(*positions))));
    }
  }
  OCTO_RETURN_IF_ERROR(Expect(lookup, "token_embd_norm.weight", {c.dim}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, "token_embd_norm.bias", {c.dim}, true));
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    if (bert) {
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q.weight", {c.dim, q_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k.weight", {c.dim, kv_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_v.weight", {c.dim, kv_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q.bias", {q_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k.bias", {kv_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_v.bias", {kv_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output.bias", {c.dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_up.bias", {c.hidden_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_down.bias", {c.dim}, true));
    } else {
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_qkv.weight", {c.dim, q_dim + 2 * kv_dim}, true));
      OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_gate.weight", {c.dim, c.hidden_dim}, true));
    }
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output.weight", {q_dim, c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output_norm.weight", {c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output_norm.bias", {c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_up.weight", {c.dim, c.hidden_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_down.weight", {c.hidden_dim, c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "layer_output_norm.weight", {c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "layer_output_norm.bias", {c.dim}, true));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileSlot> FileForTensor(absl::string_view name, uint32_t n_layers) {
  if (name == "token_embd.weight") return FileSlot{FileKind::kEmbed, kNoLayer};
  if (name == "output.weight") return FileSlot{FileKind::kLmHead, kNoLayer};
  if (name == "output_norm.weight") return FileSlot{FileKind::kFinalNorm, kNoLayer};
  if (!absl::StartsWith(name, "blk.")) return FileSlot{FileKind::kExtra, kNoLayer};
  const absl::string_view rest = name.substr(4);
  const size_t dot = rest.find('.');
  uint32_t layer = 0;
  if (dot == absl::string_view::npos || dot == 0 || !absl::SimpleAtoi(rest.substr(0, dot), &layer) ||
      rest.substr(0, dot).find_first_not_of("0123456789") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("tensor name '", name, "' has no valid layer number"));
  }
  if (layer >= n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " belongs to layer ", layer, " but the model has ", n_layers, " layers"));
  }
  return FileSlot{FileKind::kLayer, layer};
}

absl::Status CheckModelTensors(const ModelConfig& c, const ShapeLookup& lookup) {
  const uint64_t q_dim = uint64_t{c.n_heads} * c.head_dim;
  const uint64_t kv_dim = uint64_t{c.n_kv_heads} * c.head_dim;
  OCTO_RETURN_IF_ERROR(Expect(lookup, "token_embd.weight", {c.dim, c.vocab_size}, true));
  if (IsEncoderArchitecture(c.architecture)) return CheckEncoder(c, lookup);
  OCTO_RETURN_IF_ERROR(Expect(lookup, "output_norm.weight", {c.dim}, true));
  OCTO_RETURN_IF_ERROR(Expect(lookup, "output.weight", {c.dim, c.vocab_size}, !c.tied_embeddings));
  if (c.tied_embeddings && lookup("output.weight") != nullptr) {
    return absl::InvalidArgumentError("tied_embeddings is set but output.weight is present");
  }
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    if (IsHybridArchitecture(c.architecture)) {
      OCTO_RETURN_IF_ERROR(CheckHybridMixer(c, l, lookup));
      OCTO_RETURN_IF_ERROR(CheckFfn(c, b, lookup));
      continue;
    }
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_norm.weight", {c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q.weight", {c.dim, q_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k.weight", {c.dim, kv_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_v.weight", {c.dim, kv_dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_output.weight", {q_dim, c.dim}, true));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_norm.weight", {c.dim}, true));
    // Optional: qwen2 q/k/v biases, qwen3 per-head q/k norms.
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q.bias", {q_dim}, false));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k.bias", {kv_dim}, false));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_v.bias", {kv_dim}, false));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_q_norm.weight", {c.head_dim}, false));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_k_norm.weight", {c.head_dim}, false));
    // BitNet's sub-norms: its own (other architectures do not read them).
    const bool bitnet = c.architecture == "bitnet";
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "attn_sub_norm.weight", {q_dim}, bitnet));
    OCTO_RETURN_IF_ERROR(Expect(lookup, b + "ffn_sub_norm.weight", {c.hidden_dim}, bitnet));
    OCTO_RETURN_IF_ERROR(CheckFfn(c, b, lookup));
  }
  return absl::OkStatus();
}

}  // namespace octo
