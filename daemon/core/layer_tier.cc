#include "daemon/core/runtime.h"

namespace octo {

const char* LayerTierName(LayerTier tier) {
  switch (tier) {
    case LayerTier::kDevice:
      return "vram";
    case LayerTier::kHost:
      return "host";
    case LayerTier::kDisk:
      return "disk";
  }
  return "unknown";  // not a LayerTier value
}

}  // namespace octo
