#include "tests/tools/widen_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/gguf.h"
#include "storage/model_config.h"
#include "storage/status_macros.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

// F32/F16/BF16 zero bits are +0; every element of the quantized types is a
// product with its block's fp16 scale d (Q4_1, Q5_1, Q2_K, Q4_K and Q5_K add
// a product with a min or dmin), which zero bytes make +0.
constexpr GgmlType kZeroBlockTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,   GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,   GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
    // d = 0 (IQ1_M: its fp16 bits in the scale words, all zero)
    GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS, GgmlType::kIQ3_S,
    GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kTQ1_0, GgmlType::kTQ2_0,
    GgmlType::kMXFP4};  // a zero scale byte is 2^-127, but every zero nibble is the value 0

// Why the dim ratio R must be a power of 4: sqrt(R) is then a power of 2.
bool IsPowerOf4(uint32_t r) { return std::has_single_bit(r) && std::countr_zero(r) % 2 == 0; }

absl::StatusOr<std::string> GetString(const GgufFile& gguf, const std::string& key) {
  const GgufValue* value = gguf.Find(key);
  if (value == nullptr) return absl::InvalidArgumentError("missing metadata key " + key);
  absl::StatusOr<absl::string_view> s = value->AsString();
  if (!s.ok()) return Annotate(s.status(), key);
  return std::string(*s);
}

// The small model's shape in the generator's terms, from its metadata and
// tensor shapes. Only dense llama models.
absl::StatusOr<ModelShape> SmallShape(const GgufFile& gguf) {
  OCTO_ASSIGN_OR_RETURN(const std::string arch, GetString(gguf, "general.architecture"));
  if (arch != "llama") {
    return absl::InvalidArgumentError(absl::StrCat("architecture '", arch,
                                                   "' cannot be widened: only dense llama models can (qwen2, "
                                                   "qwen3, MoE and hybrid models are not supported)"));
  }
  OCTO_ASSIGN_OR_RETURN(const ModelConfig c, ModelConfigFromGguf(gguf));
  if (c.n_experts > 0) {
    return absl::InvalidArgumentError(absl::StrCat("a mixture-of-experts llama (expert_count ", c.n_experts,
                                                   ") cannot be widened: only dense llama models can"));
  }
  ModelShape s;
  s.name = c.name;
  s.architecture = c.architecture;
  s.dim = c.dim;
  s.hidden_dim = c.hidden_dim;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.vocab_size = c.vocab_size;
  s.context_length = c.context_length;
  s.rope_theta = c.rope_theta;
  s.rope_dim = c.rope_dim == c.head_dim ? 0 : c.rope_dim;
  s.norm_eps = c.norm_eps;
  s.tied_embeddings = c.tied_embeddings;
  OCTO_ASSIGN_OR_RETURN(s.tokenizer_model, GetString(gguf, "tokenizer.ggml.model"));
  if (gguf.Find("tokenizer.ggml.pre") != nullptr) {
    OCTO_ASSIGN_OR_RETURN(s.tokenizer_pre, GetString(gguf, "tokenizer.ggml.pre"));
  }
  OCTO_RETURN_IF_ERROR(ValidateShape(s));
  return s;
}

