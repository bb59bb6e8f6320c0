#include "tests/daemon/engine/encoder_reference.h"

#include "tests/daemon/engine/reference_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/gguf.h"
#include "storage/status_macros.h"

namespace octo::testing {
namespace {

using Vec = std::vector<double>;
using Shape = std::vector<uint64_t>;

// out (rows) = W (rows, cols) . x; W row-major (a GGUF tensor [cols, rows]).
Vec MatVec(const Vec& w, const Vec& x) {
  const size_t cols = x.size(), rows = w.size() / cols;
  Vec out(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += w[r * cols + c] * x[c];
    out[r] = sum;
  }
  return out;
}

void AddTo(Vec& x, const Vec& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

void LayerNorm(Vec& x, const Vec& w, const Vec& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(var + eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) * scale * w[i] + b[i];
}

double GeluTanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// NEOX rotation of a head's first rope_dim values: (i, i + rope_dim/2)
// turns by pos * base^(-2i / rope_dim).
void Rope(double* head, int pos, int rope_dim, double base) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = pos * std::pow(base, -2.0 * i / rope_dim);
    const double x0 = head[i], x1 = head[i + half];
    head[i] = x0 * std::cos(theta) - x1 * std::sin(theta);
    head[i + half] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

}  // namespace

struct EncoderReference::Model {
  bool bert = true;
  int dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, rope_dim = 0, vocab = 0, ff = 0;
  double eps = 0, rope_base = 0;
  absl::flat_hash_map<std::string, Vec> w;  // every tensor read, as double

