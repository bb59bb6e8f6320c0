// The ids octod gives sessions it opens: "s" and 32 lowercase hex digits,
// 128 random bits (RuntimeImpl::NewSessionId). Anything else a client sends
// as a session is a name it chose (octo-gen --session NAME), which never
// looks like one.
#pragma once

#include "absl/strings/string_view.h"

namespace octo {

bool IsGeneratedSessionId(absl::string_view id);

}  // namespace octo