// The small shape with the wider sizes of `o`, checked as the header says.
absl::StatusOr<ModelShape> WideShape(const ModelShape& small, const WidenOptions& o) {
  ModelShape w = small;
  w.name = absl::StrCat(o.name, " widened from ", small.name);
  const auto pick = [](uint32_t wide, uint32_t small_value) { return wide != 0 ? wide : small_value; };
  w.dim = pick(o.dim, small.dim);
  w.hidden_dim = pick(o.hidden_dim, small.hidden_dim);
  w.n_layers = pick(o.n_layers, small.n_layers);
  w.n_heads = pick(o.n_heads, small.n_heads);
  w.n_kv_heads = pick(o.n_kv_heads, small.n_kv_heads);
  for (const auto& [field, wide, small_value] :
       {std::tuple("dim", w.dim, small.dim), std::tuple("hidden_dim", w.hidden_dim, small.hidden_dim),
        std::tuple("n_layers", w.n_layers, small.n_layers), std::tuple("n_heads", w.n_heads, small.n_heads),
        std::tuple("n_kv_heads", w.n_kv_heads, small.n_kv_heads)}) {
    if (wide < small_value) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (", wide, ") is smaller than the small model's (", small_value, ")"));
    }
  }
  if (w.dim % small.dim != 0 || !IsPowerOf4(w.dim / small.dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dim (", w.dim, ") is not a power-of-4 multiple (1, 4, 16, ...) of the small model's (", small.dim,
        "): RMSNorm weights scale by 1/sqrt(ratio), which must be a power of 2 to be exact"));
  }
  for (const auto& [field, wide, small_value] : {std::tuple("n_heads", w.n_heads, small.n_heads),
                                                 std::tuple("n_kv_heads", w.n_kv_heads, small.n_kv_heads)}) {
    if (wide % small_value != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (", wide, ") is not a multiple of the small model's (", small_value, ")"));
    }
  }
  const uint32_t group = small.n_heads / small.n_kv_heads;
  if (w.n_heads != group * w.n_kv_heads) {
    return absl::InvalidArgumentError(absl::StrCat("group size (n_heads / n_kv_heads): ", w.n_heads, " / ",
                                                   w.n_kv_heads, " is not the small model's ", group,
                                                   ", so wide head h would not read small head h's kv head"));
  }
  for (const auto& [field, wide, small_value] : {std::tuple("head_dim", o.head_dim, small.head_dim),
                                                 std::tuple("vocab_size", o.vocab_size, small.vocab_size)}) {
    if (wide != 0 && wide != small_value) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (", wide, ") differs from the small model's (", small_value, ")"));
    }
  }
  if (!std::isfinite(o.extra_layer_norm)) {
    return absl::InvalidArgumentError(absl::StrCat("extra_layer_norm (", o.extra_layer_norm, ") is not finite"));
  }
  // The wide mean square is the small one / R: eps / R keeps the norm's
  // scale exactly sqrt(R) times the small one's (R is a power of 4).
  w.norm_eps = small.norm_eps / static_cast<float>(w.dim / small.dim);
  OCTO_RETURN_IF_ERROR(ValidateShape(w));
  return w;
}

// The generator's tensors for `shape`: names, dims and inits (types F32,
// placeholders).
absl::StatusOr<std::vector<TensorSpec>> TensorLayout(const ModelShape& shape) {
  OCTO_ASSIGN_OR_RETURN(const TypeRecipe f32, ParseTypeRecipe("F32"));
  return BuildTensorList(shape, f32);
}

// The small file holds exactly the generator's tensors for its shape, with
// F32 RMSNorm weights (they are scaled as floats).
absl::Status CheckSmallTensors(const GgufFile& gguf, std::span<const TensorSpec> layout) {
  absl::flat_hash_set<absl::string_view> expected;
  for (const TensorSpec& spec : layout) {
    expected.insert(spec.name);
    const GgufTensorInfo* t = gguf.FindTensor(spec.name);
    if (t == nullptr) return absl::InvalidArgumentError("missing tensor " + spec.name);
    if (t->dims != spec.dims) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", spec.name, " is [", absl::StrJoin(t->dims, ", "),
                                                     "], the shape's is [", absl::StrJoin(spec.dims, ", "), "]"));
    }
    if (spec.init == TensorInit::kNorm && t->type.type != GgmlType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat("RMSNorm weight ", spec.name, " is ", t->type.name, "; only F32 norms can be scaled"));
    }
  }
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (!expected.contains(t.name)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " is not one a dense llama of this shape has"));
    }
  }
  return absl::OkStatus();
}

// The small file's vocabulary is the one the generator makes for the shape
// (so AddModelMetadata writes it again for the wide one).
absl::Status CheckVocab(const GgufFile& gguf, const ModelShape& shape, const GeneratedVocab& vocab) {
  const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::kArray || tokens->element_type != GgufValueType::kString) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens is missing or not an array of strings");
  }
  if (tokens->strings != vocab.tokens) {
    size_t i = 0;
    while (i < tokens->strings.size() && i < vocab.tokens.size() && tokens->strings[i] == vocab.tokens[i]) ++i;
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.ggml.tokens differ from the generator's vocabulary for tokenizer '", shape.tokenizer_model,
        "', vocab_size ", shape.vocab_size, " (first at id ", i,
        "): only models octo-make-model wrote can be widened"));
  }
  return absl::OkStatus();
}

// One tensor of the wide file and where its bytes come from.
struct WideTensor {
  enum class Source {
    kPadded,    // the small tensor of the same name in the corner, zeros elsewhere
    kRandom,    // FillRandomBlocks (an extra layer's matrices)
    kConstant,  // every F32 value is `value` (an extra layer's norms)
  };
  TensorSpec spec;  // name, type (the small model's), wide dims, bytes
  Source source = Source::kPadded;
  const GgufTensorInfo* small = nullptr;              // kPadded: the tensor in the corner
  const std::vector<uint8_t>* small_bytes = nullptr;  // kPadded: all of its data
  float scale = 1;                                    // kPadded F32: multiplies every value (norms: 1/sqrt(R))
  float value = 0;                                    // kConstant
};

