// Format 2's expert blocks in the manifest: the layout decompose plans for a
// MoE model round-trips, version 1 manifests still parse, and every
// inconsistent expert layout is refused with INVALID_ARGUMENT naming the
// file (and tensor). Also the byte ranges and the section hasher that
// decompose and verify share.
#include "storage/expert_blocks.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/decompose.h"
#include "storage/section_hasher.h"
#include "storage/xxhash64.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

using nlohmann::json;
using ::octo::testing::TempDir;

// The manifest PlanLayerDirectory makes for the model `generate` writes
// (checksums zero: nothing is written).
Manifest PlannedManifest(const std::function<void(const std::string&)>& generate) {
  TempDir tmp;
  generate(tmp.Path("m.gguf"));
  auto gguf = GgufFile::Open(tmp.Path("m.gguf"));
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  auto plan = PlanLayerDirectory(*gguf, "m.gguf");
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

const Manifest& MoeManifest() {
  static const Manifest* m = new Manifest(PlannedManifest(testing::GenerateMoeModel));
  return *m;
}

const Manifest& DenseManifest() {
  static const Manifest* m =
      new Manifest(PlannedManifest([](const std::string& path) { testing::GenerateModel(path, "tiny", "Q8_0"); }));
  return *m;
}

// `m` as format 1 wrote it: no expert blocks, every file packed in list order.
Manifest AsVersion1(Manifest m) {
  m.format_version = 1;
  for (ManifestFile& f : m.files) {
    f.experts.reset();
    uint64_t offset = kHeaderBytes;
    for (ManifestTensor& t : f.tensors) {
      t.expert_stride = 0;
      t.offset = offset;
      offset = (offset + t.bytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    f.size = offset;
  }
  return m;
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

uint64_t U64(const json& j) { return j.get<uint64_t>(); }

// Applies `mutate` to `base` and expects ParseManifest to fail with
// INVALID_ARGUMENT mentioning every one of `needles`.
::testing::AssertionResult Rejects(const Manifest& base, const std::function<void(json&)>& mutate,
                                   std::vector<std::string> needles) {
  json j = json::parse(ManifestToJson(base));
  mutate(j);
  absl::StatusOr<Manifest> m = ParseManifest(j.dump());
  if (m.ok()) return ::testing::AssertionFailure() << "parsed OK";
  if (m.status().code() != absl::StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "got " << m.status();
  }
  for (const std::string& needle : needles) {
    if (m.status().message().find(needle) == absl::string_view::npos) {
      return ::testing::AssertionFailure() << "got " << m.status() << "; expected it to mention \"" << needle << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RejectsMoe(const std::function<void(json&)>& mutate, std::vector<std::string> needles) {
  return Rejects(MoeManifest(), mutate, std::move(needles));
}

constexpr char kGate[] = "blk.0.ffn_gate_exps.weight";
constexpr char kUp[] = "blk.0.ffn_up_exps.weight";

// --- What decompose plans, and what still parses -----------------------------------

TEST(ExpertBlocksTest, PlannedMoeManifestRoundTrips) {
  const Manifest& m = MoeManifest();
  EXPECT_EQ(m.format_version, 2u);
  const std::string text = ManifestToJson(m);
  auto parsed = ParseManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ManifestToJson(*parsed), text);
  for (uint32_t l = 0; l < m.config.n_layers; ++l) {
    const ManifestFile& f = *parsed->Layer(l);
    ASSERT_TRUE(f.experts.has_value()) << f.name;
    EXPECT_EQ(f.experts->count, testing::kMoeModelExperts);
    EXPECT_EQ(f.experts->offset, m.Layer(l)->experts->offset);
    EXPECT_EQ(f.experts->stride, m.Layer(l)->experts->stride);
    EXPECT_EQ(f.experts->checksums.size(), testing::kMoeModelExperts);
  }
  EXPECT_FALSE(parsed->FindFile("embed.bin")->experts.has_value());
}

TEST(ExpertBlocksTest, Version1ManifestsStillParse) {
  for (const Manifest* m : {&MoeManifest(), &DenseManifest()}) {
    const Manifest v1 = AsVersion1(*m);
    const std::string text = ManifestToJson(v1);
    ASSERT_NE(text.find("\"format_version\": 1"), std::string::npos);
    EXPECT_EQ(text.find("expert_stride"), std::string::npos);
    auto parsed = ParseManifest(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->format_version, 1u);
    for (const ManifestFile& f : parsed->files) {
      EXPECT_FALSE(f.experts.has_value()) << f.name;
      EXPECT_EQ(DenseRange(f).bytes, f.size) << f.name;
    }
  }
}

// --- Hostile expert layouts ------------------------------------------------------------

TEST(ExpertBlocksTest, ExpertsInAVersion1Manifest) {
  EXPECT_TRUE(RejectsMoe([](json& j) { j["format_version"] = 1; },
                         {"layer_000.bin: has \"experts\", which format version 1 does not have"}));
}

TEST(ExpertBlocksTest, ExpertStrideInAVersion1Manifest) {
  EXPECT_TRUE(Rejects(AsVersion1(MoeManifest()), [](json& j) { Tensor(j, kGate)["expert_stride"] = 4096; },
                      {"layer_000.bin: tensor blk.0.ffn_gate_exps.weight: has an expert_stride but the file has no "
                       "\"experts\""}));
}

TEST(ExpertBlocksTest, MoeLayerFileWithoutExperts) {
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_001.bin").erase("experts"); },
                         {"layer_001.bin: \"experts\" is missing"}));
}

TEST(ExpertBlocksTest, ExpertsOnAFileThatIsNotAMoeLayer) {
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "embed.bin")["experts"] = File(j, "layer_000.bin")["experts"]; },
                         {"embed.bin: has \"experts\", but only the layer files of a mixture-of-experts model"}));
  const json experts = json::parse(ManifestToJson(MoeManifest()))["files"][1]["experts"];
  EXPECT_TRUE(Rejects(DenseManifest(), [&](json& j) { File(j, "layer_000.bin")["experts"] = experts; },
                      {"layer_000.bin: has \"experts\", but only the layer files of a mixture-of-experts model"}));
}

