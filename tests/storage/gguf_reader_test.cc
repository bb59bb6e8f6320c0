// The GGUF reader on files written by the test GGUF writer: every metadata
// value type comes back as written, in versions 2 and 3.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/byte_order.h"
#include "storage/gguf.h"
#include "tests/storage/test_models.h"
#include "tests/tools/gguf_writer.h"

namespace octo {
namespace {

using ::octo::testing::GgufWriter;
using ::octo::testing::TempDir;

std::string WriteAllTypes(const TempDir& tmp) {
  GgufWriter w;
  w.AddU8("t.u8", 200);
  w.AddI8("t.i8", -100);
  w.AddU16("t.u16", 60000);
  w.AddI16("t.i16", -30000);
  w.AddU32("t.u32", 4294967295u);
  w.AddI32("t.i32", -2000000000);
  w.AddF32("t.f32", 1.5e-6f);
  w.AddBool("t.bool", true);
  w.AddString("t.str", "{% for m in messages %}{{ m.content }}{% endfor %}");
  w.AddU64("t.u64", 1ull << 60);
  w.AddI64("t.i64", -(1ll << 60));
  w.AddF64("t.f64", -2.25);
  const std::vector<std::string> strings = {"<s>", "", "\xE2\x96\x81the"};
  w.AddStringArray("t.arr_str", strings);
  const std::vector<float> floats = {0.5f, -1.f, NAN};
  w.AddF32Array("t.arr_f32", floats);
  const std::vector<int32_t> ints = {1, -2, 3};
  w.AddI32Array("t.arr_i32", ints);
  // An array of two arrays of u16, written byte by byte.
  std::string nested;
  auto put32 = [&](uint32_t v) { nested.append(reinterpret_cast<const char*>(&v), 4); };
  auto put64 = [&](uint64_t v) { nested.append(reinterpret_cast<const char*>(&v), 8); };
  put32(static_cast<uint32_t>(GgufValueType::kArray));
  put64(2);
  for (uint16_t base : {10, 20}) {
    put32(static_cast<uint32_t>(GgufValueType::kUint16));
    put64(2);
    for (uint16_t v : {base, static_cast<uint16_t>(base + 1)}) nested.append(reinterpret_cast<const char*>(&v), 2);
  }
  w.AddRawKv("t.arr_arr", GgufValueType::kArray, nested);
  const std::string path = tmp.Path("types.gguf");
  EXPECT_TRUE(w.WriteFile(path, nullptr).ok());
  return path;
}

void ExpectAllTypes(const GgufFile& f) {
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(*f.Find("t.u8")->AsUint64(), 200u);
  EXPECT_EQ(*f.Find("t.i8")->AsInt64(), -100);
  EXPECT_EQ(*f.Find("t.u16")->AsUint64(), 60000u);
  EXPECT_EQ(*f.Find("t.i16")->AsInt64(), -30000);
  EXPECT_EQ(*f.Find("t.u32")->AsUint64(), 4294967295u);
  EXPECT_EQ(*f.Find("t.i32")->AsInt64(), -2000000000);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.Find("t.f32")->AsDouble()), 1.5e-6f);
  EXPECT_TRUE(*f.Find("t.bool")->AsBool());
  EXPECT_EQ(*f.Find("t.str")->AsString(), "{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(*f.Find("t.u64")->AsUint64(), 1ull << 60);
  EXPECT_EQ(*f.Find("t.i64")->AsInt64(), -(1ll << 60));
  EXPECT_EQ(*f.Find("t.f64")->AsDouble(), -2.25);
  // Wrong-kind conversions are errors, not garbage.
  EXPECT_FALSE(f.Find("t.i8")->AsUint64().ok());
  EXPECT_FALSE(f.Find("t.str")->AsUint64().ok());
  EXPECT_FALSE(f.Find("t.u8")->AsString().ok());

  const GgufValue* s = f.Find("t.arr_str");
  ASSERT_EQ(s->count, 3u);
  EXPECT_EQ(s->strings[2], "\xE2\x96\x81the");
  EXPECT_EQ(s->strings[1], "");
  const GgufValue* fl = f.Find("t.arr_f32");
  EXPECT_EQ(fl->FloatElement(1), -1.0);
  EXPECT_TRUE(std::isnan(fl->FloatElement(2)));
  EXPECT_EQ(f.Find("t.arr_i32")->IntElement(1), -2);
  const GgufValue* nested = f.Find("t.arr_arr");
  ASSERT_EQ(nested->element_type, GgufValueType::kArray);
  ASSERT_EQ(nested->arrays.size(), 2u);
  EXPECT_EQ(nested->arrays[1].element_type, GgufValueType::kUint16);
  EXPECT_EQ(nested->arrays[1].IntElement(1), 21);
}

TEST(GgufReaderTest, EveryValueTypeReadsBackAsWritten) {
  TempDir tmp;
  auto f = GgufFile::Open(WriteAllTypes(tmp));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 3u);
  ExpectAllTypes(*f);
}

// Version 2 has the same layout as 3 (64-bit counts); 3 only added the
// big-endian variant, which is refused elsewhere.
TEST(GgufReaderTest, VersionTwoReadsTheSame) {
  TempDir tmp;
  const std::string path = WriteAllTypes(tmp);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    uint8_t version[4];
    StoreLE<uint32_t>(version, 2);
    file.seekp(4);
    file.write(reinterpret_cast<const char*>(version), 4);
  }
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 2u);
  ExpectAllTypes(*f);
}

TEST(GgufReaderTest, ModelFromTheGeneratorReadsWithItsTensors) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny-moe", "Q4_K_M");
  auto f = GgufFile::Open(tmp.Path("m.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufTensorInfo* exps = f->FindTensor("blk.1.ffn_down_exps.weight");
  ASSERT_NE(exps, nullptr);
  EXPECT_EQ(exps->dims, (std::vector<uint64_t>{768, 256, 4}));
  EXPECT_EQ(exps->offset % f->alignment(), 0u);
  auto missing = GgufFile::Open(tmp.Path("nope.gguf"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.gguf"), absl::string_view::npos);
}

}  // namespace
}  // namespace octo
