// ParseManifest against hostile manifest.json files: starting from the
// manifest PlanLayerDirectory makes for ValidTinyGguf(), each test changes
// one thing and checks the error's code and that its message names the
// field, file or tensor. Then a round trip of every GGUF value type.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/decompose.h"
#include "storage/manifest.h"
#include "tests/storage/gguf_bytes.h"

namespace octo {
namespace {

using nlohmann::json;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

Manifest TinyManifest() {
  auto file = testing::ParseGgufBytes(testing::ValidTinyGguf());
  EXPECT_TRUE(file.ok()) << file.status();
  auto plan = PlanLayerDirectory(*file, "tiny.gguf");
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

json Valid() {
  static const std::string* text = new std::string(ManifestToJson(TinyManifest()));
  return json::parse(*text);
}

json& File(json& j, absl::string_view name) {
  for (json& f : j["files"]) {
    if (f["name"] == std::string(name)) return f;
  }
  ADD_FAILURE() << "no file " << name;
  static json none;
  return none;
}

json& Tensor(json& j, absl::string_view name) {
  for (json& f : j["files"]) {
    for (json& t : f["tensors"]) {
      if (t["name"] == std::string(name)) return t;
    }
  }
  ADD_FAILURE() << "no tensor " << name;
  static json none;
  return none;
}

// Removes the entries of the array `list` whose "name" is `name`.
void EraseNamed(json& list, absl::string_view name) {
  for (size_t i = list.size(); i-- > 0;) {
    if (list[i]["name"] == std::string(name)) list.erase(i);
  }
}
void EraseFile(json& j, absl::string_view name) { EraseNamed(j["files"], name); }
void EraseTensor(json& j, absl::string_view name) {
  for (json& f : j["files"]) EraseNamed(f["tensors"], name);
}

::testing::AssertionResult Rejects(const std::string& text, absl::StatusCode code, absl::string_view needle) {
  absl::StatusOr<Manifest> m;
  try {
    m = ParseManifest(text);
  } catch (...) {
    return ::testing::AssertionFailure() << "ParseManifest threw";
  }
  if (m.ok()) return ::testing::AssertionFailure() << "parsed OK";
  if (m.status().code() != code || m.status().message().find(needle) == absl::string_view::npos) {
    return ::testing::AssertionFailure() << "got " << m.status() << "; expected " << absl::StatusCodeToString(code)
                                         << " mentioning \"" << needle << "\"";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Rejects(const json& j, absl::string_view needle) {
  return Rejects(j.dump(), kInvalid, needle);
}

// Applies `mutate` to a valid manifest and expects INVALID_ARGUMENT naming `needle`.
::testing::AssertionResult RejectsMutation(const std::function<void(json&)>& mutate, absl::string_view needle) {
  json j = Valid();
  mutate(j);
  return Rejects(j, needle);
}

TEST(ManifestHostileTest, ValidManifestParses) {
  auto m = ParseManifest(Valid().dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->files.size(), 4u);  // embed, layer_000, lm_head, final_norm
  ASSERT_NE(m->Layer(0), nullptr);
  EXPECT_EQ(m->Layer(0)->tensors.size(), 9u);
}

// --- Document ----------------------------------------------------------------------

TEST(ManifestHostileTest, NotJson) { EXPECT_TRUE(Rejects("{\"format\": ", kInvalid, "not valid JSON")); }
TEST(ManifestHostileTest, EmptyText) { EXPECT_TRUE(Rejects("", kInvalid, "not valid JSON")); }
TEST(ManifestHostileTest, NotAnObject) { EXPECT_TRUE(Rejects("[1, 2]", kInvalid, "not a JSON object")); }

TEST(ManifestHostileTest, DeeplyNestedJsonDoesNotOverflowTheStack) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(Rejects(deep, kInvalid, "nests arrays and objects deeper than 64 levels"));
}

// Regression: ParseManifest took "metadata" with j.value(), a copy that
// recursed once per nesting level and overflowed the stack.
TEST(ManifestHostileTest, DeeplyNestedMetadataIsNotCopiedRecursively) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // Spliced into the text: dumping it from a json would recurse in the test.
  json j = Valid();
  j["metadata"]["deep"] = "PLACEHOLDER";
  std::string text = j.dump();
  text.replace(text.find("\"PLACEHOLDER\""), 13,
               absl::StrCat("{\"type\": \"arr\", \"element_type\": \"u8\", \"value\": ", deep, "}"));
  EXPECT_TRUE(Rejects(text, kInvalid, "manifest.json nests arrays and objects deeper than 64 levels"));
}

TEST(ManifestHostileTest, WrongFormat) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["format"] = "gguf"; }, "\"format\""));
  EXPECT_TRUE(RejectsMutation([](json& j) { j.erase("format"); }, "\"format\""));
}

