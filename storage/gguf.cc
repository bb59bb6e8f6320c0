#include "storage/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/bounded_json.h"
#include "storage/byte_order.h"
#include "storage/gguf_cursor.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};

// Parses metadata values, charging every allocation to one memory budget.
class ValueParser {
 public:
  explicit ValueParser(GgufCursor& cursor) : cursor_(cursor) {}

  absl::StatusOr<GgufValueType> ReadType(absl::string_view what) {
    OCTO_ASSIGN_OR_RETURN(uint32_t id, cursor_.ReadU32(what));
    if (id >= kGgufValueTypeCount) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown value type id ", id));
    }
    return static_cast<GgufValueType>(id);
  }

  absl::StatusOr<GgufValue> ReadValue(GgufValueType type, uint32_t depth, const std::string& what) {
    GgufValue value;
    value.type = type;
    if (type == GgufValueType::kString) {
      OCTO_ASSIGN_OR_RETURN(value.string_value, cursor_.ReadString(kGgufMaxStringBytes, what));
      OCTO_RETURN_IF_ERROR(Charge(value.string_value.size(), what));
      return value;
    }
    if (type == GgufValueType::kArray) return ReadArray(depth, what);
    uint8_t b[8] = {};
    OCTO_RETURN_IF_ERROR(cursor_.Read(b, GgufScalarSize(type), what));
    switch (type) {
      case GgufValueType::kUint8: value.uint_value = b[0]; break;
      case GgufValueType::kInt8: value.int_value = static_cast<int8_t>(b[0]); break;
      case GgufValueType::kUint16: value.uint_value = LoadLE<uint16_t>(b); break;
      case GgufValueType::kInt16: value.int_value = LoadLE<int16_t>(b); break;
      case GgufValueType::kUint32: value.uint_value = LoadLE<uint32_t>(b); break;
      case GgufValueType::kInt32: value.int_value = LoadLE<int32_t>(b); break;
      case GgufValueType::kUint64: value.uint_value = LoadLE<uint64_t>(b); break;
      case GgufValueType::kInt64: value.int_value = LoadLE<int64_t>(b); break;
      case GgufValueType::kFloat32: value.float_value = LoadLE<float>(b); break;
      case GgufValueType::kFloat64: value.float_value = LoadLE<double>(b); break;
      case GgufValueType::kBool:
        if (b[0] > 1) return absl::InvalidArgumentError(absl::StrCat(what, ": bool byte is ", b[0], ", not 0 or 1"));
        value.uint_value = b[0];
        break;
      default: break;
    }
    return value;
  }

 private:
  absl::Status Charge(uint64_t bytes, absl::string_view what) {
    used_ += bytes;
    if (used_ > kGgufMaxMetadataMemory) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": metadata would need more than ",
                                                       kGgufMaxMetadataMemory, " bytes of memory"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GgufValue> ReadArray(uint32_t depth, const std::string& what) {
    if (depth >= kGgufMaxArrayDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": arrays nested deeper than ", kGgufMaxArrayDepth, " levels"));
    }
    GgufValue value;
    value.type = GgufValueType::kArray;
    OCTO_ASSIGN_OR_RETURN(value.element_type, ReadType(absl::StrCat(what, " element type")));
    OCTO_ASSIGN_OR_RETURN(value.count, cursor_.ReadU64(absl::StrCat(what, " element count")));
    if (value.count > kGgufMaxArrayElements) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": array of ", value.count,
                                                     " elements is over the limit of ", kGgufMaxArrayElements));
    }
    // Every element takes at least its scalar size (8 for a string's length
    // and 12 for an array's header): refuse counts the file cannot hold.
    const uint64_t min_element = value.element_type == GgufValueType::kString  ? 8
                                 : value.element_type == GgufValueType::kArray ? 12
                                                                               : GgufScalarSize(value.element_type);
    if (value.count * min_element > cursor_.remaining()) {
      return absl::OutOfRangeError(absl::StrCat("truncated: ", what, ": array of ", value.count, " ",
                                                GgufValueTypeName(value.element_type), " elements needs at least ",
                                                value.count * min_element, " bytes, only ", cursor_.remaining(),
                                                " are left"));
    }
    if (value.element_type == GgufValueType::kString) {
      OCTO_RETURN_IF_ERROR(Charge(value.count * sizeof(std::string), what));
      value.strings.reserve(value.count);
      for (uint64_t i = 0; i < value.count; ++i) {
        OCTO_ASSIGN_OR_RETURN(std::string s,
                              cursor_.ReadString(kGgufMaxStringBytes, absl::StrCat(what, "[", i, "]")));
        OCTO_RETURN_IF_ERROR(Charge(s.size(), what));
        value.strings.push_back(std::move(s));
      }
    } else if (value.element_type == GgufValueType::kArray) {
      OCTO_RETURN_IF_ERROR(Charge(value.count * sizeof(GgufValue), what));
      value.arrays.reserve(value.count);
      for (uint64_t i = 0; i < value.count; ++i) {
        OCTO_ASSIGN_OR_RETURN(GgufValue element,
                              ReadValue(GgufValueType::kArray, depth + 1, absl::StrCat(what, "[", i, "]")));
        value.arrays.push_back(std::move(element));
      }
    } else {
      const uint64_t bytes = value.count * min_element;
      OCTO_RETURN_IF_ERROR(Charge(bytes, what));
      value.raw.resize(bytes);
      OCTO_RETURN_IF_ERROR(cursor_.Read(value.raw.data(), bytes, what));
      if (value.element_type == GgufValueType::kBool) {
        for (uint64_t i = 0; i < value.count; ++i) {
          if (value.raw[i] > 1) {
            return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "]: bool byte is ", value.raw[i]));
          }
        }
      }
    }
    return value;
  }

  GgufCursor& cursor_;
  uint64_t used_ = 0;
};

