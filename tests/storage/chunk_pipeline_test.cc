#include "storage/chunk_pipeline.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace octo {
namespace {

ChunkBuffers Buffers(size_t n) { return {std::vector<uint8_t>(n), std::vector<uint8_t>(n)}; }

TEST(ChunkPipelineTest, ConsumesEveryChunkInOrderWithItsOwnBytes) {
  ChunkBuffers buffers = Buffers(16);
  std::vector<size_t> seen;
  absl::Status status = PipelineChunks(
      100, buffers,
      [](size_t k, std::span<uint8_t> buffer) -> absl::StatusOr<std::span<uint8_t>> {
        std::span<uint8_t> data = buffer.first(1 + k % 16);
        for (uint8_t& b : data) b = static_cast<uint8_t>(k);
        return data;
      },
      [&](size_t k, std::span<const uint8_t> data) {
        EXPECT_EQ(data.size(), 1 + k % 16);
        for (uint8_t b : data) EXPECT_EQ(b, static_cast<uint8_t>(k)) << "chunk " << k << " was overwritten";
        seen.push_back(k);
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(seen.size(), 100u);
  for (size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], k);
}

TEST(ChunkPipelineTest, ReadErrorStopsBeforeThatChunkIsConsumed) {
  ChunkBuffers buffers = Buffers(8);
  size_t consumed = 0;
  absl::Status status = PipelineChunks(
      10, buffers,
      [](size_t k, std::span<uint8_t> buffer) -> absl::StatusOr<std::span<uint8_t>> {
        if (k == 4) return absl::DataLossError("bad sector");
        return buffer;
      },
      [&](size_t, std::span<const uint8_t>) {
        ++consumed;
        return absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(consumed, 4u);
}

TEST(ChunkPipelineTest, ConsumerErrorStopsReadingSoon) {
  ChunkBuffers buffers = Buffers(8);
  std::atomic<size_t> reads{0};
  absl::Status status = PipelineChunks(
      1000, buffers,
      [&](size_t, std::span<uint8_t> buffer) -> absl::StatusOr<std::span<uint8_t>> {
        ++reads;
        return buffer;
      },
      [](size_t k, std::span<const uint8_t>) {
        return k == 2 ? absl::CancelledError("stop") : absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_LE(reads.load(), 4u);  // at most one read ahead of the consumer
}

TEST(ChunkPipelineTest, NoChunksIsFine) {
  ChunkBuffers buffers = Buffers(8);
  EXPECT_TRUE(PipelineChunks(0, buffers, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace octo