// "blk.<layer>.<rest>": the layer, and `rest`; nullopt for global tensors.
std::optional<uint32_t> LayerOf(absl::string_view name, absl::string_view& rest) {
  if (!absl::ConsumePrefix(&name, "blk.")) return std::nullopt;
  const size_t dot = name.find('.');
  uint32_t layer = 0;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &layer)) return std::nullopt;
  rest = name.substr(dot + 1);
  return layer;
}

// The wide tensors in the generator's order, each in the small model's type
// for its name (layer 0's for an extra layer), with where its bytes come from.
absl::StatusOr<std::vector<WideTensor>> PlanWideTensors(
    const ModelShape& wide, const ModelShape& small, const GgufFile& gguf,
    const absl::flat_hash_map<std::string, std::vector<uint8_t>>& small_data, float extra_layer_norm) {
  const float norm_scale = std::ldexp(1.0f, -std::countr_zero(wide.dim / small.dim) / 2);  // 1/sqrt(R)
  OCTO_ASSIGN_OR_RETURN(std::vector<TensorSpec> layout, TensorLayout(wide));
  std::vector<WideTensor> tensors;
  for (TensorSpec& spec : layout) {
    absl::string_view rest;
    const std::optional<uint32_t> layer = LayerOf(spec.name, rest);
    const bool extra = layer.has_value() && *layer >= small.n_layers;
    // An extra layer takes each tensor's type from the small model's layer 0.
    const std::string small_name = extra ? absl::StrCat("blk.0.", rest) : spec.name;
    const GgufTensorInfo* small_tensor = gguf.FindTensor(small_name);
    if (small_tensor == nullptr) return absl::InternalError("no small tensor " + small_name + " for " + spec.name);
    spec.type = small_tensor->type;
    uint64_t n_elements = 1;
    for (uint64_t d : spec.dims) n_elements *= d;  // u32 sizes, at most 2 dims: no overflow
    absl::StatusOr<uint64_t> n_bytes = GgmlTensorBytes(spec.type, spec.dims[0], n_elements);
    if (!n_bytes.ok()) return Annotate(n_bytes.status(), absl::StrCat("tensor ", spec.name, " as ", spec.type.name));
    spec.n_bytes = *n_bytes;

    WideTensor t{.spec = std::move(spec)};
    if (extra) {
      t.source = t.spec.init == TensorInit::kNorm ? WideTensor::Source::kConstant : WideTensor::Source::kRandom;
      t.value = extra_layer_norm;
    } else {
      // Row r of the small tensor is a prefix of wide row r: 1-D or 2-D only.
      if (t.spec.dims.size() > 2) return absl::InternalError("cannot pad tensor " + t.spec.name + ": more than 2-D");
      if (!ZeroBytesAreZeroBlock(t.spec.type.type)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", t.spec.name, " is ", t.spec.type.name,
                                                       ", whose all-zero block does not decode to zeros"));
      }
      t.small = small_tensor;
      t.small_bytes = &small_data.at(small_tensor->name);
      if (t.spec.init == TensorInit::kNorm) t.scale = norm_scale;
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Bytes [offset, offset + out.size()) of a padded tensor: wide row r holds
// small row r's bytes then zeros; the rows past the small ones are zeros.
void FillPadded(const WideTensor& t, uint64_t offset, std::span<uint8_t> out) {
  const GgufTensorInfo& small = *t.small;
  const uint64_t small_row_bytes = RowBytes(small.type.type, static_cast<int64_t>(small.dims[0]));
  const uint64_t wide_row_bytes = RowBytes(t.spec.type.type, static_cast<int64_t>(t.spec.dims[0]));
  const uint64_t small_rows = small.n_elements / small.dims[0];
  const uint64_t end = offset + out.size();
  std::fill(out.begin(), out.end(), uint8_t{0});
  for (uint64_t row = offset / wide_row_bytes; row < small_rows && row * wide_row_bytes < end; ++row) {
    const uint64_t row_start = row * wide_row_bytes;
    const uint64_t lo = std::max(offset, row_start);
    const uint64_t hi = std::min(end, row_start + small_row_bytes);
    if (lo < hi) {
      std::memcpy(out.data() + (lo - offset), t.small_bytes->data() + row * small_row_bytes + (lo - row_start),
                  hi - lo);
    }
  }
  if (t.scale == 1) return;
  for (size_t i = 0; i + 4 <= out.size(); i += 4) {  // F32: chunks are whole 4-byte blocks
    float v;
    std::memcpy(&v, out.data() + i, 4);
    v *= t.scale;
    std::memcpy(out.data() + i, &v, 4);
  }
}

void FillConstant(float value, std::span<uint8_t> out) {
  for (size_t i = 0; i + 4 <= out.size(); i += 4) std::memcpy(out.data() + i, &value, 4);
}

}  // namespace