TEST(ManifestHostileTest, FormatVersionThisBuildDoesNotRead) {
  for (int version : {0, 3, 1000}) {
    json j = Valid();
    j["format_version"] = version;
    EXPECT_TRUE(Rejects(j.dump(), absl::StatusCode::kFailedPrecondition,
                        absl::StrCat("format version ", version, "; this build reads versions 1 to 2")));
  }
}

TEST(ManifestHostileTest, FormatVersion1StillParses) {
  json j = Valid();
  EXPECT_EQ(j["format_version"], 2);
  j["format_version"] = 1;
  auto m = ParseManifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 1u);
  EXPECT_NE(ManifestToJson(*m).find("\"format_version\": 1"), std::string::npos);
}

TEST(ManifestHostileTest, FormatVersionNotANumber) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["format_version"] = "1"; }, "format_version"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["format_version"] = -1; }, "format_version"));
}

// --- Config --------------------------------------------------------------------------

TEST(ManifestHostileTest, ConfigMissing) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j.erase("config"); }, "\"config\" is missing"));
}

TEST(ManifestHostileTest, ConfigFieldMissing) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"].erase("dim"); }, "config.dim is missing"));
}

TEST(ManifestHostileTest, ConfigFieldWrongType) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["dim"] = "32"; }, "config.dim"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["n_layers"] = -1; }, "config.n_layers"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["n_heads"] = 4.5; }, "config.n_heads"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["vocab_size"] = 1ull << 32; }, "config.vocab_size"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["rope_theta"] = "10000"; }, "config.rope_theta"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["tied_embeddings"] = 0; }, "config.tied_embeddings"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["architecture"] = nullptr; }, "config.architecture"));
}

TEST(ManifestHostileTest, ConfigHeadsNotMultipleOfKvHeads) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["n_kv_heads"] = 3; },
                              "n_heads (4) is not a multiple of n_kv_heads (3)"));
}

TEST(ManifestHostileTest, ConfigRopeStyleSideways) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["rope_style"] = "sideways"; }, "config.rope_style"));
}

TEST(ManifestHostileTest, ConfigOutOfRange) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["rope_theta"] = 1e300; }, "rope_theta"));  // inf as float
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["norm_eps"] = 0; }, "norm_eps"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["n_layers"] = 0; }, "n_layers is 0"));
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["architecture"] = "gpt2"; }, "architecture 'gpt2'"));
}

// An unknown architecture of 10 KB (manifest_fuzz found one): the message
// quotes a bounded prefix of it, not all of it.
TEST(ManifestHostileTest, AHugeArchitectureNameIsQuotedShort) {
  json j = Valid();
  j["config"]["architecture"] = std::string(10000, 'x');
  const absl::StatusOr<Manifest> m = ParseManifest(j.dump());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("architecture 'xxx"), absl::string_view::npos) << m.status();
  EXPECT_LT(m.status().message().size(), 512u) << m.status();
  // A file's name of 12 KB (manifest_fuzz again): refused, quoted short.
  j = Valid();
  j["files"][0]["name"] = std::string(12000, 'y');
  const absl::StatusOr<Manifest> named = ParseManifest(j.dump());
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("is longer than 256 bytes"), absl::string_view::npos) << named.status();
  EXPECT_LT(named.status().message().size(), 512u) << named.status();
  // A metadata key of 12 KB whose value is bad (and again): quoted short.
  j = Valid();
  j["metadata"][std::string(12000, 'k')] = json::array({json::array()});
  const absl::StatusOr<Manifest> keyed = ParseManifest(j.dump());
  ASSERT_FALSE(keyed.ok());
  EXPECT_NE(keyed.status().message().find("metadata.'kkk"), absl::string_view::npos) << keyed.status();
  EXPECT_LT(keyed.status().message().size(), 512u) << keyed.status();
}

// --- Files ----------------------------------------------------------------------------

