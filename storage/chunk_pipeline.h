// Read-ahead for streaming a file through memory: chunk k+1 is read on a
// helper thread while chunk k is being processed (hashed, written), so the
// disk is kept busy. Used by decompose and verify.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace octo {

// Two equal buffers: one being filled while the other is processed.
using ChunkBuffers = std::array<std::vector<uint8_t>, 2>;

// Fills `buffer` with chunk k; returns the part of it that holds the chunk.
// Runs on a helper thread, one call at a time, in chunk order.
using ChunkReader = std::function<absl::StatusOr<std::span<uint8_t>>(size_t k, std::span<uint8_t> buffer)>;
// Processes chunk k. Runs on the calling thread, in chunk order.
using ChunkConsumer = std::function<absl::Status(size_t k, std::span<const uint8_t> data)>;

// Reads and consumes chunks 0 .. n_chunks-1. Returns the first error of
// either side; a read in flight is waited for before returning, so the
// buffers are free again when this returns.
absl::Status PipelineChunks(size_t n_chunks, ChunkBuffers& buffers, const ChunkReader& read,
                            const ChunkConsumer& consume);

}  // namespace octo
