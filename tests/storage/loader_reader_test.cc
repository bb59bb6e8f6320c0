// DirectReader: whole files into an aligned buffer with several reads in
// flight, on io_uring and on threads, under injected short, slow, failing
// and refused (O_DIRECT on tmpfs) reads.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/direct_reader.h"
#include "storage/file.h"
#include "storage/xxhash64.h"
#include "tests/storage/loader_test_util.h"
#include "tests/temp_dir.h"

namespace octo {
namespace {

using ::octo::testing::FaultyReadQueue;
using ::octo::testing::ReadFaults;
using ::octo::testing::TempDir;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
AlignedBytes AlignedAlloc(size_t n) { return AlignedBytes(static_cast<uint8_t*>(std::aligned_alloc(4096, n))); }

class DirectReaderTest : public ::testing::Test {
 protected:
  // 37 pages: no chunk size used below divides it evenly.
  static constexpr uint64_t kFileBytes = 37 * 4096;

  void SetUp() override {
    std::mt19937_64 rng(7);
    for (const char* name : {"a.bin", "b.bin"}) {
      std::vector<uint8_t> bytes(kFileBytes);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      ASSERT_TRUE(WriteNewFile(tmp_.Path(name), absl::string_view(reinterpret_cast<char*>(bytes.data()), bytes.size()))
                      .ok());
      contents_[name] = bytes;
    }
    buffer_ = AlignedAlloc(kFileBytes + 4096);
  }

  std::unique_ptr<ReadQueue> Queue(const char* kind, uint32_t depth) {
    if (std::string(kind) == "threads") return MakeThreadReadQueue(depth);
    auto uring = MakeUringReadQueue(depth);
    if (!uring.ok()) return nullptr;
    return std::move(uring).value();
  }

  // Reads `name` and checks bytes and digest.
  void ReadAndCheck(LayerFileReader& reader, const char* name, uint64_t offset_in_buffer = 0) {
    std::span<uint8_t> dest(buffer_.get() + offset_in_buffer, kFileBytes);
    std::memset(dest.data(), 0xEE, dest.size());
    absl::StatusOr<uint64_t> digest = reader.ReadFile(tmp_.Path(name), kFileBytes, dest);
    ASSERT_TRUE(digest.ok()) << digest.status();
    EXPECT_EQ(*digest, Xxh64Hash(contents_[name]));
    EXPECT_TRUE(std::equal(dest.begin(), dest.end(), contents_[name].begin())) << name;
  }