TEST(ManifestHostileTest, LayerFileMissing) {
  EXPECT_TRUE(RejectsMutation([](json& j) { EraseFile(j, "layer_000.bin"); }, "missing file layer_000.bin"));
}

TEST(ManifestHostileTest, FileListedTwice) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["files"].push_back(File(j, "embed.bin")); },
                              "file embed.bin is listed twice"));
}

TEST(ManifestHostileTest, FileNamedWrongForItsKindOrLayer) {
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "layer_000.bin")["name"] = "layer_0.bin"; },
                              "\"layer_0.bin\" should be named \"layer_000.bin\""));
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "embed.bin")["kind"] = "lm_head"; },
                              "\"embed.bin\" should be named \"lm_head.bin\""));
}

TEST(ManifestHostileTest, LayerPastTheModel) {
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "layer_000.bin")["layer"] = 1; }, "layer 1 but the model has 1"));
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "layer_000.bin")["layer"] = 1u << 31; }, "is too large"));
}

TEST(ManifestHostileTest, UnknownFileKind) {
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "embed.bin")["kind"] = "weights"; }, "unknown file kind 'weights'"));
}

TEST(ManifestHostileTest, SizeNotMultipleOf4096) {
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "embed.bin")["size"] = 8193; },
                              "embed.bin: size 8193 is not a multiple of 4096"));
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "embed.bin")["size"] = 0; }, "embed.bin: size 0"));
}

TEST(ManifestHostileTest, ChecksumMalformed) {
  for (const char* bad : {"xxh64:12", "crc32:0000000000000000", "xxh64:ABCDEF0123456789", "xxh64:0x00000000000000",
                          "xxh64: 000000000000000", "xxh64:-000000000000000", ""}) {
    EXPECT_TRUE(RejectsMutation([&](json& j) { File(j, "lm_head.bin")["checksum"] = bad; }, "lm_head.bin: checksum"))
        << bad;
  }
}

TEST(ManifestHostileTest, FileWithoutTensors) {
  EXPECT_TRUE(RejectsMutation([](json& j) { File(j, "final_norm.bin")["tensors"] = json::array(); },
                              "final_norm.bin: has no tensors"));
}

TEST(ManifestHostileTest, TooManyFilesOrTensors) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["files"] = json(std::vector<int>(kMaxLayers + 9, 0)); },
                              "too many files"));
  EXPECT_TRUE(RejectsMutation(
      [](json& j) { File(j, "embed.bin")["tensors"] = json(std::vector<int>(kMaxTensorsPerFile + 1, 0)); },
      "embed.bin: too many tensors"));
}

// --- Tensors ------------------------------------------------------------------------------

TEST(ManifestHostileTest, TensorUnknownTypeName) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["type"] = "Q9_9"; },
                              "tensor token_embd.weight: unknown tensor type name 'Q9_9'"));
}

TEST(ManifestHostileTest, TensorEmptyShape) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "output_norm.weight")["shape"] = json::array(); },
                              "tensor output_norm.weight: \"shape\" must be an array of 1 to 4"));
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "output_norm.weight")["shape"] = {32, 1, 1, 1, 1}; },
                              "tensor output_norm.weight: \"shape\" must be an array of 1 to 4"));
}

TEST(ManifestHostileTest, TensorZeroDimension) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "output.weight")["shape"] = {32, 0}; },
                              "tensor output.weight: shape has a dimension that is not a positive integer"));
}

TEST(ManifestHostileTest, TensorBytesInconsistentWithShape) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["bytes"] = 1028; },
                              "tensor token_embd.weight: \"bytes\" is 1028 but its type and shape need 1024"));
}

TEST(ManifestHostileTest, TensorShapeProductOverflows) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "output.weight")["shape"] = {1ull << 32, 1ull << 32}; },
                              "tensor output.weight: element count overflows"));
}

TEST(ManifestHostileTest, TensorOffsetNotAligned) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["offset"] = 4097; },
                              "tensor token_embd.weight: bytes [4097, +1024) are not a 4096-aligned range"));
}

TEST(ManifestHostileTest, TensorOffsetInsideHeaderPage) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["offset"] = 0; },
                              "tensor token_embd.weight: bytes [0, +1024)"));
}

