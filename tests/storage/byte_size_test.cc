#include "storage/byte_size.h"

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(ParseByteSizeTest, PlainBytesAndEverySuffixSpelling) {
  EXPECT_EQ(ParseByteSize("0"), 0u);
  EXPECT_EQ(ParseByteSize("4096"), 4096u);
  EXPECT_EQ(ParseByteSize("4096B"), 4096u);
  EXPECT_EQ(ParseByteSize("64K"), 64u << 10);
  EXPECT_EQ(ParseByteSize("64k"), 64u << 10);
  EXPECT_EQ(ParseByteSize("512M"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("512MB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("4GiB"), 4ull << 30);
  EXPECT_EQ(ParseByteSize("4gib"), 4ull << 30);
  EXPECT_EQ(ParseByteSize("2T"), 2ull << 40);
  EXPECT_EQ(ParseByteSize(" 2G "), 2ull << 30);
}

TEST(ParseByteSizeTest, FractionsWithAUnitRoundDown) {
  EXPECT_EQ(ParseByteSize("1.5G"), 3ull << 29);
  EXPECT_EQ(ParseByteSize("0.5KiB"), 512u);
  EXPECT_EQ(ParseByteSize("1.0001K"), 1024u);  // 1024.1024 bytes
}

TEST(ParseByteSizeTest, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "G", "auto", "-1", "-1G", "+5", "1X", "1GG", "1 G", "1.5", "1.G", ".5G", "1e9",
                          "1.5.5G", "0x10", "1Gi B", "18446744073709551616", "16777216T", "1.0000000001G"}) {
    EXPECT_EQ(ParseByteSize(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(ParseByteSizeTest, LargestValuesAndOverflow) {
  EXPECT_EQ(ParseByteSize("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ParseByteSize("16777215T"), 16777215ull << 40);
  EXPECT_EQ(ParseByteSize("16777215.5T"), (16777215ull << 40) + (1ull << 39));
}

TEST(FormatByteSizeTest, PicksTheLargestUnitBelowTheValue) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1.00 KiB");
  EXPECT_EQ(FormatByteSize(512ull << 20), "512.0 MiB");
  EXPECT_EQ(FormatByteSize(3ull << 29), "1.50 GiB");
  EXPECT_EQ(FormatByteSize(5ull << 40), "5.00 TiB");
}

TEST(ParameterSizeLabelTest, PowersOfAThousandWithOneDecimal) {
  EXPECT_EQ(ParameterSizeLabel(0), "0");
  EXPECT_EQ(ParameterSizeLabel(999), "999");
  EXPECT_EQ(ParameterSizeLabel(260032), "260.0K");
  EXPECT_EQ(ParameterSizeLabel(124439808), "124.4M");
  EXPECT_EQ(ParameterSizeLabel(8030261248), "8.0B");
  EXPECT_EQ(ParameterSizeLabel(70553706496), "70.6B");
}

}  // namespace
}  // namespace octo
