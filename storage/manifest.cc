#include "storage/manifest.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "storage/bounded_json.h"
#include "storage/expert_blocks.h"
#include "storage/file.h"
#include "storage/gguf.h"
#include "storage/gguf_json.h"
#include "storage/layer_file.h"
#include "storage/status_macros.h"
#include "storage/tensor_layout.h"
#include "storage/xxhash64.h"

namespace octo {
namespace {

using nlohmann::json;

json MetadataToJson(const MetadataList& list) {
  json j = json::object();
  for (const auto& [key, value] : list) j[key] = GgufValueToJson(value);
  return j;
}

absl::StatusOr<MetadataList> MetadataFromJson(const json& j, absl::string_view what) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, " is not an object"));
  MetadataList list;
  for (const auto& [key, value] : j.items()) {
    auto v = GgufValueFromJson(value);
    // A key of any length may come here (manifest_fuzz): a long one is quoted short.
    if (!v.ok()) return Annotate(v.status(), absl::StrCat(what, ".", key.size() <= 128 ? key : QuotePrefix(key)));
    list.emplace_back(key, std::move(*v));
  }
  return list;
}

absl::StatusOr<uint64_t> U64(const json& j, const char* key, absl::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", key, "\" is missing or not an unsigned integer"));
  }
  return it->get<uint64_t>();
}

// A file's or tensor's name, type, kind or checksum: short strings, which
// every later message may quote whole (manifest_fuzz found a 12 KB name).
constexpr size_t kMaxManifestStringBytes = 256;

absl::StatusOr<std::string> Str(const json& j, const char* key, absl::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", key, "\" is missing or not a string"));
  }
  const std::string& value = it->get_ref<const std::string&>();
  if (value.size() > kMaxManifestStringBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", key, "\" ", QuotePrefix(value), " is longer than ",
                                                   kMaxManifestStringBytes, " bytes"));
  }
  return value;
}

absl::StatusOr<uint64_t> ParseChecksum(const std::string& s, absl::string_view what) {
  uint64_t v = 0;
  if (s.size() != 22 || !absl::StartsWith(s, "xxh64:") || !absl::SimpleHexAtoi(s.substr(6), &v) ||
      s.find_first_not_of("0123456789abcdef", 6) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": checksum \"", s, "\" is not xxh64:<16 hex digits>"));
  }
  return v;
}

absl::StatusOr<ManifestTensor> TensorFromJson(const json& j, absl::string_view file) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": a tensor entry is not an object"));
  ManifestTensor t;
  OCTO_ASSIGN_OR_RETURN(t.name, Str(j, "name", file));
  const std::string what = absl::StrCat(file, ": tensor ", t.name);
  OCTO_ASSIGN_OR_RETURN(std::string type, Str(j, "type", what));
  auto info = LookupGgmlTypeByName(type);
  if (!info.ok()) return Annotate(info.status(), what);
  t.type = *info;
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->empty() || shape->size() > kGgufMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"shape\" must be an array of 1 to ", kGgufMaxDims,
                                                   " dimensions"));
  }
  for (const json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape has a dimension that is not a positive integer"));
    }
    t.shape.push_back(d.get<uint64_t>());
  }
  OCTO_ASSIGN_OR_RETURN(t.offset, U64(j, "offset", what));
  OCTO_ASSIGN_OR_RETURN(t.bytes, U64(j, "bytes", what));
  if (j.contains("expert_stride")) {
    OCTO_ASSIGN_OR_RETURN(t.expert_stride, U64(j, "expert_stride", what));
  }
  return t;
}