  const Vec& W(const std::string& name) const { return w.at(name); }
  // Row r of a matrix tensor [cols, rows].
  Vec Row(const std::string& name, int r) const {
    const Vec& m = W(name);
    return Vec(m.begin() + static_cast<ptrdiff_t>(r) * dim, m.begin() + static_cast<ptrdiff_t>(r + 1) * dim);
  }
};

namespace {

// Reads `name` (F32, of exactly `shape`) into m.w.
absl::Status Read(const GgufFile& g, const std::string& name, const Shape& shape, EncoderReference::Model& m) {
  OCTO_ASSIGN_OR_RETURN(m.w[name], ReferenceTensor(g, name, shape));
  return absl::OkStatus();
}

absl::Status ReadAll(const GgufFile& g, EncoderReference::Model& m) {
  const uint64_t dim = m.dim, ff = m.ff;
  const uint64_t q_dim = uint64_t(m.n_heads) * m.head_dim, kv_dim = uint64_t(m.n_kv_heads) * m.head_dim;
  OCTO_RETURN_IF_ERROR(Read(g, "token_embd.weight", {dim, uint64_t(m.vocab)}, m));
  OCTO_RETURN_IF_ERROR(Read(g, "token_types.weight", {dim, g.FindTensor("token_types.weight") != nullptr
                                                               ? g.FindTensor("token_types.weight")->dims.back()
                                                               : 0},
                            m));
  if (m.bert) {
    const GgufTensorInfo* pos = g.FindTensor("position_embd.weight");
    OCTO_RETURN_IF_ERROR(Read(g, "position_embd.weight", {dim, pos != nullptr ? pos->dims.back() : 0}, m));
  }
  OCTO_RETURN_IF_ERROR(Read(g, "token_embd_norm.weight", {dim}, m));
  OCTO_RETURN_IF_ERROR(Read(g, "token_embd_norm.bias", {dim}, m));
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    if (m.bert) {
      for (const char* name : {"attn_q", "attn_k", "attn_v"}) {
        const uint64_t rows = name[5] == 'q' ? q_dim : kv_dim;
        OCTO_RETURN_IF_ERROR(Read(g, b + name + ".weight", {dim, rows}, m));
        OCTO_RETURN_IF_ERROR(Read(g, b + name + ".bias", {rows}, m));
      }
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_output.bias", {dim}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_up.bias", {ff}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_down.bias", {dim}, m));
    } else {
      OCTO_RETURN_IF_ERROR(Read(g, b + "attn_qkv.weight", {dim, q_dim + 2 * kv_dim}, m));
      OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_gate.weight", {dim, ff}, m));
    }
    OCTO_RETURN_IF_ERROR(Read(g, b + "attn_output.weight", {q_dim, dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "attn_output_norm.weight", {dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "attn_output_norm.bias", {dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_up.weight", {dim, ff}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "ffn_down.weight", {ff, dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "layer_output_norm.weight", {dim}, m));
    OCTO_RETURN_IF_ERROR(Read(g, b + "layer_output_norm.bias", {dim}, m));
  }
  return absl::OkStatus();
}

}  // namespace

EncoderReference::~EncoderReference() = default;

int EncoderReference::dim() const { return m_->dim; }

absl::StatusOr<std::unique_ptr<EncoderReference>> EncoderReference::Load(const std::string& path,
                                                                         const EncoderReferenceOptions& options) {
  OCTO_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Open(path));
  const GgufValue* arch_value = g.Find("general.architecture");
  if (arch_value == nullptr) return absl::InvalidArgumentError("missing metadata key general.architecture");
  OCTO_ASSIGN_OR_RETURN(absl::string_view arch, arch_value->AsString());
  if (arch != "bert" && arch != "nomic-bert") return absl::InvalidArgumentError(absl::StrCat(arch, " is no encoder"));
  auto m = std::make_unique<Model>();
  m->bert = arch == "bert";
  const std::string p = absl::StrCat(arch, ".");
  auto int_key = [&](const std::string& key) -> absl::StatusOr<int> {
    OCTO_ASSIGN_OR_RETURN(double v, ReferenceNumber(g, p + key));
    return static_cast<int>(v);
  };
  OCTO_ASSIGN_OR_RETURN(m->dim, int_key("embedding_length"));
  OCTO_ASSIGN_OR_RETURN(m->n_layers, int_key("block_count"));
  OCTO_ASSIGN_OR_RETURN(m->n_heads, int_key("attention.head_count"));
  OCTO_ASSIGN_OR_RETURN(m->n_kv_heads, int_key("attention.head_count_kv"));
  OCTO_ASSIGN_OR_RETURN(m->ff, int_key("feed_forward_length"));
  OCTO_ASSIGN_OR_RETURN(m->eps, ReferenceNumber(g, p + "attention.layer_norm_epsilon"));
  m->head_dim = m->dim / m->n_heads;
  m->rope_dim = m->head_dim;
  if (!m->bert) {
    OCTO_ASSIGN_OR_RETURN(m->rope_base, ReferenceNumber(g, p + "rope.freq_base"));
  }
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) return absl::InvalidArgumentError("missing tensor token_embd.weight");
  m->vocab = static_cast<int>(embd->dims[1]);
  OCTO_RETURN_IF_ERROR(ReadAll(g, *m));
  std::unique_ptr<EncoderReference> ref(new EncoderReference());
  ref->m_ = std::move(m);
  ref->options_ = options;
  return ref;
}

std::vector<std::vector<double>> EncoderReference::Hidden(std::span<const int32_t> tokens) const {
  const Model& m = *m_;
  const int n = static_cast<int>(tokens.size());
  const int q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  std::vector<Vec> x(n);
  for (int t = 0; t < n; ++t) {
    x[t] = m.Row("token_embd.weight", tokens[t]);
    AddTo(x[t], m.Row("token_types.weight", 0));
    if (m.bert && !options_.skip_positions) AddTo(x[t], m.Row("position_embd.weight", t));
    LayerNorm(x[t], m.W("token_embd_norm.weight"), m.W("token_embd_norm.bias"), m.eps);
  }
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      if (m.bert) {
        q[t] = MatVec(m.W(b + "attn_q.weight"), x[t]);
        k[t] = MatVec(m.W(b + "attn_k.weight"), x[t]);
        v[t] = MatVec(m.W(b + "attn_v.weight"), x[t]);
        AddTo(q[t], m.W(b + "attn_q.bias"));
        AddTo(k[t], m.W(b + "attn_k.bias"));
        AddTo(v[t], m.W(b + "attn_v.bias"));
      } else {  // fused rows: q, then k, then v
        const Vec qkv = MatVec(m.W(b + "attn_qkv.weight"), x[t]);
        q[t].assign(qkv.begin(), qkv.begin() + q_dim);
        k[t].assign(qkv.begin() + q_dim, qkv.begin() + q_dim + kv_dim);
        v[t].assign(qkv.begin() + q_dim + kv_dim, qkv.end());
        for (int h = 0; h < m.n_heads; ++h) Rope(q[t].data() + h * m.head_dim, t, m.rope_dim, m.rope_base);
        for (int h = 0; h < m.n_kv_heads; ++h) Rope(k[t].data() + h * m.head_dim, t, m.rope_dim, m.rope_base);
      }
    }
    for (int t = 0; t < n; ++t) {
      Vec att(q_dim, 0.0);
      const int seen = options_.causal ? t + 1 : n;
      for (int h = 0; h < m.n_heads; ++h) {
        const int kvh = h / (m.n_heads / m.n_kv_heads);
        Vec score(seen);
        double mx = -INFINITY;
        for (int j = 0; j < seen; ++j) {
          double dot = 0;
          for (int i = 0; i < m.head_dim; ++i) dot += q[t][h * m.head_dim + i] * k[j][kvh * m.head_dim + i];
          score[j] = dot / std::sqrt(static_cast<double>(m.head_dim));
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (double& s : score) sum += (s = std::exp(s - mx));
        for (int j = 0; j < seen; ++j) {
          for (int i = 0; i < m.head_dim; ++i) att[h * m.head_dim + i] += score[j] / sum * v[j][kvh * m.head_dim + i];
        }
      }
      Vec out = MatVec(m.W(b + "attn_output.weight"), att);
      if (m.bert) AddTo(out, m.W(b + "attn_output.bias"));
      AddTo(x[t], out);
      LayerNorm(x[t], m.W(b + "attn_output_norm.weight"), m.W(b + "attn_output_norm.bias"), m.eps);
    }
    for (int t = 0; t < n; ++t) {
      Vec up = MatVec(m.W(b + "ffn_up.weight"), x[t]);
      if (m.bert) {
        AddTo(up, m.W(b + "ffn_up.bias"));
        for (double& u : up) u = GeluTanh(u);
      } else {
        const Vec gate = MatVec(m.W(b + "ffn_gate.weight"), x[t]);
        for (size_t i = 0; i < up.size(); ++i) up[i] *= Silu(gate[i]);
      }
      Vec down = MatVec(m.W(b + "ffn_down.weight"), up);
      if (m.bert) AddTo(down, m.W(b + "ffn_down.bias"));
      AddTo(x[t], down);
      LayerNorm(x[t], m.W(b + "layer_output_norm.weight"), m.W(b + "layer_output_norm.bias"), m.eps);
    }
  }
  return x;
}

std::vector<double> EncoderReference::Embedding(std::span<const int32_t> tokens, const std::string& pooling) const {
  const std::vector<Vec> h = Hidden(tokens);
  Vec e(static_cast<size_t>(m_->dim), 0.0);
  if (pooling == "mean") {
    for (const Vec& row : h) AddTo(e, row);
  } else {
    e = pooling == "cls" ? h.front() : h.back();
  }
  double norm = 0;
  for (double v : e) norm += v * v;
  norm = std::sqrt(norm);
  for (double& v : e) v = norm > 0 ? v / norm : 0;
  return e;
}

}  // namespace octo::testing
