#include "tests/daemon/engine/hybrid_reference.h"

#include "tests/daemon/engine/reference_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/half.h"
#include "storage/gguf.h"
#include "storage/status_macros.h"

namespace octo::testing {
namespace {

using Vec = std::vector<double>;
using Shape = std::vector<uint64_t>;

// out (rows) = W (rows, cols) . x (cols); W row-major, rows of cols values
// (a GGUF tensor of shape [cols, rows]).
Vec MatVec(const double* w, const double* x, size_t rows, size_t cols) {
  Vec out(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += w[r * cols + c] * x[c];
    out[r] = sum;
  }
  return out;
}
Vec MatVec(const Vec& w, const Vec& x) { return MatVec(w.data(), x.data(), w.size() / x.size(), x.size()); }

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Silu(double x) { return x * Sigmoid(x); }
double Softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

// x / sqrt(mean(x^2) + eps) * (offset + w), over the n values at x.
void RmsNorm(double* x, const double* w, size_t n, double eps, double offset) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * (offset + w[i]);
}

// x / max(|x|, eps), as ggml_l2_norm.
void L2Norm(double* x, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::max(std::sqrt(ss), eps);
  for (size_t i = 0; i < n; ++i) x[i] *= scale;
}

// NEOX rotation of the first rope_dim values of a head: pair (i, i +
// rope_dim/2) turns by pos * base^(-2i / rope_dim).
void Rope(double* head, int pos, int rope_dim, double base) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = pos * std::pow(base, -2.0 * i / rope_dim);
    const double x0 = head[i], x1 = head[i + half];
    head[i] = x0 * std::cos(theta) - x1 * std::sin(theta);
    head[i + half] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

double Fp16(double v) { return Fp16ToFp32(Fp32ToFp16(static_cast<float>(v))); }

}  // namespace

struct HybridReference::Model {
  std::string arch;
  int dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, rope_dim = 0, vocab = 0;
  int interval = 0, conv_kernel = 0, ssm_head = 0, k_heads = 0, v_heads = 0;
  int n_experts = 0, n_used = 0;
  double eps = 0, rope_base = 0;
  absl::flat_hash_map<std::string, Vec> w;  // every tensor, as double
  absl::flat_hash_map<std::string, Shape> shapes;

  // Per layer: attention keys/values so far (position, kv_dim); DeltaNet
  // conv inputs (the last conv_kernel - 1, oldest first) and states.
  std::vector<Vec> keys, values;
  std::vector<std::vector<Vec>> conv;
  std::vector<std::vector<Vec>> state;  // per value head, (key dim, value dim)

  bool Attention(int l) const { return (l + 1) % interval == 0; }
  int key_dim() const { return k_heads * ssm_head; }
  int value_dim() const { return v_heads * ssm_head; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }

  const Vec& W(const std::string& name) const { return w.at(name); }
};

