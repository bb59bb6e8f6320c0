// verify: every kind of damage to a layer directory is found and named.
#include "storage/verify.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

namespace fs = std::filesystem;
using ::octo::testing::TempDir;

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::GenerateModel(tmp_.Path("m.gguf"), "tiny", "Q8_0");  // every layer the same size
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

  TempDir tmp_;
  Manifest manifest_;
};

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
