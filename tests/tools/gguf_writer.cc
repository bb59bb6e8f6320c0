#include "tests/tools/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/iq_blocks.h"
#include "storage/status_macros.h"

namespace octo::testing {
namespace {

constexpr char kAlignmentKey[] = "general.alignment";

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void PutString(std::string& out, absl::string_view s) {
  Put<uint64_t>(out, s.size());
  out.append(s.data(), s.size());
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Owns the ".tmp" file while it is written: closes it and, unless Commit()
// ran, removes it.
class TmpFile {
 public:
  explicit TmpFile(std::string path) : path_(std::move(path)) {}
  ~TmpFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TmpFile(const TmpFile&) = delete;
  TmpFile& operator=(const TmpFile&) = delete;

  absl::Status Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd_ >= 0 ? absl::OkStatus() : ErrnoError("cannot create", path_);
  }
  absl::Status Write(std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoError("cannot write", path_);
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status WriteZeros(uint64_t n) {
    static constexpr uint8_t kZeros[4096] = {};
    while (n > 0) {
      const uint64_t step = std::min<uint64_t>(n, sizeof(kZeros));
      OCTO_RETURN_IF_ERROR(Write(std::span<const uint8_t>(kZeros, step)));
      n -= step;
    }
    return absl::OkStatus();
  }
  // Closes the file and renames it to `final_path`.
  absl::Status CommitAs(const std::string& final_path) {
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return ErrnoError("cannot close", path_);
    if (std::rename(path_.c_str(), final_path.c_str()) != 0) return ErrnoError("cannot rename to", final_path);
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > kGgufMaxAlignment) {
    status_ = absl::InvalidArgumentError(absl::StrCat(
        "GGUF alignment ", alignment, " is not a power of two <= kGgufMaxAlignment (", kGgufMaxAlignment, ")"));
  }
}

void GgufWriter::BeginKv(absl::string_view key, GgufValueType type) {
  if (key == kAlignmentKey) alignment_key_seen_ = true;
  if (!keys_.emplace(key).second && status_.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat("metadata key '", key, "' added twice"));
  }
  PutString(kv_bytes_, key);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(type));
  ++kv_count_;
}

template <typename T>
void GgufWriter::AddScalar(absl::string_view key, GgufValueType type, T value) {
  BeginKv(key, type);
  Put<T>(kv_bytes_, value);
}

template <typename T>
void GgufWriter::AddArray(absl::string_view key, GgufValueType elem_type, std::span<const T> values) {
  BeginKv(key, GgufValueType::kArray);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(elem_type));
  Put<uint64_t>(kv_bytes_, values.size());
  const size_t at = kv_bytes_.size();
  kv_bytes_.resize(at + values.size_bytes());
  std::memcpy(kv_bytes_.data() + at, values.data(), values.size_bytes());
}

void GgufWriter::AddU8(absl::string_view key, uint8_t value) { AddScalar(key, GgufValueType::kUint8, value); }
void GgufWriter::AddI8(absl::string_view key, int8_t value) { AddScalar(key, GgufValueType::kInt8, value); }
void GgufWriter::AddU16(absl::string_view key, uint16_t value) { AddScalar(key, GgufValueType::kUint16, value); }
void GgufWriter::AddI16(absl::string_view key, int16_t value) { AddScalar(key, GgufValueType::kInt16, value); }
void GgufWriter::AddI32(absl::string_view key, int32_t value) { AddScalar(key, GgufValueType::kInt32, value); }
void GgufWriter::AddF32(absl::string_view key, float value) { AddScalar(key, GgufValueType::kFloat32, value); }
void GgufWriter::AddBool(absl::string_view key, bool value) {
  AddScalar<uint8_t>(key, GgufValueType::kBool, value ? 1 : 0);
}
void GgufWriter::AddU64(absl::string_view key, uint64_t value) { AddScalar(key, GgufValueType::kUint64, value); }
void GgufWriter::AddI64(absl::string_view key, int64_t value) { AddScalar(key, GgufValueType::kInt64, value); }
void GgufWriter::AddF64(absl::string_view key, double value) { AddScalar(key, GgufValueType::kFloat64, value); }

void GgufWriter::AddU32(absl::string_view key, uint32_t value) {
  if (key == kAlignmentKey && value != alignment_ && status_.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat(kAlignmentKey, " = ", value, " disagrees with the writer's alignment ", alignment_));
  }
  AddScalar(key, GgufValueType::kUint32, value);
}

