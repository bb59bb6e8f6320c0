// A prompt longer than the context it may use: the error every API turns into
// its own (OpenAI: 400 with code "context_length_exceeded"), marked so that
// the HTTP layer can tell it from other bad requests.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace octo {

inline constexpr char kContextExceededPayload[] = "octo/context_exceeded";

// INVALID_ARGUMENT "the prompt has N tokens; the context holds M" and `why`
// (what limits M), marked IsContextExceeded.
inline absl::Status ContextExceededError(int64_t prompt_tokens, int64_t context, absl::string_view why = "") {
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat("the prompt has ", prompt_tokens, " tokens; the context holds ", context, why));
  status.SetPayload(kContextExceededPayload, absl::Cord(absl::StrCat(prompt_tokens, "/", context)));
  return status;
}

inline bool IsContextExceeded(const absl::Status& status) {
  return status.GetPayload(kContextExceededPayload).has_value();
}

}  // namespace octo
