// verify: every kind of damage to a layer directory is found and named.
#include "storage/verify.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "storage/file.h"
#include "storage/layer_file.h"
#include "storage/xxhash64.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

namespace fs = std::filesystem;
using ::octo::testing::TempDir;

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Build([](const std::string& path) { testing::GenerateModel(path, "tiny", "Q8_0"); });  // every layer the same size
  }
  // Generates a GGUF with `generate`, decomposes it into dir(), checks it verifies.
  void Build(const std::function<void(const std::string&)>& generate) {
    generate(tmp_.Path("m.gguf"));
    auto manifest = Decompose(tmp_.Path("m.gguf"), dir(), {});
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    manifest_ = *manifest;
    ASSERT_TRUE(VerifyModelDir(dir()).ok());
  }
  std::string dir() const { return tmp_.Path("model"); }
  std::string path(const std::string& name) const { return dir() + "/" + name; }

  void PokeByte(const std::string& name, uint64_t offset) {
    std::fstream f(path(name), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 0x01));
  }

  // The report fails and names exactly `file`, with `message` in its text.
  void ExpectOnlyProblem(const VerifyReport& report, const std::string& file, const std::string& message) {
    ASSERT_FALSE(report.ok());
    ASSERT_EQ(report.problems.size(), 1u) << report.problems[0].file << ": " << report.problems[0].message;
    EXPECT_EQ(report.problems[0].file, file);
    EXPECT_NE(report.problems[0].message.find(message), std::string::npos) << report.problems[0].message;
  }

  // Rewrites the header of file `f` with `format_version`, keeping its
  // header checksum valid.
  void RewriteHeaderVersion(const ManifestFile& f, uint32_t format_version) {
    std::vector<uint8_t> page = ReadBytes(f.name, 0, kHeaderBytes);
    auto header = DecodeFileHeader(page);
    ASSERT_TRUE(header.ok()) << header.status();
    header->format_version = format_version;
    EncodeFileHeader(*header, page);
    std::fstream out(path(f.name), std::ios::in | std::ios::out | std::ios::binary);
    out.write(reinterpret_cast<const char*>(page.data()), static_cast<std::streamsize>(page.size()));
  }

  std::vector<uint8_t> ReadBytes(const std::string& name, uint64_t offset, uint64_t n) {
    std::vector<uint8_t> bytes(n);
    std::ifstream in(path(name), std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n));
    EXPECT_TRUE(in.good()) << name;
    return bytes;
  }

  TempDir tmp_;
  Manifest manifest_;
};

// A format 1 directory (written before expert blocks existed) still verifies.
TEST_F(VerifyTest, Version1DirectoryStillVerifies) {
  Manifest v1 = manifest_;
  v1.format_version = 1;
  for (ManifestFile& f : v1.files) {
    RewriteHeaderVersion(f, 1);
    f.checksum = Xxh64Hash(ReadBytes(f.name, 0, f.size));
  }
  fs::remove(path(kManifestName));
  ASSERT_TRUE(WriteNewFile(path(kManifestName), ManifestToJson(v1)).ok());
  VerifyReport report = VerifyModelDir(dir());
  EXPECT_TRUE(report.ok()) << report.problems[0].file << ": " << report.problems[0].message;
  auto reread = ReadManifest(dir());
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->format_version, 1u);
}

// Format 2, a MoE model: each layer file's dense part and expert blocks
// carry their own checksums, and verify names the part that is damaged.
class MoeVerifyTest : public VerifyTest {
 protected:
  void SetUp() override { Build(testing::GenerateMoeModel); }

  // The file offset of byte `at` of tensor `suffix`'s slice for `expert` in layer `layer`.
  uint64_t SliceByte(uint32_t layer, const std::string& suffix, uint32_t expert, uint64_t at) {
    const ManifestFile& f = *manifest_.Layer(layer);
    for (const ManifestTensor& t : f.tensors) {
      if (t.name == absl::StrCat("blk.", layer, ".", suffix)) return t.offset + expert * t.expert_stride + at;
    }
    ADD_FAILURE() << "no tensor " << suffix;
    return 0;
  }
};

TEST_F(MoeVerifyTest, FlippedByteInOneExpertBlockNamesThatExpertAndLayer) {
  PokeByte("layer_001.bin", SliceByte(1, "ffn_up_exps.weight", 2, 1000));
  VerifyReport report = VerifyModelDir(dir());
  ExpectOnlyProblem(report, "layer_001.bin", "expert 2 of layer 1: checksum mismatch (the manifest says xxh64:");
  const std::string& message = report.problems[0].message;
  EXPECT_EQ(message.find("dense part"), std::string::npos) << message;
  EXPECT_EQ(message.find("expert 1 "), std::string::npos) << message;
  EXPECT_EQ(message.find("expert 3 "), std::string::npos) << message;
}

