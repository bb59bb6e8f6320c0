#include "daemon/engine/layer_weights.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

const ManifestTensor* FindTensor(const ManifestFile& file, absl::string_view name) {
  for (const ManifestTensor& t : file.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Binds `name` with `bind` (BindF32 or BindMatrix) if the file has it;
// leaves `out` as it is otherwise.
template <typename T>
absl::Status BindOptional(absl::StatusOr<T> (*bind)(const ManifestFile&, const uint8_t*, absl::string_view),
                          const ManifestFile& file, const uint8_t* bytes, const std::string& name, T* out) {
  if (FindTensor(file, name) == nullptr) return absl::OkStatus();
  OCTO_ASSIGN_OR_RETURN(*out, bind(file, bytes, name));
  return absl::OkStatus();
}

}  // namespace

// The FFN (dense, or router, experts and shared expert) and a hybrid layer's
// token mixer, bound into `w`.
absl::Status BindFfn(const ModelConfig& config, const ManifestFile& file, const uint8_t* bytes, LayerWeights& w);
absl::Status BindHybridMixer(const ModelConfig& config, const ManifestFile& file, const uint8_t* bytes,
                             LayerWeights& w);
absl::Status BindEncoderLayer(const ModelConfig& config, const ManifestFile& file, const uint8_t* bytes,
                              LayerWeights& w);

WeightMatrix ExpertSlice(const WeightMatrix& stacked, int n_experts, int expert) {
  WeightMatrix m = stacked;
  m.rows = stacked.rows / n_experts;
  m.expert_stride = 0;
  const uint64_t packed = static_cast<uint64_t>(stacked.rows / n_experts) *
                          static_cast<uint64_t>(RowBytes(stacked.type, stacked.cols));
  const uint64_t expert_bytes = stacked.expert_stride != 0 ? static_cast<uint64_t>(stacked.expert_stride) : packed;
  m.data = static_cast<const uint8_t*>(stacked.data) + expert * expert_bytes;
  return m;
}

absl::StatusOr<WeightMatrix> BindMatrix(const ManifestFile& file, const uint8_t* bytes,
                                        absl::string_view name) {
  const ManifestTensor* t = FindTensor(file, name);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat(file.name, ": missing tensor ", name));
  if (t->shape.empty() || t->shape.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(file.name, ": tensor ", name, " has ",
                                                   t->shape.size(), " dimensions"));
  }
  WeightMatrix m;
  m.type = t->type.type;
  m.data = bytes + t->offset;
  m.cols = static_cast<int64_t>(t->shape[0]);
  m.rows = 1;
  for (size_t i = 1; i < t->shape.size(); ++i) m.rows *= static_cast<int64_t>(t->shape[i]);
  m.expert_stride = static_cast<int64_t>(t->expert_stride);  // format 2's per-expert blocks, else 0
  return m;
}

absl::StatusOr<const float*> BindF32(const ManifestFile& file, const uint8_t* bytes,
                                     absl::string_view name) {
  OCTO_ASSIGN_OR_RETURN(WeightMatrix m, BindMatrix(file, bytes, name));
  if (m.type != GgmlType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(file.name, ": tensor ", name, " is ",
                                                   GgmlTypeName(m.type), "; Octo needs F32 here"));
  }
  return static_cast<const float*>(m.data);
}

