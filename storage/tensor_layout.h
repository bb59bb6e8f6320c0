// Which tensors a model must have, with which shapes, and which file of the
// layer directory each one goes to. Used when decomposing a GGUF and again
// when loading a manifest, so both refuse the same defects.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/format.h"
#include "storage/model_config.h"

namespace octo {

struct FileSlot {
  FileKind kind = FileKind::kLayer;
  uint32_t layer = kNoLayer;  // for kLayer
};

// token_embd.weight → embed, output.weight → lm_head, output_norm.weight →
// final_norm, blk.N.* → layer N (INVALID_ARGUMENT if N >= n_layers or
// malformed), anything else → extra.
absl::StatusOr<FileSlot> FileForTensor(absl::string_view name, uint32_t n_layers);

// Returns the shape (ggml order) of the tensor called `name`, or nullptr.
using ShapeLookup = std::function<const std::vector<uint64_t>*(absl::string_view name)>;

// Checks every required tensor is present with the shape `config` implies,
// and every optional one present (biases, q/k norms) has the right shape.
// INVALID_ARGUMENT naming the tensor, the shape found and the one expected.
absl::Status CheckModelTensors(const ModelConfig& config, const ShapeLookup& lookup);

}  // namespace octo