  TempDir tmp_;
  std::map<std::string, std::vector<uint8_t>> contents_;
  AlignedBytes buffer_;
};

TEST_F(DirectReaderTest, ReadsWholeFilesOnEveryQueueDepthAndChunkSize) {
  for (const char* kind : {"io_uring", "threads"}) {
    for (uint32_t depth : {1u, 3u, 16u}) {
      for (uint64_t chunk : {uint64_t{4096}, uint64_t{3 * 4096}, uint64_t{1} << 20}) {
        SCOPED_TRACE(absl::StrCat(kind, " depth ", depth, " chunk ", chunk));
        std::unique_ptr<ReadQueue> queue = Queue(kind, depth);
        if (queue == nullptr) GTEST_SKIP() << "io_uring unavailable here";
        auto reader = DirectReader::Create({.direct_io = true, .queue_depth = depth, .chunk_bytes = chunk},
                                           std::move(queue));
        ASSERT_TRUE(reader.ok()) << reader.status();
        ASSERT_TRUE((*reader)->Probe(tmp_.Path("a.bin")).ok());
        ReadAndCheck(**reader, "a.bin");
        ReadAndCheck(**reader, "b.bin");
        EXPECT_EQ((*reader)->io_mode().rfind(kind, 0), 0u) << (*reader)->io_mode();
      }
    }
  }
}

TEST_F(DirectReaderTest, BufferedModeAndUnalignedBuffersRead) {
  auto buffered = DirectReader::Create({.direct_io = false, .queue_depth = 4, .chunk_bytes = 8192});
  ASSERT_TRUE(buffered.ok());
  ReadAndCheck(**buffered, "a.bin");
  EXPECT_NE((*buffered)->io_mode().find("+buffered"), std::string::npos);
  // O_DIRECT needs an aligned buffer; a misaligned one is read through the cache.
  auto direct = DirectReader::Create({.direct_io = true, .queue_depth = 4, .chunk_bytes = 8192});
  ASSERT_TRUE(direct.ok());
  ReadAndCheck(**direct, "b.bin", /*offset_in_buffer=*/512);
}

TEST_F(DirectReaderTest, ShortReadsAreReadAgain) {
  for (bool pages : {true, false}) {
    SCOPED_TRACE(pages ? "page multiples" : "any byte count");
    ReadFaults faults{.short_reads = true, .page_multiples = pages, .seed = pages ? 3u : 4u};
    auto queue = std::make_unique<FaultyReadQueue>(MakeBestReadQueue(4), faults);
    FaultyReadQueue* faulty = queue.get();
    auto reader = DirectReader::Create({.queue_depth = 4, .chunk_bytes = 4 * 4096}, std::move(queue));
    ASSERT_TRUE(reader.ok());
    ReadAndCheck(**reader, "a.bin");
    ReadAndCheck(**reader, "b.bin");
    EXPECT_GT(faulty->shortened(), 10u);
  }
}

TEST_F(DirectReaderTest, SlowReadsStillArriveWhole) {
  ReadFaults faults{.delay = absl::Milliseconds(3)};
  auto queue = std::make_unique<FaultyReadQueue>(MakeBestReadQueue(2), faults);
  auto reader = DirectReader::Create({.queue_depth = 2, .chunk_bytes = 4 * 4096}, std::move(queue));
  ASSERT_TRUE(reader.ok());
  const auto start = std::chrono::steady_clock::now();
  ReadAndCheck(**reader, "a.bin");
  // 10 chunks, each completion delayed: the delay really applied.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
}

TEST_F(DirectReaderTest, ReadErrorNamesTheFileAndTheReaderCarriesOn) {
  ReadFaults faults{.fail_path = "b.bin", .fail_errno = EIO, .fail_after = 3};
  auto queue = std::make_unique<FaultyReadQueue>(MakeBestReadQueue(4), faults);
  auto reader = DirectReader::Create({.queue_depth = 4, .chunk_bytes = 4096}, std::move(queue));
  ASSERT_TRUE(reader.ok());
  ReadAndCheck(**reader, "a.bin");
  absl::StatusOr<uint64_t> failed = (*reader)->ReadFile(tmp_.Path("b.bin"), kFileBytes, {buffer_.get(), kFileBytes});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find(tmp_.Path("b.bin")), absl::string_view::npos) << failed.status();
  EXPECT_NE(failed.status().message().find("Input/output error"), absl::string_view::npos) << failed.status();
  // Every read of the failed file was reaped: the next file reads cleanly.
  ReadAndCheck(**reader, "a.bin");
}

TEST_F(DirectReaderTest, RefusedDirectReadsFallBackToTheCache) {
  ReadFaults faults{.refuse_direct = true};
  auto queue = std::make_unique<FaultyReadQueue>(MakeBestReadQueue(4), faults);
  auto reader = DirectReader::Create({.direct_io = true, .queue_depth = 4, .chunk_bytes = 8192}, std::move(queue));
  ASSERT_TRUE(reader.ok());
  ReadAndCheck(**reader, "a.bin");
  EXPECT_FALSE((*reader)->direct());
  EXPECT_NE((*reader)->io_mode().find("+buffered"), std::string::npos) << (*reader)->io_mode();
  ReadAndCheck(**reader, "b.bin");
}

TEST_F(DirectReaderTest, MissingAndWrongSizedFilesAreNamed) {
  auto reader = DirectReader::Create({});
  ASSERT_TRUE(reader.ok());
  std::span<uint8_t> dest(buffer_.get(), kFileBytes + 4096);
  absl::StatusOr<uint64_t> missing = (*reader)->ReadFile(tmp_.Path("nope.bin"), 4096, dest);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.bin"), absl::string_view::npos);
  absl::StatusOr<uint64_t> longer = (*reader)->ReadFile(tmp_.Path("a.bin"), kFileBytes + 4096, dest);
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(longer.status().message().find("a.bin is 151552 bytes"), absl::string_view::npos) << longer.status();
  absl::StatusOr<uint64_t> too_big = (*reader)->ReadFile(tmp_.Path("a.bin"), kFileBytes, dest.first(4096));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DirectReaderTest, RefusesBadOptions) {
  EXPECT_EQ(DirectReader::Create({.queue_depth = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DirectReader::Create({.queue_depth = kMaxReadQueueDepth + 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DirectReader::Create({.chunk_bytes = 1000}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace octo