absl::Status CheckVersion(uint32_t version) {
  if (version == 2 || version == 3) return absl::OkStatus();
  if (version == 1) {
    return absl::InvalidArgumentError(
        "GGUF version 1 is not supported (it uses 32-bit counts and lengths); "
        "convert the model again with a current llama.cpp to get version 3");
  }
  if (version != 0 && (version & 0xFFFF) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GGUF file is big-endian (version field reads 0x%08x); only little-endian files are supported", version));
  }
  return absl::InvalidArgumentError(absl::StrCat("GGUF version ", version, " is not supported (versions 2 and 3 are)"));
}

absl::Status ReadAlignment(const GgufValue& value, uint64_t* alignment) {
  if (value.type != GgufValueType::kUint32) {
    return absl::InvalidArgumentError(absl::StrCat("general.alignment has type ", GgufValueTypeName(value.type),
                                                   ", must be u32"));
  }
  const uint64_t a = value.uint_value;
  if (a == 0 || (a & (a - 1)) != 0 || a > kGgufMaxAlignment) {
    return absl::InvalidArgumentError(absl::StrCat("general.alignment is ", a,
                                                   ", must be a power of two no larger than ", kGgufMaxAlignment));
  }
  *alignment = a;
  return absl::OkStatus();
}

absl::StatusOr<GgufTensorInfo> ReadTensorInfo(GgufCursor& cursor, uint64_t index) {
  const std::string what = absl::StrCat("tensor ", index);
  GgufTensorInfo info;
  OCTO_ASSIGN_OR_RETURN(info.name, cursor.ReadString(kGgufMaxTensorNameBytes, what + " name"));
  const std::string named = absl::StrCat(what, " '", info.name, "'");
  if (info.name.empty()) return absl::InvalidArgumentError(what + " has an empty name");
  OCTO_ASSIGN_OR_RETURN(uint32_t n_dims, cursor.ReadU32(named + " n_dims"));
  if (n_dims == 0 || n_dims > kGgufMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat(named, " has ", n_dims, " dimensions, must be 1 to ", kGgufMaxDims));
  }
  info.n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    OCTO_ASSIGN_OR_RETURN(uint64_t dim, cursor.ReadU64(named + " dimension"));
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(named, " dimension ", d, " is ", dim));
    }
    if (__builtin_mul_overflow(info.n_elements, dim, &info.n_elements) ||
        info.n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(named + ": element count (product of dimensions) overflows");
    }
    info.dims.push_back(dim);
  }
  OCTO_ASSIGN_OR_RETURN(uint32_t type_id, cursor.ReadU32(named + " type"));
  auto type = LookupGgmlType(type_id);
  if (!type.ok()) return Annotate(type.status(), named);
  info.type = *type;
  auto bytes = GgmlTensorBytes(info.type, info.dims[0], info.n_elements);
  if (!bytes.ok()) return Annotate(bytes.status(), named);
  info.n_bytes = *bytes;
  OCTO_ASSIGN_OR_RETURN(info.offset, cursor.ReadU64(named + " offset"));
  return info;
}

}  // namespace

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  auto source = FileSource::Open(path);
  if (!source.ok()) return source.status();
  auto file = Parse(std::move(*source));
  if (!file.ok()) return Annotate(file.status(), path);
  return file;
}

