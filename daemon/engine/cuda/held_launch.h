// Helpers of CudaBackend's held launches (cuda_backend.h), shared by its op
// files.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "kernels/cuda/act_q8.h"

namespace octo::held {

using HeldLaunch = absl::AnyInvocable<absl::Status(const cuda::ActQ8Out*)>;

// A consumer's rounding target with the producer's chunk counters: what a
// held producer that rounds across blocks (attention, MatMulGlu) passes its
// launch; null for a plain launch.
inline std::optional<cuda::ActQ8Out> Counted(const cuda::ActQ8Out* q8, uint32_t* arrivals) {
  if (q8 == nullptr) return std::nullopt;
  cuda::ActQ8Out counted = *q8;
  counted.arrivals = arrivals;
  return counted;
}

// A held launch that is `first` then `second`, both plain (ops held together,
// launched as they were called when the op that would fuse them never comes).
inline HeldLaunch InOrder(HeldLaunch first, HeldLaunch second) {
  return [first = std::move(first), second = std::move(second)](const cuda::ActQ8Out*) mutable {
    if (absl::Status s = first(nullptr); !s.ok()) return s;
    return second(nullptr);
  };
}

}  // namespace octo::held