absl::StatusOr<LayerWeights> BindLayerWeights(const ModelConfig& config, const ManifestFile& file,
                                              const uint8_t* bytes) {
  const std::string b = absl::StrCat("blk.", file.layer, ".");
  LayerWeights w;
  if (IsEncoderArchitecture(config.architecture)) {
    OCTO_RETURN_IF_ERROR(BindEncoderLayer(config, file, bytes, w));
    return w;
  }
  OCTO_ASSIGN_OR_RETURN(w.attn_norm, BindF32(file, bytes, b + "attn_norm.weight"));
  if (IsHybridArchitecture(config.architecture)) {
    OCTO_RETURN_IF_ERROR(BindHybridMixer(config, file, bytes, w));
    OCTO_RETURN_IF_ERROR(BindFfn(config, file, bytes, w));
    return w;
  }
  OCTO_ASSIGN_OR_RETURN(w.wq, BindMatrix(file, bytes, b + "attn_q.weight"));
  OCTO_ASSIGN_OR_RETURN(w.wk, BindMatrix(file, bytes, b + "attn_k.weight"));
  OCTO_ASSIGN_OR_RETURN(w.wv, BindMatrix(file, bytes, b + "attn_v.weight"));
  OCTO_ASSIGN_OR_RETURN(w.wo, BindMatrix(file, bytes, b + "attn_output.weight"));
  OCTO_RETURN_IF_ERROR(BindOptional(BindF32, file, bytes, b + "attn_q.bias", &w.bq));
  OCTO_RETURN_IF_ERROR(BindOptional(BindF32, file, bytes, b + "attn_k.bias", &w.bk));
  OCTO_RETURN_IF_ERROR(BindOptional(BindF32, file, bytes, b + "attn_v.bias", &w.bv));
  OCTO_RETURN_IF_ERROR(BindOptional(BindF32, file, bytes, b + "attn_q_norm.weight", &w.q_norm));
  OCTO_RETURN_IF_ERROR(BindOptional(BindF32, file, bytes, b + "attn_k_norm.weight", &w.k_norm));
  OCTO_ASSIGN_OR_RETURN(w.ffn_norm, BindF32(file, bytes, b + "ffn_norm.weight"));
  if (config.architecture == "bitnet") {
    OCTO_ASSIGN_OR_RETURN(w.attn_sub_norm, BindF32(file, bytes, b + "attn_sub_norm.weight"));
    OCTO_ASSIGN_OR_RETURN(w.ffn_sub_norm, BindF32(file, bytes, b + "ffn_sub_norm.weight"));
  }
  OCTO_RETURN_IF_ERROR(BindFfn(config, file, bytes, w));
  return w;
}

absl::Status BindFfn(const ModelConfig& config, const ManifestFile& file, const uint8_t* bytes, LayerWeights& w) {
  const std::string b = absl::StrCat("blk.", file.layer, ".");
  if (config.n_experts == 0) {
    OCTO_ASSIGN_OR_RETURN(w.w_gate, BindMatrix(file, bytes, b + "ffn_gate.weight"));
    OCTO_ASSIGN_OR_RETURN(w.w_up, BindMatrix(file, bytes, b + "ffn_up.weight"));
    OCTO_ASSIGN_OR_RETURN(w.w_down, BindMatrix(file, bytes, b + "ffn_down.weight"));
    return absl::OkStatus();
  }
  OCTO_ASSIGN_OR_RETURN(w.router, BindMatrix(file, bytes, b + "ffn_gate_inp.weight"));
  OCTO_ASSIGN_OR_RETURN(w.gate_exps, BindMatrix(file, bytes, b + "ffn_gate_exps.weight"));
  OCTO_ASSIGN_OR_RETURN(w.up_exps, BindMatrix(file, bytes, b + "ffn_up_exps.weight"));
  OCTO_ASSIGN_OR_RETURN(w.down_exps, BindMatrix(file, bytes, b + "ffn_down_exps.weight"));
  OCTO_RETURN_IF_ERROR(BindOptional(BindMatrix, file, bytes, b + "ffn_gate_inp_shexp.weight", &w.shexp_gate_inp));
  OCTO_RETURN_IF_ERROR(BindOptional(BindMatrix, file, bytes, b + "ffn_gate_shexp.weight", &w.shexp_gate));
  OCTO_RETURN_IF_ERROR(BindOptional(BindMatrix, file, bytes, b + "ffn_up_shexp.weight", &w.shexp_up));
  OCTO_RETURN_IF_ERROR(BindOptional(BindMatrix, file, bytes, b + "ffn_down_shexp.weight", &w.shexp_down));
  const bool any_shexp = w.shexp_gate.data || w.shexp_up.data || w.shexp_down.data;
  const bool all_shexp = w.shexp_gate.data && w.shexp_up.data && w.shexp_down.data;
  if (any_shexp && !all_shexp) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.name, ": the shared expert needs ffn_gate/up/down_shexp together"));
  }
  if (all_shexp && (w.shexp_gate.cols != config.dim || w.shexp_up.rows != w.shexp_gate.rows ||
                    w.shexp_down.cols != w.shexp_gate.rows || w.shexp_down.rows != config.dim ||
                    (w.shexp_gate_inp.data && (w.shexp_gate_inp.rows != 1 ||
                                               w.shexp_gate_inp.cols != config.dim)))) {
    return absl::InvalidArgumentError(absl::StrCat(file.name, ": shared-expert tensors have inconsistent shapes"));
  }
  return absl::OkStatus();
}