TEST_F(MoeVerifyTest, FlippedByteInThePaddingOfABlockNamesThatExpert) {
  // Expert 3's gate slice is followed by zeros up to the next aligned offset.
  PokeByte("layer_000.bin", SliceByte(0, "ffn_gate_exps.weight", 3, testing::kMoeModelSliceBytes + 10));
  ExpectOnlyProblem(VerifyModelDir(dir()), "layer_000.bin", "expert 3 of layer 0: checksum mismatch");
}

TEST_F(MoeVerifyTest, FlippedByteInTheDensePartNamesTheDensePart) {
  const ManifestFile& f = *manifest_.Layer(0);
  const ManifestTensor* wq = nullptr;
  for (const ManifestTensor& t : f.tensors) {
    if (t.name == "blk.0.attn_q.weight") wq = &t;
  }
  ASSERT_NE(wq, nullptr);
  ASSERT_LT(wq->offset + wq->bytes, DenseRange(f).bytes);
  PokeByte("layer_000.bin", wq->offset + wq->bytes / 2);
  VerifyReport report = VerifyModelDir(dir());
  ExpectOnlyProblem(report, "layer_000.bin", "dense part: checksum mismatch");
  EXPECT_EQ(report.problems[0].message.find("expert"), std::string::npos) << report.problems[0].message;
}

TEST_F(MoeVerifyTest, ExpertBlocksUnderAVersion1HeaderAreRefused) {
  RewriteHeaderVersion(*manifest_.Layer(1), 1);
  ExpectOnlyProblem(VerifyModelDir(dir()), "layer_001.bin", "header says format version 1");
}

TEST_F(VerifyTest, OneFlippedBitInTensorDataIsAChecksumMismatch) {
  const ManifestTensor& t = manifest_.Layer(1)->tensors[2];
  PokeByte("layer_001.bin", t.offset + t.bytes / 2);
  VerifyReport report = VerifyModelDir(dir());
  ExpectOnlyProblem(report, "layer_001.bin", "checksum mismatch");
  EXPECT_EQ(report.files_ok.size(), manifest_.files.size() - 1);
}

TEST_F(VerifyTest, DamageInPaddingIsFoundToo) {
  PokeByte("final_norm.bin", manifest_.FindFile("final_norm.bin")->size - 1);
  ExpectOnlyProblem(VerifyModelDir(dir()), "final_norm.bin", "checksum mismatch");
}

TEST_F(VerifyTest, CorruptHeaderIsNamed) {
  PokeByte("layer_000.bin", 13);  // file kind
  ExpectOnlyProblem(VerifyModelDir(dir()), "layer_000.bin", "header checksum mismatch");
}

TEST_F(VerifyTest, TruncatedFile) {
  fs::resize_file(path("embed.bin"), 4096);
  ExpectOnlyProblem(VerifyModelDir(dir()), "embed.bin", "size is 4096 bytes");
}

TEST_F(VerifyTest, MissingFile) {
  fs::remove(path("lm_head.bin"));
  ExpectOnlyProblem(VerifyModelDir(dir()), "lm_head.bin", "cannot open");
}

TEST_F(VerifyTest, SwappedLayerFilesAreCaughtByTheirHeaders) {
  // Both layers have the same shape, so only the header tells them apart.
  fs::rename(path("layer_000.bin"), path("tmp.bin"));
  fs::rename(path("layer_001.bin"), path("layer_000.bin"));
  fs::rename(path("tmp.bin"), path("layer_001.bin"));
  VerifyReport report = VerifyModelDir(dir());
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_NE(report.problems[0].message.find("header says layer 1"), std::string::npos) << report.problems[0].message;
}

TEST_F(VerifyTest, DamagedManifest) {
  fs::resize_file(path("manifest.json"), 100);
  ExpectOnlyProblem(VerifyModelDir(dir()), "manifest.json", "not valid JSON");
}

TEST_F(VerifyTest, MissingManifestMeansNotAModel) {
  fs::remove(path("manifest.json"));
  ExpectOnlyProblem(VerifyModelDir(dir()), "manifest.json", "cannot open");
}

TEST_F(VerifyTest, StrayFileIsANoteNotAFailure) {
  std::ofstream(path("README.txt")) << "notes";
  VerifyReport report = VerifyModelDir(dir());
  EXPECT_TRUE(report.ok());
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_NE(report.notes[0].find("README.txt"), std::string::npos);
}

TEST_F(VerifyTest, ProgressCoversEveryByte) {
  uint64_t last_done = 0, last_total = 0;
  VerifyReport report = VerifyModelDir(dir(), [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(report.bytes_checked, last_total);
}

}  // namespace
}  // namespace octo