TEST(ManifestHostileTest, TensorPastFileSize) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["offset"] = 8192; },
                              "tensor token_embd.weight: bytes [8192, +1024)"));
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "token_embd.weight")["offset"] = ~0ull & ~4095ull; },
                              "tensor token_embd.weight: bytes"));
}

TEST(ManifestHostileTest, TensorsOverlap) {
  EXPECT_TRUE(RejectsMutation(
      [](json& j) { Tensor(j, "blk.0.attn_k.weight")["offset"] = Tensor(j, "blk.0.attn_q.weight")["offset"]; },
      "layer_000.bin: tensor blk.0.attn_"));
  EXPECT_TRUE(RejectsMutation(
      [](json& j) { Tensor(j, "blk.0.attn_k.weight")["offset"] = Tensor(j, "blk.0.attn_q.weight")["offset"]; },
      "overlaps tensor"));
}

TEST(ManifestHostileTest, TensorListedTwice) {
  EXPECT_TRUE(RejectsMutation(
      [](json& j) {
        json copy = Tensor(j, "blk.0.ffn_norm.weight");
        copy["offset"] = File(j, "layer_000.bin")["size"];
        File(j, "layer_000.bin")["size"] = File(j, "layer_000.bin")["size"].get<uint64_t>() + 4096;
        File(j, "layer_000.bin")["tensors"].push_back(copy);
      },
      "tensor blk.0.ffn_norm.weight is listed twice"));
}

TEST(ManifestHostileTest, TensorInTheWrongFile) {
  EXPECT_TRUE(RejectsMutation(
      [](json& j) {
        json t = Tensor(j, "blk.0.attn_q.weight");
        EraseTensor(j, "blk.0.attn_q.weight");
        t["offset"] = 8192;
        File(j, "embed.bin")["size"] = 16384;
        File(j, "embed.bin")["tensors"].push_back(t);
      },
      "embed.bin: tensor blk.0.attn_q.weight does not belong in this file"));
}

TEST(ManifestHostileTest, TensorNameWithoutValidLayer) {
  EXPECT_TRUE(RejectsMutation([](json& j) { Tensor(j, "blk.0.attn_q.weight")["name"] = "blk.x.attn_q.weight"; },
                              "'blk.x.attn_q.weight' has no valid layer number"));
}

TEST(ManifestHostileTest, RequiredTensorMissing) {
  EXPECT_TRUE(RejectsMutation([](json& j) { EraseTensor(j, "blk.0.attn_q.weight"); },
                              "missing tensor blk.0.attn_q.weight"));
  EXPECT_TRUE(RejectsMutation([](json& j) { EraseFile(j, "lm_head.bin"); }, "missing tensor output.weight"));
}

TEST(ManifestHostileTest, TensorWrongShape) {
  EXPECT_TRUE(RejectsMutation(
      [](json& j) {
        Tensor(j, "blk.0.attn_q.weight")["shape"] = {32, 16};
        Tensor(j, "blk.0.attn_q.weight")["bytes"] = 2048;
      },
      "tensor blk.0.attn_q.weight has shape [32, 16], expected [32, 32]"));
}

TEST(ManifestHostileTest, TiedEmbeddingsWithOutputWeight) {
  EXPECT_TRUE(RejectsMutation([](json& j) { j["config"]["tied_embeddings"] = true; },
                              "tied_embeddings is set but output.weight is present"));
}

// --- Wrong JSON types -------------------------------------------------------------------

