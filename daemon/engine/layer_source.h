// LayerSource: where the forward pass gets each layer's weights from.
//
// The forward pass brackets every layer with Acquire(layer) ... Release(layer).
// Acquire returns views that stay valid until the matching Release: a
// resident layer's views point at memory held for the model's lifetime; a
// streamed layer's point into a staging buffer that is reused once released.
// Implementations: WeightStore (weight_store.h: resident layers plus
// synchronous reads into a staging buffer, in this process); the daemon's
// loader ring plugs in here too.
//
// Threading: one forward pass at a time calls Acquire/Release, from one
// thread. Acquire may block while the layer is read.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/engine/layer_weights.h"

namespace octo {

class LayerSource {
 public:
  virtual ~LayerSource() = default;

  // The weights of `layer`. Errors: DATA_LOSS when the file's bytes do not
  // match its checksum; UNAVAILABLE/NOT_FOUND when it cannot be read; the
  // pass that asked fails with it, nothing else is affected.
  virtual absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) = 0;

  // The forward pass is done with `layer`'s views.
  virtual void Release(uint32_t layer) = 0;
};

}  // namespace octo
