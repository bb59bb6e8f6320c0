// Small Status helpers. Abseil 20220623 ships Status/StatusOr but not the
// RETURN_IF_ERROR / ASSIGN_OR_RETURN macros, so they are written once here.
#pragma once

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OCTO_CONCAT_INNER_(a, b) a##b
#define OCTO_CONCAT_(a, b) OCTO_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define OCTO_RETURN_IF_ERROR(expr)                    \
  do {                                                \
    ::absl::Status octo_status_ = (expr);             \
    if (!octo_status_.ok()) return octo_status_;      \
  } while (false)

// `OCTO_ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value, or
// returns F()'s Status from the enclosing function.
#define OCTO_ASSIGN_OR_RETURN(lhs, expr) \
  OCTO_ASSIGN_OR_RETURN_IMPL_(OCTO_CONCAT_(octo_statusor_, __LINE__), lhs, expr)
#define OCTO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

namespace octo {

// Returns `status` with `context + ": "` put in front of its message, same code.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), std::string(context) + ": " + std::string(status.message()));
}

}  // namespace octo