TEST(ManifestHostileTest, WrongJsonTypesEverywhere) {
  const json u8_300 = {{"type", "u8"}, {"value", 300}};
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* needle;
  };
  const std::vector<Case> cases = {
      // Regression: j.value("format", "") threw a type_error naming no field.
      {"format a number", [](json& j) { j["format"] = 7; }, "\"format\" is not"},
      {"config an array", [](json& j) { j["config"] = json::array(); }, "config is not an object"},
      {"files an object", [](json& j) { j["files"] = json::object(); }, "\"files\" is missing or not an array"},
      {"files missing", [](json& j) { j.erase("files"); }, "\"files\" is missing or not an array"},
      {"file entry a number", [](json& j) { j["files"][0] = 5; }, "files: an entry is not an object"},
      {"file name a number", [](json& j) { j["files"][0]["name"] = 5; }, "\"name\" is missing or not a string"},
      {"file kind null", [](json& j) { File(j, "embed.bin")["kind"] = nullptr; }, "embed.bin: \"kind\""},
      {"layer a string", [](json& j) { File(j, "layer_000.bin")["layer"] = "0"; }, "layer_000.bin: \"layer\""},
      {"size negative", [](json& j) { File(j, "embed.bin")["size"] = -8192; }, "embed.bin: \"size\""},
      {"size a float", [](json& j) { File(j, "embed.bin")["size"] = 8192.0; }, "embed.bin: \"size\""},
      {"checksum a number", [](json& j) { File(j, "embed.bin")["checksum"] = 0; }, "embed.bin: \"checksum\""},
      {"tensors a string", [](json& j) { File(j, "embed.bin")["tensors"] = "all"; }, "embed.bin: \"tensors\""},
      {"tensor a number", [](json& j) { File(j, "embed.bin")["tensors"][0] = 1; }, "a tensor entry is not an object"},
      {"tensor name null", [](json& j) { Tensor(j, "output.weight")["name"] = nullptr; }, "\"name\" is missing"},
      {"tensor type a number", [](json& j) { Tensor(j, "output.weight")["type"] = 0; }, "output.weight: \"type\""},
      {"shape a string", [](json& j) { Tensor(j, "output.weight")["shape"] = "32x8"; }, "output.weight: \"shape\""},
      {"shape a float", [](json& j) { Tensor(j, "output.weight")["shape"] = {32.5, 8}; }, "not a positive integer"},
      {"shape negative", [](json& j) { Tensor(j, "output.weight")["shape"] = {-32, 8}; }, "not a positive integer"},
      {"shape strings", [](json& j) { Tensor(j, "output.weight")["shape"] = {"32", "8"}; }, "not a positive integer"},
      {"offset a string", [](json& j) { Tensor(j, "output.weight")["offset"] = "4096"; }, "output.weight: \"offset\""},
      {"bytes a float", [](json& j) { Tensor(j, "output.weight")["bytes"] = 1024.0; }, "output.weight: \"bytes\""},
      {"tokenizer an array", [](json& j) { j["tokenizer"] = json::array(); }, "tokenizer is not an object"},
      {"metadata a string", [](json& j) { j["metadata"] = "none"; }, "metadata is not an object"},
      {"u8 of 300", [&](json& j) { j["metadata"]["x"] = u8_300; }, "metadata.x: 300 is out of range for u8"},
      {"type bogus, no value", [](json& j) { j["metadata"]["x"] = {{"type", "bogus"}}; }, "metadata.x: a metadata value"},
      {"type bogus", [](json& j) { j["metadata"]["x"] = {{"type", "bogus"}, {"value", 1}}; }, "unknown GGUF value type 'bogus'"},
      {"bare number", [](json& j) { j["metadata"]["x"] = 5; }, "metadata.x: a metadata value"},
      {"type a number", [](json& j) { j["metadata"]["x"] = {{"type", 4}, {"value", 1}}; }, "metadata.x: a metadata value"},
      {"i8 of -129", [](json& j) { j["metadata"]["x"] = {{"type", "i8"}, {"value", -129}}; }, "-129 is out of range for i8"},
      {"u64 of -1", [](json& j) { j["metadata"]["x"] = {{"type", "u64"}, {"value", -1}}; }, "-1 is out of range for u64"},
      {"u32 of 1.5", [](json& j) { j["metadata"]["x"] = {{"type", "u32"}, {"value", 1.5}}; }, "expected an integer for u32"},
      {"bool a string", [](json& j) { j["metadata"]["x"] = {{"type", "bool"}, {"value", "true"}}; }, "expected true or false"},
      {"f32 a word", [](json& j) { j["metadata"]["x"] = {{"type", "f32"}, {"value", "fast"}}; }, "expected a number"},
      {"str a number", [](json& j) { j["metadata"]["x"] = {{"type", "str"}, {"value", 5}}; }, "expected a string"},
      {"bad hex", [](json& j) { j["metadata"]["x"] = {{"type", "str"}, {"value", {{"hex", "zz"}}}}; }, "not valid hexadecimal"},
      {"odd hex", [](json& j) { j["metadata"]["x"] = {{"type", "str"}, {"value", {{"hex", "abc"}}}}; }, "not valid hexadecimal"},
      {"arr without element_type", [](json& j) { j["metadata"]["x"] = {{"type", "arr"}, {"value", {1}}}; }, "element_type"},
      {"arr value an object", [](json& j) { j["metadata"]["x"] = {{"type", "arr"}, {"element_type", "u8"}, {"value", {{"a", 1}}}}; }, "element_type"},
      {"arr element wrong", [](json& j) { j["tokenizer"]["tokenizer.ggml.tokens"]["value"][3] = 3; }, "tokenizer.tokenizer.ggml.tokens: element 3: expected a string"},
      {"arr of arr with a scalar", [](json& j) { j["metadata"]["x"] = {{"type", "arr"}, {"element_type", "arr"}, {"value", {{{"type", "u8"}, {"value", 1}}}}}; }, "element 0: element is not an array"},
  };
  for (const Case& c : cases) EXPECT_TRUE(RejectsMutation(c.mutate, c.needle)) << c.what;
}