absl::StatusOr<ExpertBlocks> ExpertsFromJson(const json& j, const std::string& file) {
  const std::string what = file + ": experts";
  if (!j.is_object()) return absl::InvalidArgumentError(what + " is not an object");
  ExpertBlocks x;
  OCTO_ASSIGN_OR_RETURN(x.offset, U64(j, "offset", what));
  OCTO_ASSIGN_OR_RETURN(x.stride, U64(j, "stride", what));
  OCTO_ASSIGN_OR_RETURN(uint64_t count, U64(j, "count", what));
  if (count > kMaxExperts) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": count ", count, " is above ", kMaxExperts));
  }
  x.count = static_cast<uint32_t>(count);
  OCTO_ASSIGN_OR_RETURN(std::string dense, Str(j, "dense_checksum", what));
  OCTO_ASSIGN_OR_RETURN(x.dense_checksum, ParseChecksum(dense, what + ": dense part"));
  auto checksums = j.find("checksums");
  if (checksums == j.end() || !checksums->is_array() || checksums->size() > kMaxExperts) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": \"checksums\" is missing or not an array of at most ", kMaxExperts));
  }
  for (const json& c : *checksums) {
    const std::string expert = absl::StrCat(what, ": expert ", x.checksums.size());
    if (!c.is_string()) return absl::InvalidArgumentError(expert + ": checksum is not a string");
    OCTO_ASSIGN_OR_RETURN(uint64_t v, ParseChecksum(c.get<std::string>(), expert));
    x.checksums.push_back(v);
  }
  return x;
}

absl::StatusOr<ManifestFile> FileFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("files: an entry is not an object");
  ManifestFile f;
  OCTO_ASSIGN_OR_RETURN(f.name, Str(j, "name", "files"));
  OCTO_ASSIGN_OR_RETURN(std::string kind, Str(j, "kind", f.name));
  auto k = FileKindFromName(kind);
  if (!k.ok()) return Annotate(k.status(), f.name);
  f.kind = *k;
  if (f.kind == FileKind::kLayer) {
    OCTO_ASSIGN_OR_RETURN(uint64_t layer, U64(j, "layer", f.name));
    if (layer >= kMaxLayers) return absl::InvalidArgumentError(absl::StrCat(f.name, ": layer ", layer, " is too large"));
    f.layer = static_cast<uint32_t>(layer);
  }
  OCTO_ASSIGN_OR_RETURN(f.size, U64(j, "size", f.name));
  OCTO_ASSIGN_OR_RETURN(std::string checksum, Str(j, "checksum", f.name));
  OCTO_ASSIGN_OR_RETURN(f.checksum, ParseChecksum(checksum, f.name));
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array()) {
    return absl::InvalidArgumentError(f.name + ": \"tensors\" is missing or not an array");
  }
  if (tensors->size() > kMaxTensorsPerFile) return absl::InvalidArgumentError(f.name + ": too many tensors");
  for (const json& t : *tensors) {
    OCTO_ASSIGN_OR_RETURN(ManifestTensor tensor, TensorFromJson(t, f.name));
    f.tensors.push_back(std::move(tensor));
  }
  if (j.contains("experts")) {
    OCTO_ASSIGN_OR_RETURN(f.experts, ExpertsFromJson(j["experts"], f.name));
  }
  return f;
}

absl::Status ValidateFile(const ManifestFile& f, const ModelConfig& c, uint32_t format_version) {
  const uint32_t n_layers = c.n_layers;
  if (f.kind == FileKind::kLayer && f.layer >= n_layers) {
    return absl::InvalidArgumentError(absl::StrCat(f.name, ": layer ", f.layer, " but the model has ", n_layers));
  }
  if (f.name != FileNameFor(f.kind, f.layer)) {
    return absl::InvalidArgumentError(absl::StrCat("file \"", f.name, "\" should be named \"",
                                                   FileNameFor(f.kind, f.layer), "\""));
  }
  if (f.size < kHeaderBytes || f.size % kAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(f.name, ": size ", f.size, " is not a multiple of ", kAlignment,
                                                   " holding at least the header"));
  }
  if (f.tensors.empty()) return absl::InvalidArgumentError(f.name + ": has no tensors");
  OCTO_RETURN_IF_ERROR(CheckExpertBlocks(f, c.n_experts, format_version));
  std::vector<const ManifestTensor*> packed;  // the tensors stored whole, by offset below
  for (const ManifestTensor& t : f.tensors) {
    const std::string what = absl::StrCat(f.name, ": tensor ", t.name);
    auto slot = FileForTensor(t.name, n_layers);
    if (!slot.ok()) return Annotate(slot.status(), f.name);
    if (slot->kind != f.kind || slot->layer != f.layer) {
      return absl::InvalidArgumentError(what + " does not belong in this file");
    }
    uint64_t n_elements = 1;
    for (uint64_t d : t.shape) {
      if (__builtin_mul_overflow(n_elements, d, &n_elements)) {
        return absl::InvalidArgumentError(what + ": element count overflows");
      }
    }
    auto bytes = GgmlTensorBytes(t.type, t.shape[0], n_elements);
    if (!bytes.ok()) return Annotate(bytes.status(), what);
    if (*bytes != t.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": \"bytes\" is ", t.bytes, " but its type and shape need ", *bytes));
    }
    if (t.expert_stride != 0) OCTO_RETURN_IF_ERROR(CheckStridedTensor(f, t));
    const uint64_t extent = TensorExtent(f, t);
    if (t.offset % kAlignment != 0 || t.offset < kHeaderBytes || t.offset > f.size || extent > f.size - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bytes [", t.offset, ", +", extent,
                                                     ") are not a ", kAlignment, "-aligned range inside the file"));
    }
    if (t.expert_stride == 0) packed.push_back(&t);
  }
  std::sort(packed.begin(), packed.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < packed.size(); ++i) {
    if (packed[i]->offset < packed[i - 1]->offset + packed[i - 1]->bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.name, ": tensor ", packed[i]->name, " overlaps tensor ", packed[i - 1]->name));
    }
  }
  // Format 2: the packed tensors before the expert blocks, no two expert slices overlapping.
  return CheckExpertSlices(f);
}

