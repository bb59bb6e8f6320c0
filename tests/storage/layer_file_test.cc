#include "storage/layer_file.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/byte_order.h"

namespace octo {
namespace {

TEST(LayerFileTest, HeaderRoundTrips) {
  std::vector<uint8_t> page(kHeaderBytes);
  EncodeFileHeader({FileKind::kLayer, 17, 9, 123 * kAlignment}, page);
  auto header = DecodeFileHeader(page);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->kind, FileKind::kLayer);
  EXPECT_EQ(header->layer, 17u);
  EXPECT_EQ(header->tensor_count, 9u);
  EXPECT_EQ(header->file_size, 123 * kAlignment);
}

TEST(LayerFileTest, ReadsVersion1And2AndRefusesOthers) {
  for (uint32_t version : {1u, 2u}) {
    std::vector<uint8_t> page(kHeaderBytes);
    FileHeader header;
    header.kind = FileKind::kLayer;
    header.layer = 3;
    header.tensor_count = 9;
    header.file_size = 8 * kAlignment;
    header.format_version = version;
    EncodeFileHeader(header, page);
    auto decoded = DecodeFileHeader(page);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->format_version, version);
  }
  for (uint32_t version : {0u, 3u}) {
    std::vector<uint8_t> page(kHeaderBytes);
    FileHeader header;
    header.format_version = version;
    EncodeFileHeader(header, page);
    auto decoded = DecodeFileHeader(page);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition) << version;
    EXPECT_NE(decoded.status().message().find(absl::StrCat("format version ", version)), absl::string_view::npos)
        << decoded.status();
  }
}

TEST(LayerFileTest, NewHeadersCarryTheCurrentVersion) {
  std::vector<uint8_t> page(kHeaderBytes);
  EncodeFileHeader(FileHeader{}, page);
  EXPECT_EQ(LoadLE<uint32_t>(page.data() + kHeaderVersionOffset), 2u);
  EXPECT_EQ(kFormatVersion, 2u);
}

TEST(LayerFileTest, EveryCorruptedHeaderByteIsDataLoss) {
  std::vector<uint8_t> page(kHeaderBytes);
  EncodeFileHeader({FileKind::kEmbed, kNoLayer, 1, 2 * kAlignment}, page);
  for (size_t i = 0; i < kHeaderUsedBytes; ++i) {
    std::vector<uint8_t> bad = page;
    bad[i] ^= 0x20;
    auto header = DecodeFileHeader(bad);
    ASSERT_FALSE(header.ok()) << "byte " << i;
    EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss) << "byte " << i << ": " << header.status();
  }
}

TEST(LayerFileTest, RejectsWrongMagicAndShortPage) {
  std::vector<uint8_t> page(kHeaderBytes, 0);
  EXPECT_NE(DecodeFileHeader(page).status().message().find("bad magic"), absl::string_view::npos);
  EXPECT_EQ(DecodeFileHeader(std::span(page).first(10)).status().code(), absl::StatusCode::kDataLoss);
}

TEST(LayerFileTest, FileNames) {
  EXPECT_EQ(FileNameFor(FileKind::kLayer, 7), "layer_007.bin");
  EXPECT_EQ(FileNameFor(FileKind::kLayer, 1234), "layer_1234.bin");
  EXPECT_EQ(FileNameFor(FileKind::kEmbed, kNoLayer), "embed.bin");
  EXPECT_EQ(FileNameFor(FileKind::kLmHead, kNoLayer), "lm_head.bin");
  EXPECT_EQ(FileNameFor(FileKind::kFinalNorm, kNoLayer), "final_norm.bin");
  EXPECT_EQ(*FileKindFromName("final_norm"), FileKind::kFinalNorm);
  EXPECT_FALSE(FileKindFromName("weights").ok());
}

}  // namespace
}  // namespace octo
