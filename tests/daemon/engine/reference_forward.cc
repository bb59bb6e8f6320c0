#include "tests/daemon/engine/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/half.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"

namespace octo::testing {
namespace {

using Vec = std::vector<double>;
using Shape = std::vector<uint64_t>;

// --- Reading the layer directory ---------------------------------------------

struct Tensor {
  GgmlType type = GgmlType::kF32;
  Shape shape;    // ggml order: shape[0] is the row length
  Vec values;     // empty unless F32
};

// Every tensor of a layer directory, by name, read from the file bytes.
class TensorTable {
 public:
  absl::Status Read(const std::string& dir, const Manifest& manifest, const std::vector<std::string>& ignore) {
    for (const ManifestFile& file : manifest.files) {
      const std::string path = dir + "/" + file.name;
      std::ifstream in(path, std::ios::binary);
      if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
      std::vector<char> bytes(file.size);
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (static_cast<uint64_t>(in.gcount()) != file.size) {
        return absl::InvalidArgumentError(absl::StrCat(path, " is shorter than its manifest entry"));
      }
      for (const ManifestTensor& t : file.tensors) {
        const bool ignored = std::any_of(ignore.begin(), ignore.end(),
                                         [&](const std::string& s) { return absl::EndsWith(t.name, s); });
        if (ignored) continue;
        // A format-2 stacked expert tensor keeps each expert's slice in its
        // own block, expert_stride apart; gather them back into one.
        const uint64_t n_slices = t.expert_stride != 0 ? t.shape.back() : 1;
        const uint64_t slice = t.bytes / n_slices;
        const uint64_t step = t.expert_stride != 0 ? t.expert_stride : slice;
        if (t.offset + (n_slices - 1) * step + slice > bytes.size()) {
          return absl::InvalidArgumentError(absl::StrCat(t.name, " runs past the end of ", file.name));
        }
        Tensor& tensor = tensors_[t.name];
        tensor.type = t.type.type;
        tensor.shape = t.shape;
        if (t.type.type != GgmlType::kF32) continue;
        std::vector<float> f(t.bytes / sizeof(float));
        for (uint64_t e = 0; e < n_slices; ++e) {
          std::memcpy(reinterpret_cast<char*>(f.data()) + e * slice, bytes.data() + t.offset + e * step, slice);
        }
        tensor.values.assign(f.begin(), f.end());
      }
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& name) const { return tensors_.contains(name); }

  const Tensor* Find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }

  // The values of `name`, which must be F32 of exactly `shape`.
  absl::StatusOr<Vec> Get(const std::string& name, const Shape& shape) const {
    const Tensor* t = Find(name);
    if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
    if (t->type != GgmlType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is not F32; the reference reads F32 weights only"));
    }
    if (t->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has shape [", absl::StrJoin(t->shape, ", "),
                                                     "], expected [", absl::StrJoin(shape, ", "), "]"));
    }
    return t->values;
  }

  // Get, or an empty vector when the directory lacks `name`.
  absl::StatusOr<Vec> GetOptional(const std::string& name, const Shape& shape) const {
    if (!Has(name)) return Vec{};
    return Get(name, shape);
  }