void GgufWriter::AddString(absl::string_view key, absl::string_view value) {
  BeginKv(key, GgufValueType::kString);
  PutString(kv_bytes_, value);
}

void GgufWriter::AddStringArray(absl::string_view key, std::span<const std::string> values) {
  BeginKv(key, GgufValueType::kArray);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(kv_bytes_, values.size());
  for (const std::string& value : values) PutString(kv_bytes_, value);
}

void GgufWriter::AddF32Array(absl::string_view key, std::span<const float> values) {
  AddArray(key, GgufValueType::kFloat32, values);
}
void GgufWriter::AddI32Array(absl::string_view key, std::span<const int32_t> values) {
  AddArray(key, GgufValueType::kInt32, values);
}
void GgufWriter::AddU32Array(absl::string_view key, std::span<const uint32_t> values) {
  AddArray(key, GgufValueType::kUint32, values);
}

void GgufWriter::AddRawKv(absl::string_view key, GgufValueType type, absl::string_view value_bytes) {
  BeginKv(key, type);
  kv_bytes_.append(value_bytes.data(), value_bytes.size());
}

absl::Status GgufWriter::AddTensor(absl::string_view name, GgmlType type, std::span<const uint64_t> dims) {
  OCTO_RETURN_IF_ERROR(status_);
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!tensor_names_.emplace(name).second) return absl::InvalidArgumentError(where + " added twice");
  if (dims.empty() || dims.size() > kGgufMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has ", dims.size(), " dims (1..", kGgufMaxDims, ")"));
  }
  uint64_t n_elements = 1;
  for (uint64_t dim : dims) {
    if (dim == 0) return absl::InvalidArgumentError(where + " has a zero dimension");
    if (__builtin_mul_overflow(n_elements, dim, &n_elements)) {
      return absl::OutOfRangeError(where + ": element count overflows 64 bits");
    }
  }
  OCTO_ASSIGN_OR_RETURN(const GgmlTypeInfo info, LookupGgmlType(static_cast<uint32_t>(type)));
  absl::StatusOr<uint64_t> n_bytes = GgmlTensorBytes(info, dims[0], n_elements);
  if (!n_bytes.ok()) return Annotate(n_bytes.status(), absl::StrCat(where, " (", info.name, ")"));

  GgufTensorEntry entry{std::string(name), info, {dims.begin(), dims.end()}, *n_bytes, data_size_};
  data_size_ = AlignUp(data_size_ + *n_bytes, alignment_);
  tensors_.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::StatusOr<std::string> GgufWriter::HeaderBytes() const {
  OCTO_RETURN_IF_ERROR(status_);
  std::string out;
  out.append("GGUF", 4);
  Put<uint32_t>(out, kGgufVersion);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, kv_count());
  out.append(kv_bytes_);
  if (ImplicitAlignmentKv()) {
    PutString(out, kAlignmentKey);
    Put<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kUint32));
    Put<uint32_t>(out, alignment_);
  }
  for (const GgufTensorEntry& tensor : tensors_) {
    PutString(out, tensor.name);
    Put<uint32_t>(out, static_cast<uint32_t>(tensor.dims.size()));
    for (uint64_t dim : tensor.dims) Put<uint64_t>(out, dim);
    Put<uint32_t>(out, static_cast<uint32_t>(tensor.type.type));
    Put<uint64_t>(out, tensor.offset);
  }
  out.resize(AlignUp(out.size(), alignment_), '\0');
  return out;
}

absl::StatusOr<uint64_t> GgufWriter::FileSize() const {
  OCTO_ASSIGN_OR_RETURN(const std::string header, HeaderBytes());
  return header.size() + data_size_;
}

absl::Status GgufWriter::WriteFile(const std::string& path, const TensorFiller& fill,
                                   const WriteProgress& progress) const {
  OCTO_ASSIGN_OR_RETURN(const std::string header, HeaderBytes());
  const uint64_t total = header.size() + data_size_;
  TmpFile file(path + ".tmp");
  OCTO_RETURN_IF_ERROR(file.Open());
  OCTO_RETURN_IF_ERROR(
      file.Write({reinterpret_cast<const uint8_t*>(header.data()), header.size()}));
  uint64_t written = header.size();
  if (progress) progress(written, total);

  std::vector<uint8_t> buffer(kGgufFillChunkBytes);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const GgufTensorEntry& tensor = tensors_[i];
    // Whole blocks per chunk, so a filler never sees a split block.
    const uint64_t chunk_max = kGgufFillChunkBytes / tensor.type.type_size * tensor.type.type_size;
    for (uint64_t offset = 0; offset < tensor.n_bytes; offset += chunk_max) {
      const uint64_t n = std::min(chunk_max, tensor.n_bytes - offset);
      std::span<uint8_t> chunk(buffer.data(), n);
      absl::Status filled = fill(i, offset, chunk);
      if (!filled.ok()) return Annotate(filled, absl::StrCat("filling tensor '", tensor.name, "'"));
      OCTO_RETURN_IF_ERROR(file.Write(chunk));
      written += n;
      if (progress) progress(written, total);
    }
    const uint64_t padding = AlignUp(tensor.n_bytes, alignment_) - tensor.n_bytes;
    OCTO_RETURN_IF_ERROR(file.WriteZeros(padding));
    written += padding;
  }
  OCTO_RETURN_IF_ERROR(file.CommitAs(path));
  if (progress) progress(written, total);
  return absl::OkStatus();
}