namespace {

absl::StatusOr<int> Key(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return absl::InvalidArgumentError("missing metadata key " + key);
  OCTO_ASSIGN_OR_RETURN(uint64_t n, v->AsUint64());
  return static_cast<int>(n);
}


// Reads `name` (F32, of exactly `shape`) into m.w.
absl::Status Read(const GgufFile& g, const std::string& name, const Shape& shape, HybridReference::Model& m) {
  OCTO_ASSIGN_OR_RETURN(m.w[name], ReferenceTensor(g, name, shape));
  return absl::OkStatus();
}

absl::Status ReadAll(const GgufFile& g, HybridReference::Model& m) {
  const uint64_t dim = m.dim, q_dim = uint64_t(m.n_heads) * m.head_dim, kv_dim = uint64_t(m.n_kv_heads) * m.head_dim;
  OCTO_RETURN_IF_ERROR(Read(g, "token_embd.weight", {dim, uint64_t(m.vocab)}, m));
  OCTO_RETURN_IF_ERROR(Read(g, "output_norm.weight", {dim}, m));
  if (g.FindTensor("output.weight") != nullptr) {
    OCTO_RETURN_IF_ERROR(Read(g, "output.weight", {dim, uint64_t(m.vocab)}, m));
  }
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    OCTO_RETURN_IF_ERROR(Read(g, b + "attn_norm.weight", {dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "post_attention_norm.weight", {dim}, m));
    if (m.Attention(l)) {
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_q.weight", {dim, 2 * q_dim}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_k.weight", {dim, kv_dim}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_v.weight", {dim, kv_dim}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_q_norm.weight", {uint64_t(m.head_dim)}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_k_norm.weight", {uint64_t(m.head_dim)}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_output.weight", {q_dim, dim}, m));
    } else {
      const uint64_t conv = m.conv_dim(), value = m.value_dim(), vh = m.v_heads;
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_qkv.weight", {dim, conv}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_gate.weight", {dim, value}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_conv1d.weight", {uint64_t(m.conv_kernel), conv}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_dt.bias", {vh}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_a", {vh}, m));
      if (m.arch == "qwen3next") {
        OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_ba.weight", {dim, 2 * vh}, m));
      } else {
        OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_beta.weight", {dim, vh}, m));
        OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_alpha.weight", {dim, vh}, m));
      }
      OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_norm.weight", {uint64_t(m.ssm_head)}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ssm_out.weight", {value, dim}, m));
    }
    if (m.n_experts == 0) {
      const uint64_t ff = m.shapes["ffn"].at(0);
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate.weight", {dim, ff}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_up.weight", {dim, ff}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_down.weight", {ff, dim}, m));
      continue;
    }
    const uint64_t ff = m.shapes["ffn"].at(0), sh = m.shapes["ffn"].at(1), ne = m.n_experts;
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate_inp.weight", {dim, ne}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate_exps.weight", {dim, ff, ne}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_up_exps.weight", {dim, ff, ne}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_down_exps.weight", {ff, dim, ne}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate_inp_shexp.weight", {dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate_shexp.weight", {dim, sh}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_up_shexp.weight", {dim, sh}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_down_shexp.weight", {sh, dim}, m));
  }
  return absl::OkStatus();
}

// down(silu(gate . x) * (up . x)) for matrices of `ff` rows at the given offsets.
Vec SwiGlu(const double* gate, const double* up, const double* down, const Vec& x, size_t ff) {
  const Vec g = MatVec(gate, x.data(), ff, x.size());
  const Vec u = MatVec(up, x.data(), ff, x.size());
  Vec h(ff);
  for (size_t i = 0; i < ff; ++i) h[i] = Silu(g[i]) * u[i];
  return MatVec(down, h.data(), x.size(), ff);
}

}  // namespace

HybridReference::~HybridReference() = default;

int HybridReference::vocab_size() const { return m_->vocab; }