 private:
  absl::flat_hash_map<std::string, Tensor> tensors_;
};

// --- The math, one plain function per step -------------------------------------

// out (rows) = W (rows, cols) · x (cols), W row-major.
Vec MatVec(const double* w, const double* x, size_t rows, size_t cols) {
  Vec out(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += w[r * cols + c] * x[c];
    out[r] = sum;
  }
  return out;
}
Vec MatVec(const Vec& w, const Vec& x, size_t rows) { return MatVec(w.data(), x.data(), rows, x.size()); }

// x / sqrt(mean(x^2) + eps) * weight, over n values at x.
void RmsNorm(double* x, const double* weight, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * weight[i];
}
Vec RmsNormed(Vec x, const Vec& weight, double eps) {
  RmsNorm(x.data(), weight.data(), x.size(), eps);
  return x;
}

// Rotates the first rope_dim values of one head by position `pos`. Pair i
// turns by pos * base^(-2i/rope_dim) / freq_factors[i]; normal pairs
// (2i, 2i+1), neox pairs (i, i + rope_dim/2).
void Rope(double* head, int pos, int rope_dim, double base, bool neox, const Vec& freq_factors) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    double theta = pos * std::pow(base, -2.0 * i / rope_dim);
    if (!freq_factors.empty()) theta /= freq_factors[i];
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
    head[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

void Softmax(Vec& x) {
  const double max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double& v : x) sum += (v = std::exp(v - max));
  for (double& v : x) v /= sum;
}

double RoundToFp16(double v) { return Fp16ToFp32(Fp32ToFp16(static_cast<float>(v))); }

// down · (silu(gate · x) * (up · x)); gate/up (width, dim), down (dim, width).
// With `sub_norm` (BitNet's ffn_sub_norm), the product RMS-normed first.
Vec SwiGlu(const double* gate, const double* up, const double* down, const Vec& x, size_t width,
           const Vec& sub_norm = {}, double eps = 0) {
  Vec g = MatVec(gate, x.data(), width, x.size());
  const Vec u = MatVec(up, x.data(), width, x.size());
  for (size_t i = 0; i < width; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  if (!sub_norm.empty()) RmsNorm(g.data(), sub_norm.data(), width, eps);
  return MatVec(down, g.data(), x.size(), width);
}

bool IsNeox(const std::string& arch) {
  return arch == "qwen2" || arch == "qwen3" || arch == "qwen2moe" || arch == "qwen3moe" || arch == "bitnet";
}

// --- Weights -----------------------------------------------------------------

// One layer's weights, as doubles.
struct RefLayer {
  Vec attn_norm, wq, wk, wv, wo;   // norms (dim); wq (q_dim, dim); wk/wv (kv_dim, dim); wo (dim, q_dim)
  Vec bq, bk, bv;                  // (q_dim), (kv_dim), (kv_dim) or empty
  Vec q_norm, k_norm;              // (head_dim) or empty
  Vec attn_sub_norm, ffn_sub_norm; // BitNet: (q_dim), (hidden) or empty
  Vec ffn_norm;                    // (dim)
  Vec w_gate, w_up, w_down;        // dense: (hidden, dim), (hidden, dim), (dim, hidden)
  Vec router;                      // (n_experts, dim)
  Vec gate_exps, up_exps, down_exps;  // (n_experts, hidden, dim) x2, (n_experts, dim, hidden)
  Vec shexp_gate_inp;              // (dim) or empty
  Vec shexp_gate, shexp_up, shexp_down;  // (shexp_hidden, dim) x2, (dim, shexp_hidden) or empty
  size_t shexp_hidden = 0;
};

// --- The mixture-of-experts FFN ---------------------------------------------------

// The mixture-of-experts FFN of xb (dim). Lowers min_margin to this token's
// gap between the k-th and (k+1)-th router probability.
Vec MoeFfn(const ModelConfig& c, const RefLayer& L, const Vec& xb, double& min_margin) {
  const size_t dim = c.dim, hidden = c.expert_hidden_dim;
  const size_t n_experts = c.n_experts, k = c.n_experts_used;
  // Router: softmax over the experts, the k most probable (lower id first on a tie).
  Vec p = MatVec(L.router, xb, n_experts);
  Softmax(p);
  std::vector<size_t> order(n_experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  if (k < n_experts) min_margin = std::min(min_margin, p[order[k - 1]] - p[order[k]]);
  // qwen2moe weighs the chosen experts by their raw probabilities; llama
  // (mixtral) and qwen3moe renormalize them to sum to 1.
  double chosen_sum = 0;
  for (size_t j = 0; j < k; ++j) chosen_sum += p[order[j]];
  const double norm = c.architecture == "qwen2moe" ? 1.0 : chosen_sum;
  // The weighted sum of the chosen experts.
  Vec out(dim, 0.0);
  for (size_t j = 0; j < k; ++j) {
    const size_t e = order[j];
    const Vec y = SwiGlu(&L.gate_exps[e * hidden * dim], &L.up_exps[e * hidden * dim],
                         &L.down_exps[e * dim * hidden], xb, hidden);
    for (size_t i = 0; i < dim; ++i) out[i] += p[e] / norm * y[i];
  }
  // The shared expert, gated by sigmoid(ffn_gate_inp_shexp · x) when that exists.
  if (!L.shexp_gate.empty()) {
    const Vec y = SwiGlu(L.shexp_gate.data(), L.shexp_up.data(), L.shexp_down.data(), xb, L.shexp_hidden);
    double gate = 1.0;
    if (!L.shexp_gate_inp.empty()) {
      const double logit = std::inner_product(xb.begin(), xb.end(), L.shexp_gate_inp.begin(), 0.0);
      gate = 1.0 / (1.0 + std::exp(-logit));
    }
    for (size_t i = 0; i < dim; ++i) out[i] += gate * y[i];
  }
  return out;
}

}  // namespace

struct ReferenceForward::Weights {
  Vec token_embd;    // (vocab, dim)
  Vec output_norm;   // (dim)
  Vec lm_head;       // (vocab, dim): output.weight, or token_embd when tied
  Vec rope_freqs;    // (rope_dim / 2) or empty
  std::vector<RefLayer> layers;
};

ReferenceForward::~ReferenceForward() = default;

absl::StatusOr<std::unique_ptr<ReferenceForward>> ReferenceForward::Load(const std::string& dir,
                                                                        const ReferenceOptions& options) {
  OCTO_ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir));
  std::unique_ptr<ReferenceForward> ref(new ReferenceForward());
  ref->options_ = options;
  ref->config_ = manifest.config;
  if (options.edit_config) options.edit_config(ref->config_);
  const ModelConfig& c = ref->config_;
  if (c.architecture != "llama" && c.architecture != "mistral" && !IsNeox(c.architecture)) {
    return absl::InvalidArgumentError(absl::StrCat("the reference does not know architecture ", c.architecture));
  }
  TensorTable t;
  OCTO_RETURN_IF_ERROR(t.Read(dir, manifest, options.ignore_tensors));