absl::Status BindHybridMixer(const ModelConfig& c, const ManifestFile& file, const uint8_t* bytes,
                             LayerWeights& w) {
  const std::string b = absl::StrCat("blk.", file.layer, ".");
  OCTO_ASSIGN_OR_RETURN(w.ffn_norm, BindF32(file, bytes, b + "post_attention_norm.weight"));
  if (!IsDeltaNetLayer(c, file.layer)) {
    w.gated_q = true;
    OCTO_ASSIGN_OR_RETURN(w.wq, BindMatrix(file, bytes, b + "attn_q.weight"));
    OCTO_ASSIGN_OR_RETURN(w.wk, BindMatrix(file, bytes, b + "attn_k.weight"));
    OCTO_ASSIGN_OR_RETURN(w.wv, BindMatrix(file, bytes, b + "attn_v.weight"));
    OCTO_ASSIGN_OR_RETURN(w.wo, BindMatrix(file, bytes, b + "attn_output.weight"));
    OCTO_ASSIGN_OR_RETURN(w.q_norm, BindF32(file, bytes, b + "attn_q_norm.weight"));
    OCTO_ASSIGN_OR_RETURN(w.k_norm, BindF32(file, bytes, b + "attn_k_norm.weight"));
    return absl::OkStatus();
  }
  w.deltanet = true;
  OCTO_ASSIGN_OR_RETURN(w.dn_qkv, BindMatrix(file, bytes, b + "attn_qkv.weight"));
  OCTO_ASSIGN_OR_RETURN(w.dn_z, BindMatrix(file, bytes, b + "attn_gate.weight"));
  if (c.architecture == "qwen3next") {
    OCTO_ASSIGN_OR_RETURN(w.dn_ba, BindMatrix(file, bytes, b + "ssm_ba.weight"));
  } else {
    OCTO_ASSIGN_OR_RETURN(w.dn_beta, BindMatrix(file, bytes, b + "ssm_beta.weight"));
    OCTO_ASSIGN_OR_RETURN(w.dn_alpha, BindMatrix(file, bytes, b + "ssm_alpha.weight"));
  }
  OCTO_ASSIGN_OR_RETURN(w.dn_conv, BindF32(file, bytes, b + "ssm_conv1d.weight"));
  OCTO_ASSIGN_OR_RETURN(w.dn_dt_bias, BindF32(file, bytes, b + "ssm_dt.bias"));
  OCTO_ASSIGN_OR_RETURN(w.dn_decay, BindF32(file, bytes, b + "ssm_a"));
  OCTO_ASSIGN_OR_RETURN(w.dn_norm, BindF32(file, bytes, b + "ssm_norm.weight"));
  OCTO_ASSIGN_OR_RETURN(w.dn_out, BindMatrix(file, bytes, b + "ssm_out.weight"));
  return absl::OkStatus();
}