absl::StatusOr<std::unique_ptr<HybridReference>> HybridReference::Load(const std::string& path,
                                                                       const HybridReferenceOptions& options) {
  OCTO_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Open(path));
  auto ref = std::unique_ptr<HybridReference>(new HybridReference());
  ref->options_ = options;
  ref->m_ = std::make_unique<Model>();
  Model& m = *ref->m_;
  const GgufValue* arch = g.Find("general.architecture");
  if (arch == nullptr || !arch->AsString().ok()) return absl::InvalidArgumentError("no general.architecture");
  m.arch = std::string(*arch->AsString());
  if (m.arch != "qwen3next" && m.arch != "qwen35" && m.arch != "qwen35moe") {
    return absl::InvalidArgumentError("not a hybrid architecture: " + m.arch);
  }
  const std::string a = m.arch + ".";
  OCTO_ASSIGN_OR_RETURN(m.dim, Key(g, a + "embedding_length"));
  OCTO_ASSIGN_OR_RETURN(m.n_layers, Key(g, a + "block_count"));
  OCTO_ASSIGN_OR_RETURN(m.n_heads, Key(g, a + "attention.head_count"));
  OCTO_ASSIGN_OR_RETURN(m.n_kv_heads, Key(g, a + "attention.head_count_kv"));
  OCTO_ASSIGN_OR_RETURN(m.head_dim, Key(g, a + "attention.key_length"));
  OCTO_ASSIGN_OR_RETURN(m.rope_dim, Key(g, a + "rope.dimension_count"));
  OCTO_ASSIGN_OR_RETURN(m.rope_base, ReferenceNumber(g, a + "rope.freq_base"));
  OCTO_ASSIGN_OR_RETURN(m.eps, ReferenceNumber(g, a + "attention.layer_norm_rms_epsilon"));
  OCTO_ASSIGN_OR_RETURN(m.interval, Key(g, a + "full_attention_interval"));
  OCTO_ASSIGN_OR_RETURN(m.conv_kernel, Key(g, a + "ssm.conv_kernel"));
  OCTO_ASSIGN_OR_RETURN(m.ssm_head, Key(g, a + "ssm.state_size"));
  OCTO_ASSIGN_OR_RETURN(m.k_heads, Key(g, a + "ssm.group_count"));
  OCTO_ASSIGN_OR_RETURN(m.v_heads, Key(g, a + "ssm.time_step_rank"));
  OCTO_ASSIGN_OR_RETURN(const int inner, Key(g, a + "ssm.inner_size"));
  if (inner != m.v_heads * m.ssm_head) return absl::InvalidArgumentError("ssm.inner_size is not heads x state size");
  if (m.interval <= 0 || m.k_heads <= 0 || m.v_heads % m.k_heads != 0) {
    return absl::InvalidArgumentError("bad interval or DeltaNet head counts");
  }
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) return absl::InvalidArgumentError("bad token_embd.weight");
  m.vocab = static_cast<int>(embd->dims[1]);
  if (m.arch != "qwen35") {
    OCTO_ASSIGN_OR_RETURN(m.n_experts, Key(g, a + "expert_count"));
    OCTO_ASSIGN_OR_RETURN(m.n_used, Key(g, a + "expert_used_count"));
    OCTO_ASSIGN_OR_RETURN(const int ff, Key(g, a + "expert_feed_forward_length"));
    OCTO_ASSIGN_OR_RETURN(const int sh, Key(g, a + "expert_shared_feed_forward_length"));
    m.shapes["ffn"] = {uint64_t(ff), uint64_t(sh)};
  } else {
    OCTO_ASSIGN_OR_RETURN(const int ff, Key(g, a + "feed_forward_length"));
    m.shapes["ffn"] = {uint64_t(ff)};
  }
  OCTO_RETURN_IF_ERROR(ReadAll(g, m));
  m.keys.resize(m.n_layers);
  m.values.resize(m.n_layers);
  m.conv.assign(m.n_layers, std::vector<Vec>(m.conv_kernel - 1, Vec(m.conv_dim(), 0.0)));
  m.state.assign(m.n_layers, std::vector<Vec>(m.v_heads, Vec(size_t(m.ssm_head) * m.ssm_head, 0.0)));
  return ref;
}