absl::StatusOr<Manifest> ParseManifestJson(absl::string_view text);

}  // namespace

const ManifestFile* Manifest::FindFile(absl::string_view name) const {
  for (const ManifestFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const ManifestFile* Manifest::Layer(uint32_t layer) const { return FindFile(FileNameFor(FileKind::kLayer, layer)); }

const GgufValue* Manifest::FindTokenizerKey(absl::string_view key) const {
  for (const auto& [k, v] : tokenizer) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string ManifestToJson(const Manifest& m) {
  json files = json::array();
  for (const ManifestFile& f : m.files) {
    json tensors = json::array();
    for (const ManifestTensor& t : f.tensors) {
      json tensor = {{"name", t.name},
                     {"type", std::string(t.type.name)},
                     {"shape", t.shape},
                     {"offset", t.offset},
                     {"bytes", t.bytes}};
      if (t.expert_stride != 0) tensor["expert_stride"] = t.expert_stride;
      tensors.push_back(std::move(tensor));
    }
    json entry = {{"name", f.name}, {"kind", std::string(FileKindName(f.kind))}};
    if (f.kind == FileKind::kLayer) entry["layer"] = f.layer;
    entry["size"] = f.size;
    entry["checksum"] = FormatChecksum(f.checksum);
    entry["tensors"] = std::move(tensors);
    if (f.experts.has_value()) {
      const ExpertBlocks& x = *f.experts;
      json checksums = json::array();
      for (uint64_t c : x.checksums) checksums.push_back(FormatChecksum(c));
      entry["experts"] = {{"offset", x.offset},
                          {"stride", x.stride},
                          {"count", x.count},
                          {"dense_checksum", FormatChecksum(x.dense_checksum)},
                          {"checksums", std::move(checksums)}};
    }
    files.push_back(std::move(entry));
  }
  json j = {
      {"format", kManifestFormatName},
      {"format_version", m.format_version},
      {"source", {{"file", m.source_name}, {"bytes", m.source_bytes}, {"gguf_version", m.source_gguf_version}}},
      {"config", ModelConfigToJson(m.config)},
      {"tokenizer", MetadataToJson(m.tokenizer)},
      {"metadata", MetadataToJson(m.metadata)},
      {"files", std::move(files)},
  };
  // Metadata strings are hex-encoded when not UTF-8; keys and names that are
  // not UTF-8 (never seen in real files) get U+FFFD rather than a throw.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::Status ValidateManifestLayout(const Manifest& m) {
  if (m.format_version < kOldestFormatVersion || m.format_version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("format version ", m.format_version,
                                                      "; this build reads versions ", kOldestFormatVersion, " to ",
                                                      kFormatVersion));
  }
  const ModelConfig& c = m.config;
  std::set<std::string> names;
  std::map<std::string, const std::vector<uint64_t>*> shapes;
  for (const ManifestFile& f : m.files) {
    OCTO_RETURN_IF_ERROR(ValidateFile(f, c, m.format_version));
    if (!names.insert(f.name).second) return absl::InvalidArgumentError("file " + f.name + " is listed twice");
    for (const ManifestTensor& t : f.tensors) {
      if (!shapes.emplace(t.name, &t.shape).second) {
        return absl::InvalidArgumentError("tensor " + t.name + " is listed twice");
      }
    }
  }
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    if (!names.count(FileNameFor(FileKind::kLayer, l))) {
      return absl::InvalidArgumentError("missing file " + FileNameFor(FileKind::kLayer, l));
    }
  }
  return CheckModelTensors(c, [&](absl::string_view name) -> const std::vector<uint64_t>* {
    auto it = shapes.find(std::string(name));
    return it == shapes.end() ? nullptr : it->second;
  });
}

namespace {
// What a manifest this build cannot use most likely means, and its fix: a
// directory from another version of Octo (one from before a type or an
// architecture was supported lacks what this one needs; a newer one names
// what this one does not know).
constexpr char kDecomposeAgain[] =
    " (if another version of Octo decomposed this directory, decompose its GGUF again with this one: "
    "octo-ctl decompose --force MODEL.gguf DIR; octod does so itself for a GGUF it serves)";

absl::Status DecomposeAgain(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(status.message(), kDecomposeAgain));
}

absl::StatusOr<Manifest> ParseManifestJson(absl::string_view text) {
  OCTO_ASSIGN_OR_RETURN(json j, ParseBoundedJson(text, "manifest.json"));
  if (!j.is_object()) return absl::InvalidArgumentError("manifest.json is not a JSON object");
  // No j.value(...) below: it throws on a wrong type (a message that names no
  // field) and returns a copy, which recurses as deep as the JSON nests.
  if (!j.contains("format") || j["format"] != kManifestFormatName) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.json: \"format\" is not \"", kManifestFormatName, "\""));
  }
  OCTO_ASSIGN_OR_RETURN(uint64_t version, U64(j, "format_version", "manifest.json"));
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("manifest.json has format version ", version,
                                                      "; this build reads versions ", kOldestFormatVersion, " to ",
                                                      kFormatVersion, kDecomposeAgain));
  }
  Manifest m;
  m.format_version = static_cast<uint32_t>(version);
  if (!j.contains("config")) return absl::InvalidArgumentError("manifest.json: \"config\" is missing");
  auto config = ModelConfigFromJson(j["config"]);
  if (!config.ok()) return DecomposeAgain(Annotate(config.status(), "manifest.json"));
  m.config = *config;
  if (j.contains("source") && j["source"].is_object()) {
    const json& s = j["source"];
    if (s.contains("file") && s["file"].is_string()) m.source_name = s["file"].get<std::string>();
    if (s.contains("bytes") && s["bytes"].is_number_unsigned()) m.source_bytes = s["bytes"].get<uint64_t>();
    if (s.contains("gguf_version") && s["gguf_version"].is_number_unsigned()) {
      m.source_gguf_version = s["gguf_version"].get<uint32_t>();
    }
  }
  const json missing;
  OCTO_ASSIGN_OR_RETURN(m.tokenizer, MetadataFromJson(j.contains("tokenizer") ? j["tokenizer"] : missing, "tokenizer"));
  OCTO_ASSIGN_OR_RETURN(m.metadata, MetadataFromJson(j.contains("metadata") ? j["metadata"] : missing, "metadata"));
  if (!j.contains("files") || !j["files"].is_array()) {
    return absl::InvalidArgumentError("manifest.json: \"files\" is missing or not an array");
  }
  if (j["files"].size() > kMaxLayers + 8) return absl::InvalidArgumentError("manifest.json: too many files");
  for (const json& f : j["files"]) {
    auto file = FileFromJson(f);
    if (!file.ok()) return DecomposeAgain(Annotate(file.status(), "manifest.json"));
    m.files.push_back(std::move(*file));
  }
  absl::Status layout = ValidateManifestLayout(m);
  if (!layout.ok()) return DecomposeAgain(Annotate(layout, "manifest.json"));
  return m;
}
}  // namespace

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  // Every field is type-checked before use; this catches what a check missed
  // (nlohmann throws on a wrong type) so a hostile manifest is an error, never a crash.
  try {
    return ParseManifestJson(text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.json: ", e.what()));
  }
}

absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  OCTO_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(dir + "/" + kManifestName, kMaxManifestBytes));
  return ParseManifest(text);
}

}  // namespace octo
