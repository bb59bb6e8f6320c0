// The GGUF parser against hostile input: one deliberately broken file per
// defect, then LevelDB-style sweeps of every truncation and every single-byte
// corruption of a valid file. Each defect must give the expected code and a
// message naming it; nothing may crash, hang or allocate absurdly (CI also
// runs this under ASan/UBSan).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "storage/manifest.h"
#include "tests/storage/gguf_bytes.h"
#include "tests/long_tests.h"

// Global operator new records the largest single request, so tests can check
// that a hostile length is refused before anything is allocated for it.
namespace {
std::atomic<size_t> g_largest_allocation{0};
void NoteAllocation(size_t n) {
  size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
  while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

// GCC sees these free() the result of operator new once inlined; in a
// replacement pair that is what is meant.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  NoteAllocation(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  NoteAllocation(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace octo {
namespace {

using testing::GgufBytes;
using testing::kGgmlF32;
using testing::kGgmlQ4_0;
using testing::kGgmlQ8_1;
using testing::kTypeArr;
using testing::kTypeBool;
using testing::kTypeStr;
using testing::kTypeU32;
using testing::kTypeU64;
using testing::kTypeU8;
using testing::ParseGgufBytes;
using testing::ValidTinyGguf;

// Parses `bytes` and checks the error's code and that its message contains
// `needle`.
::testing::AssertionResult FailsWith(std::vector<uint8_t> bytes, absl::StatusCode code, absl::string_view needle) {
  auto file = ParseGgufBytes(std::move(bytes));
  if (file.ok()) return ::testing::AssertionFailure() << "parsed OK, expected " << absl::StatusCodeToString(code);
  const absl::Status& s = file.status();
  if (s.code() != code || s.message().find(needle) == absl::string_view::npos) {
    return ::testing::AssertionFailure() << "got " << s << "; expected " << absl::StatusCodeToString(code)
                                         << " mentioning \"" << needle << "\"";
  }
  return ::testing::AssertionSuccess();
}

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kOutOfRange = absl::StatusCode::kOutOfRange;

// A file with one metadata entry, key "k", whose type and value the caller
// appends; no tensors.
GgufBytes OneKv(uint32_t type) {
  GgufBytes b;
  b.Header(3, 0, 1).Key("k", type);
  return b;
}

// A file without metadata holding one tensor info and `data_bytes` of data.
std::vector<uint8_t> OneTensor(absl::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                               uint64_t offset, uint64_t data_bytes) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo(name, dims, type, offset).PadTo(32).Zeros(data_bytes);
  return b.Take();
}

// --- Positive controls --------------------------------------------------------

TEST(GgufHostileTest, ValidTinyGgufParsesAndPlans) {
  auto file = ParseGgufBytes(ValidTinyGguf());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->tensors().size(), testing::TinyLlamaTensors().size());
  EXPECT_EQ(file->metadata().size(), 15u);
  const GgufTensorInfo& last = file->tensors().back();
  EXPECT_EQ(last.offset + last.n_bytes, file->file_size()) << "the last tensor must end the file";
  auto plan = PlanLayerDirectory(*file, "tiny.gguf");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->config.dim, 32u);
  EXPECT_EQ(plan->config.n_kv_heads, 2u);
  EXPECT_EQ(plan->config.vocab_size, 8u);
  EXPECT_FALSE(plan->config.tied_embeddings);
  ASSERT_NE(plan->FindTokenizerKey("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(plan->FindTokenizerKey("tokenizer.ggml.tokens")->count, 8u);
}

TEST(GgufHostileTest, LimitsThemselvesAreAccepted) {
  GgufBytes b;
  b.Header(3, 1, 2).KvStr(std::string(kGgufMaxKeyBytes, 'k'), "v").Key("nested", kTypeArr);
  for (uint32_t level = 1; level < kGgufMaxArrayDepth; ++level) b.ArrayHeader(kTypeArr, 1);
  b.ArrayHeader(kTypeU8, 1).U8(7);
  b.TensorInfo(std::string(kGgufMaxTensorNameBytes, 't'), {32, 1, 1, 2}, kGgmlQ4_0, 0).PadTo(32).Zeros(36);
  auto file = ParseGgufBytes(b.Take());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufValue* v = file->Find("nested");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->arrays.at(0).arrays.at(0).arrays.at(0).raw, std::vector<uint8_t>{7});
  EXPECT_EQ(file->tensors()[0].n_bytes, 36u);
}

// --- Header ---------------------------------------------------------------------

TEST(GgufHostileTest, EmptyFile) { EXPECT_TRUE(FailsWith({}, kOutOfRange, "magic")); }
TEST(GgufHostileTest, ThreeBytes) { EXPECT_TRUE(FailsWith({'G', 'G', 'U'}, kOutOfRange, "magic")); }

TEST(GgufHostileTest, BadMagic) {
  EXPECT_TRUE(FailsWith(GgufBytes().Text("GGML").U32(3).U64(0).U64(0).Take(), kInvalid, "not a GGUF file"));
}

TEST(GgufHostileTest, MagicOnly) { EXPECT_TRUE(FailsWith(GgufBytes().Magic().Take(), kOutOfRange, "version")); }

TEST(GgufHostileTest, Version1) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(1, 0, 0).Take(), kInvalid, "version 1"));
}