bool ZeroBytesAreZeroBlock(GgmlType type) {
  return std::find(std::begin(kZeroBlockTypes), std::end(kZeroBlockTypes), type) != std::end(kZeroBlockTypes);
}

absl::Status WidenModel(const std::string& small_gguf, const WidenOptions& options, const std::string& out_gguf,
                        uint64_t seed, const WriteProgress& progress) {
  OCTO_ASSIGN_OR_RETURN(const GgufFile small_file, GgufFile::Open(small_gguf));
  const auto in_small = [&](const absl::Status& status) { return Annotate(status, small_gguf); };

  // Shapes: the small one as the file says, the wide one from the options.
  absl::StatusOr<ModelShape> small = SmallShape(small_file);
  if (!small.ok()) return in_small(small.status());
  absl::StatusOr<ModelShape> wide = WideShape(*small, options);
  if (!wide.ok()) return Annotate(wide.status(), "widening " + small_gguf);
  OCTO_ASSIGN_OR_RETURN(const std::vector<TensorSpec> small_layout, TensorLayout(*small));
  if (absl::Status s = CheckSmallTensors(small_file, small_layout); !s.ok()) return in_small(s);
  OCTO_ASSIGN_OR_RETURN(const GeneratedVocab vocab, MakeVocab(*wide));
  if (absl::Status s = CheckVocab(small_file, *small, vocab); !s.ok()) return in_small(s);

  // The small model, whole.
  absl::flat_hash_map<std::string, std::vector<uint8_t>> small_data;
  for (const GgufTensorInfo& t : small_file.tensors()) {
    std::vector<uint8_t>& bytes = small_data[t.name];
    bytes.resize(t.n_bytes);
    OCTO_RETURN_IF_ERROR(small_file.ReadTensorData(t, 0, bytes));
  }
  OCTO_ASSIGN_OR_RETURN(const std::vector<WideTensor> tensors,
                        PlanWideTensors(*wide, *small, small_file, small_data, options.extra_layer_norm));

  // Metadata: the generator's for the wide shape, with the small file type.
  uint32_t file_type = 0;
  if (const GgufValue* v = small_file.Find("general.file_type"); v != nullptr) {
    absl::StatusOr<uint64_t> n = v->AsUint64();
    if (!n.ok() || *n > std::numeric_limits<uint32_t>::max()) {
      return in_small(absl::InvalidArgumentError("general.file_type is not a u32"));
    }
    file_type = static_cast<uint32_t>(*n);
  }
  const TypeRecipe recipe{.name = "from " + small_gguf, .base = tensors.front().spec.type, .file_type = file_type};
  GgufWriter writer(static_cast<uint32_t>(small_file.alignment()));
  AddModelMetadata(*wide, recipe, vocab, writer);
  for (const WideTensor& t : tensors) {
    OCTO_RETURN_IF_ERROR(writer.AddTensor(t.spec.name, t.spec.type.type, t.spec.dims));
  }

  size_t current = std::numeric_limits<size_t>::max();
  Rng rng(seed);
  auto fill = [&](size_t index, uint64_t offset, std::span<uint8_t> out) -> absl::Status {
    const WideTensor& t = tensors[index];
    switch (t.source) {
      case WideTensor::Source::kPadded:
        FillPadded(t, offset, out);
        return absl::OkStatus();
      case WideTensor::Source::kRandom:
        if (index != current) {  // chunks arrive in order: one stream per tensor, as WriteModel
          current = index;
          rng = Rng(seed, index);
        }
        return FillRandomBlocks(t.spec.type, out, rng);
      case WideTensor::Source::kConstant:
        FillConstant(t.value, out);
        return absl::OkStatus();
    }
    return absl::InternalError("unknown tensor source");
  };
  return writer.WriteFile(out_gguf, fill, progress);
}

}  // namespace octo::testing