// --- Random data ---------------------------------------------------------------

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
  for (uint64_t& word : s_) {  // splitmix64
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    word = z ^ (z >> 31);
  }
}

float Rng::Normalish() {
  const uint64_t r = Next();
  const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  // Each 16-bit piece / 65536 is uniform on [0, 1): mean 1/2, variance 1/12.
  return (sum * 0x1.0p-16f - 2.0f) * 1.7320508f;
}

void Rng::FillBytes(std::span<uint8_t> out) {
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t r = Next();
    std::memcpy(out.data() + i, &r, 8);
  }
  if (i < out.size()) {
    const uint64_t r = Next();
    std::memcpy(out.data() + i, &r, out.size() - i);
  }
}

uint16_t FloatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return sign | 0x7e00;  // NaN
  if (x >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to Inf
  if (x < 0x38800000) {                       // below 2^-14: subnormal half or zero
    if (x < 0x33000000) return sign;          // at most 2^-25: rounds to zero
    const uint32_t mant = (x & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - (x >> 23);   // to units of 2^-24
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    uint32_t r = mant >> shift;
    r += (rem > halfway || (rem == halfway && (r & 1))) ? 1 : 0;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = x - 0x38000000;  // re-bias the exponent from 127 to 15
  const uint32_t rem = r & 0x1fff;
  r >>= 13;
  r += (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ? 1 : 0;
  return sign | static_cast<uint16_t>(r);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0x1.0p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToBf16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

namespace {

// Where a block keeps its fp16 scales and what values they get. d is drawn
// from [d_lo, d_hi); the second scale (m of Q4_1/Q5_1, dmin of the K types)
// is d * U[min_lo, min_hi), chosen to centre the decoded weights near zero
// (w = d*q + m, or d*sc*q - dmin*m). The d ranges give decoded weights a
// standard deviation of about 0.01-0.04 for uniformly random quant bytes.
struct ScaleLayout {
  GgmlType type;
  int d_offset;
  int min_offset;  // -1: the type has no second scale
  float d_lo, d_hi;
  float min_lo, min_hi;
};

constexpr ScaleLayout kScaleLayouts[] = {
    {GgmlType::kQ4_0, 0, -1, 2.2e-3f, 6.5e-3f, 0, 0},       // w = d*(q-8)
    {GgmlType::kQ4_1, 0, 2, 2.2e-3f, 6.5e-3f, -8.5f, -6.5f},  // w = d*q + m
    {GgmlType::kQ5_0, 0, -1, 1.1e-3f, 3.3e-3f, 0, 0},        // w = d*(q-16)
    {GgmlType::kQ5_1, 0, 2, 1.1e-3f, 3.3e-3f, -17.0f, -14.0f},
    {GgmlType::kQ8_0, 0, -1, 1.35e-4f, 4.0e-4f, 0, 0},       // w = d*q, q in i8
    {GgmlType::kQ2_K, 80, 82, 1.0e-3f, 3.0e-3f, 1.2f, 1.8f},  // 4-bit sc/m, 2-bit q
    {GgmlType::kQ3_K, 108, -1, 2.4e-4f, 7.0e-4f, 0, 0},      // w = d*(sc-32)*q
    {GgmlType::kQ4_K, 0, 2, 6.0e-5f, 1.8e-4f, 6.5f, 8.5f},    // 6-bit sc/m, 4-bit q
    {GgmlType::kQ5_K, 0, 2, 3.0e-5f, 9.0e-5f, 14.0f, 17.0f},  // 6-bit sc/m, 5-bit q
    {GgmlType::kQ6_K, 208, -1, 7.3e-6f, 2.2e-5f, 0, 0},      // w = d*sc*(q-32), sc i8
    {GgmlType::kIQ4_NL, 0, -1, 1.5e-4f, 4.5e-4f, 0, 0},      // w = d*kvalues[q]
    {GgmlType::kIQ4_XS, 0, -1, 8.0e-6f, 2.4e-5f, 0, 0},      // w = d*(ls-32)*kvalues[q]
    {GgmlType::kTQ1_0, 52, -1, 1.5e-2f, 4.5e-2f, 0, 0},      // w = d*t, t in -1..1
    {GgmlType::kTQ2_0, 64, -1, 1.5e-2f, 4.5e-2f, 0, 0},
    // IQ: w = d * ls * factor * L (kernels/iq_blocks.h); ls ~ 16 (IQ1: ~8).
    {GgmlType::kIQ2_XXS, 0, -1, 2.0e-4f, 6.0e-4f, 0, 0},     // L up to 43, factor 1/8
    {GgmlType::kIQ2_XS, 0, -1, 2.0e-4f, 6.0e-4f, 0, 0},
    {GgmlType::kIQ2_S, 0, -1, 2.0e-4f, 6.0e-4f, 0, 0},
    {GgmlType::kIQ3_XXS, 0, -1, 8.0e-5f, 2.4e-4f, 0, 0},     // L up to 62, factor 1/4
    {GgmlType::kIQ3_S, 0, -1, 8.0e-5f, 2.4e-4f, 0, 0},       // L up to 15, factor 1
    {GgmlType::kIQ1_S, 0, -1, 1.5e-3f, 4.5e-3f, 0, 0},       // L = 8t +- 1, factor 1/8
    {GgmlType::kIQ1_M, -1, -1, 1.5e-3f, 4.5e-3f, 0, 0},      // d in the scale words' top nibbles
};

// TQ2_0 stores t + 1 in two bits: 3 is no trit; make it 1 (t = 0).
void FixTq2Pairs(uint8_t* block) {
  for (int i = 0; i < 64; ++i) {
    for (int pair = 0; pair < 4; ++pair) {
      if (((block[i] >> (2 * pair)) & 3) == 3) block[i] = static_cast<uint8_t>(block[i] & ~(2 << (2 * pair)));
    }
  }
}

void PutHalf(uint8_t* at, float value) {
  const uint16_t bits = FloatToHalf(value);
  std::memcpy(at, &bits, 2);
}

}  // namespace

absl::Status FillRandomBlocks(const GgmlTypeInfo& type, std::span<uint8_t> out, Rng& rng) {
  if (out.size() % type.type_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.size(), " bytes is not a whole number of ", type.name, " blocks"));
  }
  switch (type.type) {
    case GgmlType::kF32:
      for (size_t i = 0; i < out.size(); i += 4) {
        const float v = rng.Normalish() * kRandomWeightStd;
        std::memcpy(out.data() + i, &v, 4);
      }
      return absl::OkStatus();
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      const bool half = type.type == GgmlType::kF16;
      for (size_t i = 0; i < out.size(); i += 2) {
        const float v = rng.Normalish() * kRandomWeightStd;
        const uint16_t bits = half ? FloatToHalf(v) : FloatToBf16(v);
        std::memcpy(out.data() + i, &bits, 2);
      }
      return absl::OkStatus();
    }
    default:
      break;
  }
  if (type.type == GgmlType::kMXFP4) {  // E8M0 scale 2^-8 .. 2^-6: weights of std ~0.01-0.04
    rng.FillBytes(out);
    for (size_t at = 0; at < out.size(); at += type.type_size) out[at] = static_cast<uint8_t>(119 + rng.Uniform() * 3);
    return absl::OkStatus();
  }
  for (const ScaleLayout& layout : kScaleLayouts) {
    if (layout.type != type.type) continue;
    rng.FillBytes(out);
    for (size_t at = 0; at < out.size(); at += type.type_size) {
      uint8_t* block = out.data() + at;
      const float d = rng.Uniform(layout.d_lo, layout.d_hi);
      if (layout.d_offset >= 0) PutHalf(block + layout.d_offset, d);
      if (type.type == GgmlType::kIQ1_M) cpu::iq::Iq1MTraits::SetDBits(block, FloatToHalf(d));
      if (type.type == GgmlType::kTQ2_0) FixTq2Pairs(block);
      if (layout.min_offset >= 0) PutHalf(block + layout.min_offset, d * rng.Uniform(layout.min_lo, layout.min_hi));
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("no random block layout for ", type.name));
}

}  // namespace octo::testing