TEST(GgufHostileTest, Version4) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(4, 0, 0).Take(), kInvalid, "version 4 is not supported"));
}

TEST(GgufHostileTest, BigEndianVersion) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(0x03000000, 0, 0).Take(), kInvalid, "big-endian"));
}

TEST(GgufHostileTest, KvCountTooLargeForFile) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, 1000).Zeros(100).Take(), kInvalid, "metadata count 1000"));
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, ~0ull).Take(), kInvalid, "metadata count"));
}

TEST(GgufHostileTest, TensorCountTooLargeForFile) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 1000, 0).Zeros(100).Take(), kInvalid, "tensor count 1000"));
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, ~0ull, 0).Take(), kInvalid, "tensor count"));
}

// --- Metadata -------------------------------------------------------------------

TEST(GgufHostileTest, KeyOverMaxKeyBytes) {
  GgufBytes b;
  b.Header(3, 0, 1).StrWithLength(kGgufMaxKeyBytes + 1, "abc").Zeros(16);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, absl::StrCat("over the limit of ", kGgufMaxKeyBytes)));
}

TEST(GgufHostileTest, KeyLengthPastEndOfFile) {
  GgufBytes b;
  b.Header(3, 0, 1).StrWithLength(100, "abc").Zeros(10);
  EXPECT_TRUE(FailsWith(b.Take(), kOutOfRange, "metadata key 0 of 100 bytes"));
}

TEST(GgufHostileTest, EmptyKey) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, 1).Key("", kTypeU8).U8(1).Take(), kInvalid, "key 0 is empty"));
}

TEST(GgufHostileTest, DuplicateKey) {
  GgufBytes b;
  b.Header(3, 0, 2).KvU32("a.b", 1).KvU32("a.b", 2);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, "duplicate metadata key 'a.b'"));
}

TEST(GgufHostileTest, UnknownValueType) {
  EXPECT_TRUE(FailsWith(OneKv(13).U32(0).Take(), kInvalid, "unknown value type id 13"));
  EXPECT_TRUE(FailsWith(OneKv(0xFFFFFFFF).U32(0).Take(), kInvalid, "unknown value type id 4294967295"));
}

TEST(GgufHostileTest, UnknownArrayElementType) {
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(13, 1).U32(0).Take(), kInvalid, "unknown value type id 13"));
}

TEST(GgufHostileTest, StringValuePastEnd) {
  EXPECT_TRUE(FailsWith(OneKv(kTypeStr).StrWithLength(100, "abc").Take(), kOutOfRange, "runs past the end"));
}

TEST(GgufHostileTest, StringOverMaxStringBytesIsNotAllocated) {
  g_largest_allocation = 0;
  EXPECT_TRUE(FailsWith(OneKv(kTypeStr).StrWithLength(kGgufMaxStringBytes + 1, "abc").Take(), kInvalid,
                        absl::StrCat("over the limit of ", kGgufMaxStringBytes)));
  // At the limit but longer than the file: refused before allocating too.
  EXPECT_TRUE(FailsWith(OneKv(kTypeStr).StrWithLength(kGgufMaxStringBytes, "abc").Take(), kOutOfRange,
                        "runs past the end"));
  EXPECT_LT(g_largest_allocation.load(), 1u << 20);
}