absl::StatusOr<std::vector<double>> HybridReference::Step(int32_t token) {
  Model& m = *m_;
  if (token < 0 || token >= m.vocab) return absl::InvalidArgumentError(absl::StrCat("token ", token));
  const HybridReferenceOptions& o = options_;
  const double norm_offset = o.norm_offset ? 1.0 : 0.0;
  const size_t dim = m.dim;
  const Vec& embd = m.W("token_embd.weight");
  Vec x(embd.begin() + size_t(token) * dim, embd.begin() + size_t(token + 1) * dim);
  const int pos = position_;

  for (int l = 0; l < m.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    Vec h = x;
    RmsNorm(h.data(), m.W(b + "attn_norm.weight").data(), dim, m.eps, norm_offset);
    Vec mixed_out;
    if (m.Attention(l)) {
      const int hd = m.head_dim, group = m.n_heads / m.n_kv_heads;
      const Vec qg = MatVec(m.W(b + "attn_q.weight"), h);
      Vec k = MatVec(m.W(b + "attn_k.weight"), h);
      Vec v = MatVec(m.W(b + "attn_v.weight"), h);
      for (int kh = 0; kh < m.n_kv_heads; ++kh) {
        RmsNorm(&k[size_t(kh) * hd], m.W(b + "attn_k_norm.weight").data(), hd, m.eps, norm_offset);
        Rope(&k[size_t(kh) * hd], pos, m.rope_dim, m.rope_base);
      }
      for (double& e : k) e = o.fp16_kv ? Fp16(e) : e;
      for (double& e : v) e = o.fp16_kv ? Fp16(e) : e;
      m.keys[l].insert(m.keys[l].end(), k.begin(), k.end());
      m.values[l].insert(m.values[l].end(), v.begin(), v.end());
      const size_t kv_dim = size_t(m.n_kv_heads) * hd;
      Vec attn(size_t(m.n_heads) * hd, 0.0);
      for (int qh = 0; qh < m.n_heads; ++qh) {
        Vec q(qg.begin() + size_t(qh) * 2 * hd, qg.begin() + size_t(qh) * 2 * hd + hd);
        RmsNorm(q.data(), m.W(b + "attn_q_norm.weight").data(), hd, m.eps, norm_offset);
        Rope(q.data(), pos, m.rope_dim, m.rope_base);
        if (o.fp16_q) {
          for (double& e : q) e = Fp16(e);
        }
        const int kh = qh / group;
        Vec scores(pos + 1);
        for (int p = 0; p <= pos; ++p) {
          const double* kp = &m.keys[l][p * kv_dim + size_t(kh) * hd];
          scores[p] = std::inner_product(q.begin(), q.end(), kp, 0.0) / std::sqrt(double(hd));
        }
        const double mx = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - mx));
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (int p = 0; p <= pos; ++p) acc += scores[p] / sum * m.values[l][p * kv_dim + size_t(kh) * hd + d];
          const double gate = qg[size_t(qh) * 2 * hd + hd + d];
          attn[size_t(qh) * hd + d] = o.drop_output_gate ? acc : acc * Sigmoid(gate);
        }
      }
      mixed_out = MatVec(m.W(b + "attn_output.weight"), attn);
    } else {
      const int hd = m.ssm_head, r = m.v_heads / m.k_heads, kernel = m.conv_kernel;
      const size_t channels = m.conv_dim();
      const Vec qkv = MatVec(m.W(b + "attn_qkv.weight"), h);
      const Vec z = MatVec(m.W(b + "attn_gate.weight"), h);
      Vec beta(m.v_heads), alpha(m.v_heads);
      if (m.arch == "qwen3next") {
        const Vec ba = MatVec(m.W(b + "ssm_ba.weight"), h);
        for (int g = 0; g < m.k_heads; ++g) {
          for (int j = 0; j < r; ++j) {
            beta[g * r + j] = ba[size_t(g) * 2 * r + j];
            alpha[g * r + j] = ba[size_t(g) * 2 * r + r + j];
          }
        }
      } else {
        beta = MatVec(m.W(b + "ssm_beta.weight"), h);
        alpha = MatVec(m.W(b + "ssm_alpha.weight"), h);
      }
      // The causal conv over the kernel - 1 earlier inputs and this one.
      const Vec& taps = m.W(b + "ssm_conv1d.weight");
      std::vector<Vec>& history = m.conv[l];
      if (o.drop_conv_state) {
        for (Vec& earlier : history) std::fill(earlier.begin(), earlier.end(), 0.0);
      }
      Vec conv(channels);
      for (size_t c = 0; c < channels; ++c) {
        double sum = taps[c * kernel + kernel - 1] * qkv[c];
        for (int j = 0; j < kernel - 1; ++j) sum += taps[c * kernel + j] * history[j][c];
        conv[c] = Silu(sum);
      }
      history.erase(history.begin());
      history.push_back(qkv);
      const size_t key_dim = m.key_dim();
      for (int g = 0; g < m.k_heads; ++g) {
        L2Norm(&conv[size_t(g) * hd], hd, m.eps);            // q
        L2Norm(&conv[key_dim + size_t(g) * hd], hd, m.eps);  // k
      }
      const Vec& dt_bias = m.W(b + "ssm_dt.bias");
      const Vec& a_neg = m.W(b + "ssm_a");
      Vec out(m.value_dim());
      for (int vh = 0; vh < m.v_heads; ++vh) {
        // qwen3next's value heads come in groups per key head; qwen35's
        // converter orders them so that they cycle over the key heads.
        const size_t kh = m.arch == "qwen3next" ? vh / r : vh % m.k_heads;
        const double* q = &conv[kh * hd];
        const double* k = &conv[key_dim + kh * hd];
        const double* v = &conv[2 * key_dim + size_t(vh) * hd];
        const double decay = Softplus(alpha[vh] + dt_bias[vh]) * (o.flip_decay_sign ? -a_neg[vh] : a_neg[vh]);
        const double b_gate = Sigmoid(beta[vh]);
        Vec& s = m.state[l][vh];  // s[i * hd + j]: key dim i, value dim j
        for (double& e : s) e *= std::exp(decay);
        Vec delta(hd);
        for (int j = 0; j < hd; ++j) {
          double mem = 0;
          for (int i = 0; i < hd; ++i) mem += s[size_t(i) * hd + j] * k[i];
          delta[j] = (v[j] - mem) * b_gate;
        }
        for (int i = 0; i < hd; ++i) {
          for (int j = 0; j < hd; ++j) s[size_t(i) * hd + j] += k[i] * delta[j];
        }
        double* oh = &out[size_t(vh) * hd];
        for (int j = 0; j < hd; ++j) {
          double acc = 0;
          for (int i = 0; i < hd; ++i) acc += s[size_t(i) * hd + j] * q[i];
          oh[j] = acc / std::sqrt(double(hd));
        }
        RmsNorm(oh, m.W(b + "ssm_norm.weight").data(), hd, m.eps, norm_offset);
        for (int j = 0; j < hd; ++j) oh[j] *= Silu(z[size_t(vh) * hd + j]);
      }
      mixed_out = MatVec(m.W(b + "ssm_out.weight"), out);
    }
    for (size_t i = 0; i < dim; ++i) x[i] += mixed_out[i];

    h = x;
    RmsNorm(h.data(), m.W(b + "post_attention_norm.weight").data(), dim, m.eps, norm_offset);
    Vec ffn;
    if (m.n_experts == 0) {
      const size_t ff = m.shapes["ffn"][0];
      ffn = SwiGlu(m.W(b + "ffn_gate.weight").data(), m.W(b + "ffn_up.weight").data(),
                   m.W(b + "ffn_down.weight").data(), h, ff);
    } else {
      const size_t ff = m.shapes["ffn"][0], sh = m.shapes["ffn"][1];
      const Vec logits = MatVec(m.W(b + "ffn_gate_inp.weight"), h);
      const double mx = *std::max_element(logits.begin(), logits.end());
      Vec probs(logits.size());
      double sum = 0;
      for (size_t e = 0; e < probs.size(); ++e) sum += (probs[e] = std::exp(logits[e] - mx));
      for (double& p : probs) p /= sum;
      std::vector<int> order(probs.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return probs[i] > probs[j]; });
      double chosen = 0;
      for (int i = 0; i < m.n_used; ++i) chosen += probs[order[i]];
      ffn.assign(dim, 0.0);
      for (int i = 0; i < m.n_used; ++i) {
        const size_t e = order[i];
        const Vec y = SwiGlu(&m.W(b + "ffn_gate_exps.weight")[e * ff * dim], &m.W(b + "ffn_up_exps.weight")[e * ff * dim],
                             &m.W(b + "ffn_down_exps.weight")[e * ff * dim], h, ff);
        for (size_t d = 0; d < dim; ++d) ffn[d] += probs[e] / chosen * y[d];
      }
      const Vec shared = SwiGlu(m.W(b + "ffn_gate_shexp.weight").data(), m.W(b + "ffn_up_shexp.weight").data(),
                                m.W(b + "ffn_down_shexp.weight").data(), h, sh);
      const Vec& shared_gate = m.W(b + "ffn_gate_inp_shexp.weight");
      const double gate = Sigmoid(std::inner_product(h.begin(), h.end(), shared_gate.begin(), 0.0));
      for (size_t d = 0; d < dim; ++d) ffn[d] += gate * shared[d];
    }
    for (size_t i = 0; i < dim; ++i) x[i] += ffn[i];
  }
  RmsNorm(x.data(), m.W("output_norm.weight").data(), dim, m.eps, norm_offset);
  ++position_;
  return MatVec(m.w.contains("output.weight") ? m.W("output.weight") : embd, x);
}

}  // namespace octo::testing