TEST(ManifestHostileTest, MetadataArraysNestedTooDeep) {
  json value = {{"type", "arr"}, {"element_type", "u8"}, {"value", {1}}};
  for (uint32_t level = 0; level < kGgufMaxArrayDepth; ++level) {
    value = {{"type", "arr"}, {"element_type", "arr"}, {"value", {value}}};
  }
  EXPECT_TRUE(RejectsMutation([&](json& j) { j["metadata"]["x"] = value; }, "nested too deeply"));
}

TEST(ManifestHostileTest, SourceIsInformational) {
  // The source block is only for people: odd types in it are ignored.
  json j = Valid();
  j["source"] = {{"file", 12}, {"bytes", "many"}, {"gguf_version", -3}};
  auto m = ParseManifest(j.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->source_name, "");
  j["source"] = "tiny.gguf";
  EXPECT_TRUE(ParseManifest(j.dump()).ok());
}

// --- Round trip ------------------------------------------------------------------------

// JSON objects keep their keys sorted, so lists are compared as maps.
void ExpectSameList(const MetadataList& a, const MetadataList& b) {
  std::map<std::string, const GgufValue*> ma, mb;
  for (const auto& [k, v] : a) ma[k] = &v;
  for (const auto& [k, v] : b) mb[k] = &v;
  ASSERT_EQ(ma.size(), a.size());
  ASSERT_EQ(ma.size(), mb.size());
  for (const auto& [k, v] : ma) {
    ASSERT_TRUE(mb.count(k)) << k;
    EXPECT_EQ(testing::GgufValueDifference(*v, *mb[k]), "") << k;
  }
}