TEST(GgufHostileTest, ArrayCountOverMaxArrayElements) {
  g_largest_allocation = 0;
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(kTypeU8, kGgufMaxArrayElements + 1).Zeros(16).Take(), kInvalid,
                        absl::StrCat("over the limit of ", kGgufMaxArrayElements)));
  EXPECT_LT(g_largest_allocation.load(), 1u << 20);
}

TEST(GgufHostileTest, ArrayCountLargerThanBytesLeft) {
  g_largest_allocation = 0;
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(kTypeU32, 1000).Zeros(8).Take(), kOutOfRange,
                        "needs at least 4000 bytes"));
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(kTypeStr, 1000000).Zeros(8).Take(), kOutOfRange,
                        "needs at least 8000000 bytes"));
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(kTypeArr, 1000000).Zeros(8).Take(), kOutOfRange,
                        "needs at least 12000000 bytes"));
  EXPECT_LT(g_largest_allocation.load(), 1u << 20);
}

TEST(GgufHostileTest, ArraysNestedTooDeep) {
  GgufBytes b = OneKv(kTypeArr);
  for (uint32_t level = 1; level <= kGgufMaxArrayDepth; ++level) b.ArrayHeader(kTypeArr, 1);
  b.ArrayHeader(kTypeU8, 1).U8(7);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, absl::StrCat("nested deeper than ", kGgufMaxArrayDepth)));
}

TEST(GgufHostileTest, BoolByteTwo) {
  EXPECT_TRUE(FailsWith(OneKv(kTypeBool).U8(2).Take(), kInvalid, "bool byte is 2"));
  EXPECT_TRUE(FailsWith(OneKv(kTypeArr).ArrayHeader(kTypeBool, 3).U8(1).U8(2).U8(0).Take(), kInvalid,
                        "[1]: bool byte is 2"));
}

TEST(GgufHostileTest, AlignmentOfTypeU64) {
  GgufBytes b;
  b.Header(3, 0, 1).Key("general.alignment", kTypeU64).U64(32);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, "general.alignment has type u64, must be u32"));
}

TEST(GgufHostileTest, AlignmentZero) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, 1).KvU32("general.alignment", 0).Take(), kInvalid,
                        "general.alignment is 0"));
}

TEST(GgufHostileTest, AlignmentNotPowerOfTwo) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, 1).KvU32("general.alignment", 3).Take(), kInvalid,
                        "general.alignment is 3"));
}

TEST(GgufHostileTest, AlignmentOverMax) {
  EXPECT_TRUE(FailsWith(GgufBytes().Header(3, 0, 1).KvU32("general.alignment", kGgufMaxAlignment * 2).Take(),
                        kInvalid, absl::StrCat("no larger than ", kGgufMaxAlignment)));
}

TEST(GgufHostileTest, CustomAlignmentAppliesToOffsets) {
  GgufBytes ok;
  ok.Header(3, 1, 1).KvU32("general.alignment", 64).TensorInfo("a", {8}, kGgmlF32, 0).PadTo(64).Zeros(32);
  auto file = ParseGgufBytes(ok.Take());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->data_offset() % 64, 0u);
  GgufBytes bad;
  bad.Header(3, 1, 1).KvU32("general.alignment", 64).TensorInfo("a", {8}, kGgmlF32, 32).PadTo(64).Zeros(96);
  EXPECT_TRUE(FailsWith(bad.Take(), kInvalid, "offset 32 is not a multiple of the alignment 64"));
}

// --- Tensor infos ---------------------------------------------------------------

TEST(GgufHostileTest, TensorNameEmpty) {
  EXPECT_TRUE(FailsWith(OneTensor("", {8}, kGgmlF32, 0, 32), kInvalid, "tensor 0 has an empty name"));
}

TEST(GgufHostileTest, TensorNameOverMax) {
  EXPECT_TRUE(FailsWith(OneTensor(std::string(kGgufMaxTensorNameBytes + 1, 'x'), {8}, kGgmlF32, 0, 32), kInvalid,
                        absl::StrCat("tensor 0 name is ", kGgufMaxTensorNameBytes + 1, " bytes long")));
}

TEST(GgufHostileTest, ZeroDims) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfoRaw("a", 0, {}, kGgmlF32, 0).PadTo(32).Zeros(32);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, "'a' has 0 dimensions, must be 1 to 4"));
}

