#include "storage/chunk_pipeline.h"

#include <future>

namespace octo {

absl::Status PipelineChunks(size_t n_chunks, ChunkBuffers& buffers, const ChunkReader& read,
                            const ChunkConsumer& consume) {
  auto start_read = [&](size_t k) {
    return std::async(std::launch::async, [&read, &buffers, k] { return read(k, buffers[k % 2]); });
  };
  // Destroyed before returning on any path: the destructor of a std::async
  // future waits for its read, which uses `buffers`.
  std::future<absl::StatusOr<std::span<uint8_t>>> next;
  if (n_chunks > 0) next = start_read(0);
  for (size_t k = 0; k < n_chunks; ++k) {
    absl::StatusOr<std::span<uint8_t>> data = next.get();
    if (!data.ok()) return data.status();
    if (k + 1 < n_chunks) next = start_read(k + 1);
    absl::Status status = consume(k, *data);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace octo
