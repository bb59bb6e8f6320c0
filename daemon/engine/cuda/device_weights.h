// The CUDA side of BackendWeights (backend_setup.h): the whole-model
// tensors the pass reads on the device (lm_head, final norm, rope factors)
// and the layers through DeviceLayers.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cuda/cuda_backend.h"

namespace octo {

absl::StatusOr<std::unique_ptr<BackendWeights>> CreateDeviceWeights(CudaBackend& backend, const Manifest& manifest,
                                                                    const std::string& model_dir,
                                                                    const GlobalWeights& host_globals,
                                                                    LayerBytesSource& host_bytes,
                                                                    const LayerPlan& vram);

}  // namespace octo