absl::StatusOr<GgufFile> GgufFile::Parse(std::unique_ptr<ByteSource> source) {
  GgufFile file;
  GgufCursor cursor(*source);

  char magic[4];
  OCTO_RETURN_IF_ERROR(cursor.Read(magic, 4, "magic"));
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return absl::InvalidArgumentError("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  }
  OCTO_ASSIGN_OR_RETURN(file.version_, cursor.ReadU32("version"));
  OCTO_RETURN_IF_ERROR(CheckVersion(file.version_));
  OCTO_ASSIGN_OR_RETURN(uint64_t tensor_count, cursor.ReadU64("tensor count"));
  OCTO_ASSIGN_OR_RETURN(uint64_t kv_count, cursor.ReadU64("metadata count"));
  // A kv takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
  // at least 8 + 1 (name) + 4 + 8 + 4 + 8 bytes.
  if (kv_count > cursor.remaining() / 13) {
    return absl::InvalidArgumentError(absl::StrCat("metadata count ", kv_count, " cannot fit in the ",
                                                   cursor.remaining(), " bytes left in the file"));
  }
  if (tensor_count > cursor.remaining() / 33) {
    return absl::InvalidArgumentError(absl::StrCat("tensor count ", tensor_count, " cannot fit in the ",
                                                   cursor.remaining(), " bytes left in the file"));
  }

  ValueParser values(cursor);
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < kv_count; ++i) {
    OCTO_ASSIGN_OR_RETURN(std::string key, cursor.ReadString(kGgufMaxKeyBytes, absl::StrCat("metadata key ", i)));
    if (key.empty()) return absl::InvalidArgumentError(absl::StrCat("metadata key ", i, " is empty"));
    // A key may be 64 KiB: messages quote a bounded prefix of it (gguf_fuzz).
    if (!keys.insert(key).second) return absl::InvalidArgumentError("duplicate metadata key " + QuotePrefix(key));
    const std::string what = "metadata " + QuotePrefix(key);
    OCTO_ASSIGN_OR_RETURN(GgufValueType type, values.ReadType(what + " type"));
    OCTO_ASSIGN_OR_RETURN(GgufValue value, values.ReadValue(type, 0, what));
    if (key == "general.alignment") OCTO_RETURN_IF_ERROR(ReadAlignment(value, &file.alignment_));
    file.metadata_.emplace_back(std::move(key), std::move(value));
  }

  file.tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    OCTO_ASSIGN_OR_RETURN(GgufTensorInfo info, ReadTensorInfo(cursor, i));
    if (!file.tensor_index_.emplace(info.name, file.tensors_.size()).second) {
      return absl::InvalidArgumentError("duplicate tensor name '" + info.name + "'");
    }
    file.tensors_.push_back(std::move(info));
  }

  if (!AlignUp(cursor.position(), file.alignment_, &file.data_offset_) ||
      (tensor_count > 0 && file.data_offset_ > source->size())) {
    return absl::OutOfRangeError(absl::StrCat("truncated: data section would start at ", file.data_offset_,
                                              " but the file is ", source->size(), " bytes"));
  }
  const uint64_t data_bytes = source->size() - std::min(file.data_offset_, source->size());
  for (GgufTensorInfo& t : file.tensors_) {
    const uint64_t relative = t.offset;
    const std::string named = "tensor '" + t.name + "'";
    if (relative % file.alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat(named, ": offset ", relative,
                                                     " is not a multiple of the alignment ", file.alignment_));
    }
    if (relative > data_bytes || t.n_bytes > data_bytes - relative) {
      return absl::OutOfRangeError(absl::StrCat("truncated: ", named, " needs bytes [", relative, ", ",
                                                relative + t.n_bytes, ") of the data section, which has ",
                                                data_bytes, " bytes"));
    }
    t.offset = file.data_offset_ + relative;
  }
  // Tensors must not share bytes.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : file.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.n_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", by_offset[i]->name, "' overlaps tensor '", prev.name, "'"));
    }
  }
  file.source_ = std::move(source);
  return file;
}

const GgufValue* GgufFile::Find(absl::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufFile::ReadTensorData(const GgufTensorInfo& tensor, uint64_t offset, std::span<uint8_t> out) const {
  if (offset > tensor.n_bytes || out.size() > tensor.n_bytes - offset) {
    return absl::OutOfRangeError(absl::StrCat("read past the end of tensor '", tensor.name, "'"));
  }
  return source_->ReadAt(tensor.offset + offset, out);
}

}  // namespace octo
