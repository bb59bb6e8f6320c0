// Runtime::Create: the runtime with the real loader (octo-loader through
// the shared-memory ring). Tests build RuntimeImpl with other streams.
#include "daemon/core/runtime_impl.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeOptions& options) {
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<RuntimeImpl> runtime, RuntimeImpl::Create(options, &LayerStream::Start));
  return std::unique_ptr<Runtime>(std::move(runtime));
}

}  // namespace octo