TEST(ExpertBlocksTest, WrongExpertCount) {
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_000.bin")["experts"]["count"] = 3; },
                         {"layer_000.bin: experts.count is 3 but the model has 4 experts"}));
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_000.bin")["experts"]["count"] = 0; },
                         {"layer_000.bin: experts.count is 0"}));
}

TEST(ExpertBlocksTest, UnalignedOrZeroStride) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) {
        json& x = File(j, "layer_000.bin")["experts"];
        x["stride"] = U64(x["stride"]) + 1;
      },
      {"layer_000.bin: experts.stride", "is not a positive multiple of 4096"}));
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_000.bin")["experts"]["stride"] = 0; },
                         {"layer_000.bin: experts.stride 0"}));
}

TEST(ExpertBlocksTest, UnalignedOffsetOrOneInsideTheHeader) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) {
        json& x = File(j, "layer_000.bin")["experts"];
        x["offset"] = U64(x["offset"]) + 512;
      },
      {"layer_000.bin: experts.offset", "is not a multiple of 4096 past the header page"}));
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_000.bin")["experts"]["offset"] = 0; },
                         {"layer_000.bin: experts.offset 0"}));
}

TEST(ExpertBlocksTest, BlocksThatDoNotEndAtTheFileSize) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) {
        json& f = File(j, "layer_001.bin");
        f["size"] = U64(f["size"]) + 4096;
      },
      {"layer_001.bin: experts: 4 blocks of", "do not end at the file size"}));
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_001.bin")["experts"]["stride"] = 1ull << 62; },
                         {"layer_001.bin: experts: 4 blocks of 4611686018427387904 bytes"}));
}

TEST(ExpertBlocksTest, ChecksumCountDisagreesWithTheExperts) {
  EXPECT_TRUE(RejectsMoe([](json& j) { File(j, "layer_000.bin")["experts"]["checksums"].erase(0); },
                         {"layer_000.bin: experts: 3 checksums for 4 experts"}));
}

TEST(ExpertBlocksTest, SliceOverflowingItsBlock) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) {
        const json& x = File(j, "layer_000.bin")["experts"];
        Tensor(j, kGate)["offset"] = U64(x["offset"]) + U64(x["stride"]) - 4096;
      },
      {"layer_000.bin: tensor blk.0.ffn_gate_exps.weight: expert slice [", "inside the",
       "-byte expert block"}));
}