  const uint64_t dim = c.dim, vocab = c.vocab_size, head_dim = c.head_dim;
  const uint64_t q_dim = uint64_t{c.n_heads} * head_dim, kv_dim = uint64_t{c.n_kv_heads} * head_dim;
  auto w = std::make_unique<Weights>();
  OCTO_ASSIGN_OR_RETURN(w->token_embd, t.Get("token_embd.weight", {dim, vocab}));
  OCTO_ASSIGN_OR_RETURN(w->output_norm, t.Get("output_norm.weight", {dim}));
  if (t.Has("output.weight")) {
    OCTO_ASSIGN_OR_RETURN(w->lm_head, t.Get("output.weight", {dim, vocab}));
  } else {
    w->lm_head = w->token_embd;
  }
  OCTO_ASSIGN_OR_RETURN(w->rope_freqs, t.GetOptional("rope_freqs.weight", {c.rope_dim / 2}));

  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    RefLayer& L = w->layers.emplace_back();
    OCTO_ASSIGN_OR_RETURN(L.attn_norm, t.Get(b + "attn_norm.weight", {dim}));
    OCTO_ASSIGN_OR_RETURN(L.wq, t.Get(b + "attn_q.weight", {dim, q_dim}));
    OCTO_ASSIGN_OR_RETURN(L.wk, t.Get(b + "attn_k.weight", {dim, kv_dim}));
    OCTO_ASSIGN_OR_RETURN(L.wv, t.Get(b + "attn_v.weight", {dim, kv_dim}));
    OCTO_ASSIGN_OR_RETURN(L.wo, t.Get(b + "attn_output.weight", {q_dim, dim}));
    OCTO_ASSIGN_OR_RETURN(L.bq, t.GetOptional(b + "attn_q.bias", {q_dim}));
    OCTO_ASSIGN_OR_RETURN(L.bk, t.GetOptional(b + "attn_k.bias", {kv_dim}));
    OCTO_ASSIGN_OR_RETURN(L.bv, t.GetOptional(b + "attn_v.bias", {kv_dim}));
    OCTO_ASSIGN_OR_RETURN(L.q_norm, t.GetOptional(b + "attn_q_norm.weight", {head_dim}));
    OCTO_ASSIGN_OR_RETURN(L.k_norm, t.GetOptional(b + "attn_k_norm.weight", {head_dim}));
    OCTO_ASSIGN_OR_RETURN(L.ffn_norm, t.Get(b + "ffn_norm.weight", {dim}));
    if (c.architecture == "bitnet") {
      OCTO_ASSIGN_OR_RETURN(L.attn_sub_norm, t.Get(b + "attn_sub_norm.weight", {q_dim}));
      OCTO_ASSIGN_OR_RETURN(L.ffn_sub_norm, t.Get(b + "ffn_sub_norm.weight", {c.hidden_dim}));
    }
    if (c.n_experts == 0) {
      const uint64_t hidden = c.hidden_dim;
      OCTO_ASSIGN_OR_RETURN(L.w_gate, t.Get(b + "ffn_gate.weight", {dim, hidden}));
      OCTO_ASSIGN_OR_RETURN(L.w_up, t.Get(b + "ffn_up.weight", {dim, hidden}));
      OCTO_ASSIGN_OR_RETURN(L.w_down, t.Get(b + "ffn_down.weight", {hidden, dim}));
      continue;
    }
    const uint64_t e = c.n_experts, hidden = c.expert_hidden_dim;
    OCTO_ASSIGN_OR_RETURN(L.router, t.Get(b + "ffn_gate_inp.weight", {dim, e}));
    OCTO_ASSIGN_OR_RETURN(L.gate_exps, t.Get(b + "ffn_gate_exps.weight", {dim, hidden, e}));
    OCTO_ASSIGN_OR_RETURN(L.up_exps, t.Get(b + "ffn_up_exps.weight", {dim, hidden, e}));
    OCTO_ASSIGN_OR_RETURN(L.down_exps, t.Get(b + "ffn_down_exps.weight", {hidden, dim, e}));
    // The shared expert's width is whatever its tensors say.
    if (const Tensor* shexp = t.Find(b + "ffn_gate_shexp.weight"); shexp != nullptr) {
      if (shexp->shape.size() != 2) return absl::InvalidArgumentError(b + "ffn_gate_shexp.weight is not 2-D");
      const uint64_t s = shexp->shape[1];
      L.shexp_hidden = s;
      OCTO_ASSIGN_OR_RETURN(L.shexp_gate, t.Get(b + "ffn_gate_shexp.weight", {dim, s}));
      OCTO_ASSIGN_OR_RETURN(L.shexp_up, t.Get(b + "ffn_up_shexp.weight", {dim, s}));
      OCTO_ASSIGN_OR_RETURN(L.shexp_down, t.Get(b + "ffn_down_shexp.weight", {s, dim}));
      OCTO_ASSIGN_OR_RETURN(L.shexp_gate_inp, t.GetOptional(b + "ffn_gate_inp_shexp.weight", {dim}));
    }
  }
  ref->w_ = std::move(w);
  ref->key_cache_.resize(c.n_layers);
  ref->value_cache_.resize(c.n_layers);
  return ref;
}

