// Reading a layer directory's files into memory, checked: the pieces every
// holder of weights shares (WeightStore in one process, the daemon's
// residency manager beside the loader).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/aligned_buffer.h"
#include "daemon/engine/layer_weights.h"
#include "storage/manifest.h"

namespace octo {

// Reads file `file` of directory `dir` whole into `buffer` (grown to fit)
// and checks its size, xxh64 checksum and header page against the manifest.
// DATA_LOSS naming the file on a mismatch; the file's read error otherwise.
absl::Status ReadModelFile(const std::string& dir, const ManifestFile& file, AlignedBuffer& buffer);

// Checks the bytes of `file` already in memory (read by someone else, e.g.
// the loader): checksum and header page. DATA_LOSS naming the file.
absl::Status CheckModelFile(const ManifestFile& file, std::span<const uint8_t> bytes);

// The whole-model tensors (embedding, lm_head, final norm, rope factors;
// an encoder's position and token-type embeddings and input norm),
// read once and held for the model's lifetime.
class ResidentGlobals {
 public:
  static absl::StatusOr<ResidentGlobals> Load(const std::string& dir, const Manifest& manifest);

  const GlobalWeights& weights() const { return weights_; }
  uint64_t bytes() const;  // memory held

 private:
  std::vector<AlignedBuffer> buffers_;  // embed, lm_head, final_norm, extra; the views point here
  GlobalWeights weights_;
};

// Each layer's file size, by layer. INVALID_ARGUMENT when a layer is missing.
absl::StatusOr<std::vector<uint64_t>> LayerFileSizes(const Manifest& manifest);

}  // namespace octo