TEST(ExpertBlocksTest, SliceAtAnUnalignedOffset) {
  EXPECT_TRUE(RejectsMoe([](json& j) { Tensor(j, kUp)["offset"] = U64(Tensor(j, kUp)["offset"]) + 64; },
                         {"layer_000.bin: tensor blk.0.ffn_up_exps.weight: expert slice [", "4096-aligned"}));
}

TEST(ExpertBlocksTest, SlicesOverlapping) {
  EXPECT_TRUE(RejectsMoe([](json& j) { Tensor(j, kUp)["offset"] = Tensor(j, kGate)["offset"]; },
                         {"layer_000.bin: tensor blk.0.ffn_", "expert slice overlaps that of tensor blk.0.ffn_"}));
}

TEST(ExpertBlocksTest, StackedTensorBeforeTheBlocks) {
  EXPECT_TRUE(RejectsMoe([](json& j) { Tensor(j, kGate)["offset"] = 4096; },
                         {"layer_000.bin: tensor blk.0.ffn_gate_exps.weight: offset 4096 is before the expert "
                          "blocks"}));
}

TEST(ExpertBlocksTest, ExpertStrideDisagreesWithTheBlocks) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) { Tensor(j, kGate)["expert_stride"] = U64(Tensor(j, kGate)["expert_stride"]) * 2; },
      {"layer_000.bin: tensor blk.0.ffn_gate_exps.weight: expert_stride is", "but experts.stride is"}));
  EXPECT_TRUE(RejectsMoe([](json& j) { Tensor(j, kGate).erase("expert_stride"); },
                         {"layer_000.bin: tensor blk.0.ffn_gate_exps.weight: expert_stride is 0"}));
}

TEST(ExpertBlocksTest, ExpertStrideOnATensorThatIsNotStacked) {
  EXPECT_TRUE(RejectsMoe([](json& j) { Tensor(j, "blk.0.attn_q.weight")["expert_stride"] = 4096; },
                         {"layer_000.bin: tensor blk.0.attn_q.weight: has an expert_stride but is not a stacked "
                          "expert tensor"}));
}

TEST(ExpertBlocksTest, DenseTensorReachingIntoTheBlocks) {
  EXPECT_TRUE(RejectsMoe(
      [](json& j) { Tensor(j, "blk.0.attn_q.weight")["offset"] = File(j, "layer_000.bin")["experts"]["offset"]; },
      {"layer_000.bin: tensor blk.0.attn_q.weight: ends at", "past the dense part"}));
}

TEST(ExpertBlocksTest, MalformedExpertsObject) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"not an object", [](json& j) { File(j, "layer_000.bin")["experts"] = 4; },
       "layer_000.bin: experts is not an object"},
      {"offset a string", [](json& j) { File(j, "layer_000.bin")["experts"]["offset"] = "4096"; },
       "layer_000.bin: experts: \"offset\""},
      {"stride negative", [](json& j) { File(j, "layer_000.bin")["experts"]["stride"] = -4096; },
       "layer_000.bin: experts: \"stride\""},
      {"count missing", [](json& j) { File(j, "layer_000.bin")["experts"].erase("count"); },
       "layer_000.bin: experts: \"count\""},
      {"count huge", [](json& j) { File(j, "layer_000.bin")["experts"]["count"] = 1ull << 40; },
       "layer_000.bin: experts: count 1099511627776 is above 1024"},
      {"dense checksum malformed", [](json& j) { File(j, "layer_000.bin")["experts"]["dense_checksum"] = "xxh64:1"; },
       "layer_000.bin: experts: dense part: checksum"},
      {"checksums not an array", [](json& j) { File(j, "layer_000.bin")["experts"]["checksums"] = "none"; },
       "layer_000.bin: experts: \"checksums\""},
      {"checksums too many", [](json& j) {
         File(j, "layer_000.bin")["experts"]["checksums"] = std::vector<std::string>(1025, "xxh64:0000000000000000");
       }, "layer_000.bin: experts: \"checksums\""},
      {"checksum a number", [](json& j) { File(j, "layer_000.bin")["experts"]["checksums"][2] = 7; },
       "layer_000.bin: experts: expert 2: checksum is not a string"},
      {"checksum malformed", [](json& j) { File(j, "layer_000.bin")["experts"]["checksums"][3] = "xxh64:zz"; },
       "layer_000.bin: experts: expert 3: checksum"},
      {"expert_stride a string", [](json& j) { Tensor(j, kGate)["expert_stride"] = "4096"; },
       "tensor blk.0.ffn_gate_exps.weight: \"expert_stride\""},
  };
  for (const Case& c : cases) EXPECT_TRUE(RejectsMoe(c.mutate, {c.needle})) << c.what;
}