// --- One token ---------------------------------------------------------------

absl::StatusOr<std::vector<double>> ReferenceForward::Step(int32_t token) {
  const ModelConfig& c = config_;
  if (token < 0 || static_cast<uint32_t>(token) >= c.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("token ", token, " is outside the vocabulary"));
  }
  const size_t dim = c.dim, head_dim = c.head_dim, n_heads = c.n_heads, n_kv_heads = c.n_kv_heads;
  const size_t kv_dim = n_kv_heads * head_dim;
  const double eps = c.norm_eps;
  const bool neox = IsNeox(c.architecture);
  const int pos = position_;

  // Embedding.
  Vec x(w_->token_embd.begin() + token * dim, w_->token_embd.begin() + (token + 1) * dim);

  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const RefLayer& L = w_->layers[l];
    // Attention norm.
    const Vec xb = RmsNormed(x, L.attn_norm, eps);
    // q, k, v (+ biases).
    Vec q = MatVec(L.wq, xb, n_heads * head_dim);
    Vec k = MatVec(L.wk, xb, kv_dim);
    Vec v = MatVec(L.wv, xb, kv_dim);
    for (size_t i = 0; i < L.bq.size(); ++i) q[i] += L.bq[i];
    for (size_t i = 0; i < L.bk.size(); ++i) k[i] += L.bk[i];
    for (size_t i = 0; i < L.bv.size(); ++i) v[i] += L.bv[i];
    // Per-head q/k norm.
    if (!L.q_norm.empty()) {
      for (size_t h = 0; h < n_heads; ++h) RmsNorm(&q[h * head_dim], L.q_norm.data(), head_dim, eps);
    }
    if (!L.k_norm.empty()) {
      for (size_t h = 0; h < n_kv_heads; ++h) RmsNorm(&k[h * head_dim], L.k_norm.data(), head_dim, eps);
    }
    // RoPE.
    for (size_t h = 0; h < n_heads; ++h) {
      Rope(&q[h * head_dim], pos, static_cast<int>(c.rope_dim), c.rope_theta, neox, w_->rope_freqs);
    }
    for (size_t h = 0; h < n_kv_heads; ++h) {
      Rope(&k[h * head_dim], pos, static_cast<int>(c.rope_dim), c.rope_theta, neox, w_->rope_freqs);
    }
    if (options_.perturb != 0) {
      std::uniform_real_distribution<double> u(-options_.perturb, options_.perturb);
      for (Vec* t : {&q, &k, &v}) {
        for (double& e : *t) e *= 1 + u(perturb_rng_);
      }
    }
    // Append k, v to the cache.
    for (size_t i = 0; i < kv_dim; ++i) {
      key_cache_[l].push_back(options_.fp16_kv ? RoundToFp16(k[i]) : k[i]);
      value_cache_[l].push_back(options_.fp16_kv ? RoundToFp16(v[i]) : v[i]);
    }
    // Attention: each head over positions 0..pos of its kv head.
    Vec att(n_heads * head_dim, 0.0);
    const size_t group = n_heads / n_kv_heads;
    for (size_t h = 0; h < n_heads; ++h) {
      const size_t kv_off = (h / group) * head_dim;
      Vec qh(q.begin() + h * head_dim, q.begin() + (h + 1) * head_dim);
      if (options_.fp16_q) {
        for (double& e : qh) e = RoundToFp16(e);
      }
      Vec scores(pos + 1);
      for (int t = 0; t <= pos; ++t) {
        const double* kt = &key_cache_[l][t * kv_dim + kv_off];
        double dot = 0;
        for (size_t i = 0; i < head_dim; ++i) dot += qh[i] * kt[i];
        scores[t] = dot / std::sqrt(static_cast<double>(head_dim));
      }
      Softmax(scores);
      // The engine rounds the attention weights to fp16 before V (ops.h).
      for (double& w : scores) w = RoundToFp16(w);
      for (int t = 0; t <= pos; ++t) {
        const double* vt = &value_cache_[l][t * kv_dim + kv_off];
        for (size_t i = 0; i < head_dim; ++i) att[h * head_dim + i] += scores[t] * vt[i];
      }
    }
    // BitNet: the attention output RMS-normed; output projection + residual.
    if (!L.attn_sub_norm.empty()) RmsNorm(att.data(), L.attn_sub_norm.data(), att.size(), eps);
    const Vec o = MatVec(L.wo, att, dim);
    for (size_t i = 0; i < dim; ++i) x[i] += o[i];
    // FFN norm, FFN (dense or experts), residual.
    const Vec xf = RmsNormed(x, L.ffn_norm, eps);
    const Vec f = c.n_experts == 0
                      ? SwiGlu(L.w_gate.data(), L.w_up.data(), L.w_down.data(), xf, c.hidden_dim, L.ffn_sub_norm, eps)
                      : MoeFfn(c, L, xf, min_router_margin_);
    for (size_t i = 0; i < dim; ++i) x[i] += f[i];
  }

  // Final norm and lm_head.
  const Vec xn = RmsNormed(x, w_->output_norm, eps);
  ++position_;
  return MatVec(w_->lm_head, xn, c.vocab_size);
}

}  // namespace octo::testing
