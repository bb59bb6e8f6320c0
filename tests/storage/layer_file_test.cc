#include "storage/layer_file.h"

#include <vector>

#include "gtest/gtest.h"

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
