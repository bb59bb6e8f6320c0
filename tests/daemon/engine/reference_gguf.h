// What the independent double-precision passes (hybrid_reference.h,
// encoder_reference.h) read from an F32 GGUF, straight from the file: a
// metadata number, and a tensor as doubles after checking its type and
// shape. Kept apart from the layer directory and the engine they check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/gguf.h"

namespace octo::testing {

// The number under `key` (any integer or float type); INVALID_ARGUMENT when
// it is missing or not a number.
absl::StatusOr<double> ReferenceNumber(const GgufFile& g, const std::string& key);

// Tensor `name` as doubles; INVALID_ARGUMENT when it is missing, not F32 or
// not of exactly `shape` (ggml order).
absl::StatusOr<std::vector<double>> ReferenceTensor(const GgufFile& g, const std::string& name,
                                                    const std::vector<uint64_t>& shape);

}  // namespace octo::testing