namespace {

// The rows [first, first + n) of `m`: one part of a fused matrix.
WeightMatrix RowRange(const WeightMatrix& m, int64_t first, int64_t n) {
  WeightMatrix part = m;
  part.rows = n;
  part.data = static_cast<const uint8_t*>(m.data) + first * static_cast<int64_t>(RowBytes(m.type, m.cols));
  return part;
}

}  // namespace

absl::Status BindEncoderLayer(const ModelConfig& c, const ManifestFile& file, const uint8_t* bytes,
                              LayerWeights& w) {
  const std::string b = absl::StrCat("blk.", file.layer, ".");
  w.encoder = true;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  if (c.architecture == "bert") {
    OCTO_ASSIGN_OR_RETURN(w.wq, BindMatrix(file, bytes, b + "attn_q.weight"));
    OCTO_ASSIGN_OR_RETURN(w.wk, BindMatrix(file, bytes, b + "attn_k.weight"));
    OCTO_ASSIGN_OR_RETURN(w.wv, BindMatrix(file, bytes, b + "attn_v.weight"));
    OCTO_ASSIGN_OR_RETURN(w.bq, BindF32(file, bytes, b + "attn_q.bias"));
    OCTO_ASSIGN_OR_RETURN(w.bk, BindF32(file, bytes, b + "attn_k.bias"));
    OCTO_ASSIGN_OR_RETURN(w.bv, BindF32(file, bytes, b + "attn_v.bias"));
    OCTO_ASSIGN_OR_RETURN(w.bo, BindF32(file, bytes, b + "attn_output.bias"));
    OCTO_ASSIGN_OR_RETURN(w.b_up, BindF32(file, bytes, b + "ffn_up.bias"));
    OCTO_ASSIGN_OR_RETURN(w.b_down, BindF32(file, bytes, b + "ffn_down.bias"));
  } else {
    OCTO_ASSIGN_OR_RETURN(const WeightMatrix qkv, BindMatrix(file, bytes, b + "attn_qkv.weight"));
    if (qkv.rows != q_dim + 2 * kv_dim || qkv.cols != c.dim) {
      return absl::InvalidArgumentError(absl::StrCat(file.name, ": ", b, "attn_qkv.weight is (", qkv.rows, ", ",
                                                     qkv.cols, "); the config needs (", q_dim + 2 * kv_dim, ", ",
                                                     c.dim, ")"));
    }
    w.wq = RowRange(qkv, 0, q_dim);
    w.wk = RowRange(qkv, q_dim, kv_dim);
    w.wv = RowRange(qkv, q_dim + kv_dim, kv_dim);
    OCTO_ASSIGN_OR_RETURN(w.w_gate, BindMatrix(file, bytes, b + "ffn_gate.weight"));
  }
  OCTO_ASSIGN_OR_RETURN(w.wo, BindMatrix(file, bytes, b + "attn_output.weight"));
  OCTO_ASSIGN_OR_RETURN(w.attn_out_norm, BindF32(file, bytes, b + "attn_output_norm.weight"));
  OCTO_ASSIGN_OR_RETURN(w.attn_out_norm_b, BindF32(file, bytes, b + "attn_output_norm.bias"));
  OCTO_ASSIGN_OR_RETURN(w.w_up, BindMatrix(file, bytes, b + "ffn_up.weight"));
  OCTO_ASSIGN_OR_RETURN(w.w_down, BindMatrix(file, bytes, b + "ffn_down.weight"));
  OCTO_ASSIGN_OR_RETURN(w.layer_out_norm, BindF32(file, bytes, b + "layer_output_norm.weight"));
  OCTO_ASSIGN_OR_RETURN(w.layer_out_norm_b, BindF32(file, bytes, b + "layer_output_norm.bias"));
  return absl::OkStatus();
}

}  // namespace octo