TEST(GgufHostileTest, FiveDims) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {1, 1, 1, 1, 8}, kGgmlF32, 0, 32), kInvalid, "'a' has 5 dimensions"));
}

TEST(GgufHostileTest, ZeroDimension) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {8, 0}, kGgmlF32, 0, 32), kInvalid, "'a' dimension 1 is 0"));
}

TEST(GgufHostileTest, DimensionProductOverflows) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {1ull << 32, 1ull << 32}, kGgmlF32, 0, 32), kInvalid, "overflows"));
  EXPECT_TRUE(FailsWith(OneTensor("a", {1ull << 62, 2}, kGgmlF32, 0, 32), kInvalid, "overflows"));  // > INT64_MAX
  EXPECT_TRUE(FailsWith(OneTensor("a", {~0ull}, kGgmlF32, 0, 32), kInvalid, "dimension 0 is 18446744073709551615"));
}

TEST(GgufHostileTest, ByteCountOverflows) {
  // 2^61 F32 elements fit int64, their 2^63 bytes do not fit in the file.
  EXPECT_TRUE(FailsWith(OneTensor("a", {1ull << 61}, kGgmlF32, 0, 32), kOutOfRange, "truncated: tensor 'a'"));
  // 2^62 elements need 2^64 bytes: the byte count itself overflows.
  EXPECT_TRUE(FailsWith(OneTensor("a", {1ull << 62}, kGgmlF32, 0, 32), kOutOfRange, "overflows"));
}

TEST(GgufHostileTest, UnknownTypeId) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {8}, 99, 0, 32), kInvalid, "unknown ggml tensor type id 99"));
}

TEST(GgufHostileTest, KnownButUnsupportedType) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {32}, kGgmlQ8_1, 0, 64), kInvalid, "Q8_1"));
}

TEST(GgufHostileTest, RowNotWholeBlocks) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {33, 2}, kGgmlQ4_0, 0, 64), kInvalid,
                        "row of 33 elements is not a whole number of Q4_0 blocks"));
}

TEST(GgufHostileTest, OffsetNotAligned) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {8}, kGgmlF32, 4, 64), kInvalid,
                        "'a': offset 4 is not a multiple of the alignment 32"));
}

TEST(GgufHostileTest, TensorDataPastEndOfFile) {
  EXPECT_TRUE(FailsWith(OneTensor("a", {8}, kGgmlF32, 0, 16), kOutOfRange, "truncated: tensor 'a' needs bytes [0, 32)"));
  EXPECT_TRUE(FailsWith(OneTensor("a", {8}, kGgmlF32, 1ull << 63, 32), kOutOfRange, "truncated: tensor 'a'"));
  EXPECT_TRUE(FailsWith(OneTensor("a", {8}, kGgmlF32, ~0ull & ~31ull, 32), kOutOfRange, "truncated: tensor 'a'"));
}

TEST(GgufHostileTest, DataSectionStartsPastEndOfFile) {
  GgufBytes b;
  b.Header(3, 1, 0).TensorInfo("a", {8}, kGgmlF32, 0);  // no padding, no data
  EXPECT_TRUE(FailsWith(b.Take(), kOutOfRange, "data section would start at"));
}

TEST(GgufHostileTest, OverlappingTensors) {
  GgufBytes b;
  b.Header(3, 2, 0).TensorInfo("a", {16}, kGgmlF32, 0).TensorInfo("b", {8}, kGgmlF32, 32).PadTo(32).Zeros(64);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, "tensor 'b' overlaps tensor 'a'"));
}

TEST(GgufHostileTest, DuplicateTensorNames) {
  GgufBytes b;
  b.Header(3, 2, 0).TensorInfo("a", {8}, kGgmlF32, 0).TensorInfo("a", {8}, kGgmlF32, 32).PadTo(32).Zeros(64);
  EXPECT_TRUE(FailsWith(b.Take(), kInvalid, "duplicate tensor name 'a'"));
}

// --- Sweeps over a valid file -------------------------------------------------------

// Whatever Parse accepts must also survive planning and a manifest round trip.
void PlanAndRoundTrip(const GgufFile& file) {
  auto plan = PlanLayerDirectory(file, "mutant.gguf");
  if (!plan.ok()) return;
  auto again = ParseManifest(ManifestToJson(*plan));
  EXPECT_TRUE(again.ok()) << "a manifest PlanLayerDirectory made does not parse: " << again.status();
}