TEST(ManifestHostileTest, RoundTripKeepsEveryField) {
  using T = GgufValueType;
  using testing::ArrayValue;
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN(), kInf = std::numeric_limits<double>::infinity();
  constexpr float kNanF = std::numeric_limits<float>::quiet_NaN(), kInfF = std::numeric_limits<float>::infinity();
  Manifest m = TinyManifest();
  m.source_bytes = 1ull << 40;
  m.source_gguf_version = 2;
  m.config.name = "tiny \xE2\x9C\x93";
  m.config.rope_theta = 500000.f;
  m.config.norm_eps = 1e-6f;
  uint64_t checksum = 0x0123456789abcdefull;
  for (ManifestFile& f : m.files) f.checksum = checksum *= 31;
  m.files[0].checksum = ~0ull;
  m.tokenizer = {{"tokenizer.raw", GgufValue::String("\xFF\xFE not utf-8 \xC0\x80")},
                 {"tokenizer.empty", GgufValue::String("")},
                 {"tokenizer.merges", testing::StringArrayValue({"a b", "", "\xE2\x96\x81 x", "\x80\x81"})}};
  m.metadata = {
      {"u8", GgufValue::Uint(T::kUint8, 255)},
      {"i8", GgufValue::Int(T::kInt8, -128)},
      {"u16", GgufValue::Uint(T::kUint16, 65535)},
      {"i16", GgufValue::Int(T::kInt16, -32768)},
      {"u32", GgufValue::Uint(T::kUint32, 4294967295u)},
      {"i32", GgufValue::Int(T::kInt32, std::numeric_limits<int32_t>::min())},
      {"u64", GgufValue::Uint(T::kUint64, ~0ull)},
      {"i64", GgufValue::Int(T::kInt64, std::numeric_limits<int64_t>::min())},
      {"i64.positive", GgufValue::Int(T::kInt64, 7)},
      {"f32", GgufValue::Float(T::kFloat32, static_cast<double>(0.1f))},
      {"f32.nan", GgufValue::Float(T::kFloat32, kNan)},
      {"f32.inf", GgufValue::Float(T::kFloat32, -kInf)},
      {"f32.neg0", GgufValue::Float(T::kFloat32, -0.0)},
      {"f64", GgufValue::Float(T::kFloat64, 0.1)},
      {"f64.denormal", GgufValue::Float(T::kFloat64, 5e-324)},
      {"f64.inf", GgufValue::Float(T::kFloat64, kInf)},
      {"bool", GgufValue::Bool(true)},
      {"str", GgufValue::String(std::string("quote \" backslash \\ nul \0 end", 29))},
      {"a.u8", ArrayValue<uint8_t>(T::kUint8, {0, 1, 255})},
      {"a.i8", ArrayValue<int8_t>(T::kInt8, {-128, 0, 127})},
      {"a.u16", ArrayValue<uint16_t>(T::kUint16, {0, 65535})},
      {"a.i16", ArrayValue<int16_t>(T::kInt16, {-32768, 32767})},
      {"a.u32", ArrayValue<uint32_t>(T::kUint32, {0, 4294967295u})},
      {"a.i32", ArrayValue<int32_t>(T::kInt32, {-1, 2147483647})},
      {"a.u64", ArrayValue<uint64_t>(T::kUint64, {0, ~0ull})},
      {"a.i64", ArrayValue<int64_t>(T::kInt64, {std::numeric_limits<int64_t>::min(), 1})},
      {"a.f32", ArrayValue<float>(T::kFloat32, {0.5f, kNanF, kInfF, -0.f, 1e-45f})},
      {"a.f64", ArrayValue<double>(T::kFloat64, {kNan, -kInf, 1e308, 0.1})},
      {"a.bool", ArrayValue<uint8_t>(T::kBool, {1, 0, 1})},
      {"a.empty", ArrayValue<uint32_t>(T::kUint32, {})},
      {"a.nested", testing::ArrayOfArraysValue(
                       {ArrayValue<uint16_t>(T::kUint16, {1, 2}),
                        testing::ArrayOfArraysValue({testing::StringArrayValue({"x", "\xFF"})}),
                        ArrayValue<uint16_t>(T::kUint16, {})})},
  };

  const std::string text = ManifestToJson(m);
  EXPECT_NE(text.find("\"hex\": \"fffe"), std::string::npos) << "non-UTF-8 strings travel hex-encoded";
  auto parsed = ParseManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Manifest& p = *parsed;
  EXPECT_EQ(ManifestToJson(p), text);
  EXPECT_EQ(p.source_name, m.source_name);
  EXPECT_EQ(p.source_bytes, m.source_bytes);
  EXPECT_EQ(p.source_gguf_version, m.source_gguf_version);
  const ModelConfig &a = m.config, &b = p.config;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.n_experts, b.n_experts);
  EXPECT_EQ(a.n_experts_used, b.n_experts_used);
  EXPECT_EQ(a.expert_hidden_dim, b.expert_hidden_dim);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  ExpectSameList(m.tokenizer, p.tokenizer);
  ExpectSameList(m.metadata, p.metadata);
  ASSERT_EQ(m.files.size(), p.files.size());
  for (size_t i = 0; i < m.files.size(); ++i) {
    const ManifestFile &f = m.files[i], &g = p.files[i];
    SCOPED_TRACE(f.name);
    EXPECT_EQ(f.name, g.name);
    EXPECT_EQ(f.kind, g.kind);
    EXPECT_EQ(f.layer, g.layer);
    EXPECT_EQ(f.size, g.size);
    EXPECT_EQ(f.checksum, g.checksum);
    ASSERT_EQ(f.tensors.size(), g.tensors.size());
    for (size_t k = 0; k < f.tensors.size(); ++k) {
      const ManifestTensor &t = f.tensors[k], &u = g.tensors[k];
      EXPECT_EQ(t.name, u.name);
      EXPECT_EQ(t.type.type, u.type.type);
      EXPECT_EQ(t.shape, u.shape);
      EXPECT_EQ(t.offset, u.offset);
      EXPECT_EQ(t.bytes, u.bytes);
    }
  }
}

}  // namespace
}  // namespace octo