// --- Byte ranges and hashing ---------------------------------------------------------------

TEST(ExpertBlocksTest, DenseAndExpertRanges) {
  const ManifestFile& layer = *MoeManifest().Layer(1);
  const ExpertBlocks& x = *layer.experts;
  EXPECT_EQ(DenseRange(layer).offset, 0u);
  EXPECT_EQ(DenseRange(layer).bytes, x.offset);
  for (uint32_t e = 0; e < x.count; ++e) {
    EXPECT_EQ(ExpertRange(layer, e).offset, x.offset + e * x.stride);
    EXPECT_EQ(ExpertRange(layer, e).bytes, x.stride);
  }
  const ManifestFile& embed = *MoeManifest().FindFile("embed.bin");
  EXPECT_EQ(DenseRange(embed).bytes, embed.size);
  std::vector<ByteRange> ranges = ExpertChecksumRanges(layer);
  ASSERT_EQ(ranges.size(), 1 + x.count);
  EXPECT_EQ(ranges[0].bytes, x.offset);
  EXPECT_EQ(ranges.back().offset + ranges.back().bytes, layer.size);
  EXPECT_TRUE(ExpertChecksumRanges(embed).empty());
}

TEST(ExpertBlocksDeathTest, ExpertRangeOutsideTheBlocksIsAProgrammerError) {
  const ManifestFile& layer = *MoeManifest().Layer(0);
  const ManifestFile& embed = *MoeManifest().FindFile("embed.bin");
  EXPECT_DEATH(ExpertRange(embed, 0), "the file has no expert blocks");
  EXPECT_DEATH(ExpertRange(layer, testing::kMoeModelExperts), "expert index past experts->count");
}

TEST(ExpertBlocksTest, StackedExpertTensorNames) {
  EXPECT_TRUE(IsStackedExpertTensor("blk.0.ffn_gate_exps.weight"));
  EXPECT_TRUE(IsStackedExpertTensor("blk.47.ffn_up_exps.weight"));
  EXPECT_TRUE(IsStackedExpertTensor("blk.3.ffn_down_exps.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk.3.ffn_down.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk.3.ffn_gate_inp.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk.3.ffn_gate_shexp.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk.x.ffn_gate_exps.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk..ffn_gate_exps.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("ffn_gate_exps.weight"));
  EXPECT_FALSE(IsStackedExpertTensor("blk.3.ffn_gate_exps.weight.bak"));
}

TEST(SectionHasherTest, EachSectionHashesAsIfReadAlone) {
  std::vector<uint8_t> file(40000);
  std::mt19937 rng(7);
  for (uint8_t& b : file) b = static_cast<uint8_t>(rng());
  std::fill(file.begin() + 30000, file.end(), 0);  // a zero tail fed as UpdateZerosTo
  const std::vector<ByteRange> sections = {{0, 5000}, {8192, 4096}, {12288, 7000}, {24576, 15424}};
  for (uint64_t step : {1ull, 31ull, 4096ull, 6000ull, 40000ull}) {
    SCOPED_TRACE(step);
    SectionHasher hasher(sections);
    for (uint64_t pos = 0; pos < 30000; pos += step) {
      hasher.Update(std::span(file).subspan(pos, std::min<uint64_t>(step, 30000 - pos)));
    }
    hasher.UpdateZerosTo(file.size());
    EXPECT_EQ(hasher.pos(), file.size());
    EXPECT_EQ(hasher.Digest(), Xxh64Hash(file));
    ASSERT_EQ(hasher.section_count(), sections.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      EXPECT_EQ(hasher.SectionDigest(i), Xxh64Hash(std::span(file).subspan(sections[i].offset, sections[i].bytes)))
          << "section " << i;
    }
  }
}

}  // namespace
}  // namespace octo