// Short form (CI): every length through the header and the first data
// page, then every 97th; the long form (OCTO_LONG_TESTS) every length.
TEST(GgufHostileTest, EveryTruncationFails) {
  const std::vector<uint8_t> valid = ValidTinyGguf();
  const size_t header_end = ParseGgufBytes(valid)->data_offset() + 4096;
  g_largest_allocation = 0;
  for (size_t len = 0; len < valid.size(); len += len < header_end || ::octo::testing::LongTests() ? 1 : 97) {
    auto file = ParseGgufBytes(std::vector<uint8_t>(valid.begin(), valid.begin() + len));
    ASSERT_FALSE(file.ok()) << "truncated to " << len << " of " << valid.size() << " bytes, it still parses";
    const absl::StatusCode code = file.status().code();
    ASSERT_TRUE(code == kOutOfRange || code == kInvalid) << "at " << len << ": " << file.status();
    ASSERT_FALSE(file.status().message().empty());
  }
  EXPECT_LT(g_largest_allocation.load(), 8u << 20);
}

TEST(GgufHostileTest, EverySingleByteCorruptionOfTheHeaderIsHandled) {
  const std::vector<uint8_t> valid = ValidTinyGguf();
  auto parsed = ParseGgufBytes(valid);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const uint64_t header_end = parsed->data_offset();
  g_largest_allocation = 0;
  const auto start = std::chrono::steady_clock::now();
  int parsed_ok = 0, failed = 0;
  for (uint64_t pos = 0; pos < header_end; ++pos) {
    for (int mutation = 0; mutation < 3; ++mutation) {
      std::vector<uint8_t> bytes = valid;
      const uint8_t before = bytes[pos];
      bytes[pos] = mutation == 0 ? static_cast<uint8_t>(before ^ 0xFF) : mutation == 1 ? 0x00 : 0xFF;
      if (bytes[pos] == before) continue;
      auto file = ParseGgufBytes(std::move(bytes));
      if (file.ok()) {
        ++parsed_ok;
        PlanAndRoundTrip(*file);
      } else {
        ++failed;
        ASSERT_FALSE(file.status().message().empty()) << "byte " << pos;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("parsed_ok", parsed_ok);
  RecordProperty("failed", failed);
  EXPECT_GT(failed, 0);
  EXPECT_LT(seconds, 120.0) << "a corrupted header made parsing slow";
  EXPECT_LT(g_largest_allocation.load(), 8u << 20);
}

TEST(GgufHostileTest, CorruptTensorDataStillParses) {
  // Tensor bytes are never read at open time; checksums are verify's job.
  std::vector<uint8_t> bytes = ValidTinyGguf();
  bytes[bytes.size() - 1] ^= 0xFF;
  bytes[bytes.size() / 2] ^= 0xFF;
  EXPECT_TRUE(ParseGgufBytes(std::move(bytes)).ok());
}

// --- Large but reasonable -----------------------------------------------------------

TEST(GgufHostileTest, LargeVocabularyParsesFast) {
  constexpr uint64_t kTokens = 262144;  // the largest real vocabularies (gemma)
  GgufBytes b;
  b.Header(3, 0, 2).Key("tokenizer.ggml.tokens", kTypeArr).ArrayHeader(kTypeStr, kTokens);
  for (uint64_t i = 0; i < kTokens; ++i) b.Str(absl::StrCat("tok", i));
  b.Key("tokenizer.ggml.scores", kTypeArr).ArrayHeader(testing::kTypeF32, kTokens).Zeros(kTokens * 4);
  const auto start = std::chrono::steady_clock::now();
  auto file = ParseGgufBytes(b.Take());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufValue* tokens = file->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->strings.size(), kTokens);
  EXPECT_EQ(tokens->strings.back(), absl::StrCat("tok", kTokens - 1));
  EXPECT_LT(seconds, 5.0);  // ~0.05 s in a release build; generous for sanitizers
}

TEST(GgufHostileTest, ArrayAtMaxElementsIsAccepted) {
  auto file = ParseGgufBytes(OneKv(kTypeArr).ArrayHeader(kTypeU8, kGgufMaxArrayElements).Zeros(kGgufMaxArrayElements).Take());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->Find("k")->raw.size(), kGgufMaxArrayElements);
}

}  // namespace
}  // namespace octo
