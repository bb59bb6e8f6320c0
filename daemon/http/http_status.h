// How an absl::Status becomes an HTTP response: the status code (written
// once, in HttpCodeFor) and the error body, shaped as the caller's API
// expects it:
//
//   OpenAI (paths under /v1/):  {"error": {"message", "type", "param", "code"}}
//   Ollama (everything else):   {"error": "message"}
//
// A request field that was wrong travels with its Status as a payload
// (WithParam), so the OpenAI body can name it in "param".
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace octo {

// The HTTP status for a Status code:
//   INVALID_ARGUMENT, OUT_OF_RANGE 400 · UNAUTHENTICATED 401 · PERMISSION_DENIED 403
//   NOT_FOUND 404 · FAILED_PRECONDITION, ABORTED 409 · RESOURCE_EXHAUSTED 429
//   CANCELLED 499 · UNIMPLEMENTED 501 · UNAVAILABLE 503 · DEADLINE_EXCEEDED 504
//   anything else (DATA_LOSS, INTERNAL, UNKNOWN) 500
int HttpCodeFor(absl::StatusCode code);

// `status` carrying the name of the request field it is about.
absl::Status WithParam(absl::Status status, absl::string_view param);
// The field WithParam attached, or "".
std::string ParamOf(const absl::Status& status);

// Marks a NOT_FOUND as "the model does not exist" (OpenAI's code
// "model_not_found").
absl::Status ModelNotFound(absl::string_view model);

// True for paths whose callers speak OpenAI's error shape (/v1/...).
bool IsOpenAiPath(absl::string_view path);

// The error body for a request to `path`.
nlohmann::json ErrorBody(absl::string_view path, const absl::Status& status);

// json.dump() for the wire: compact, invalid UTF-8 replaced by U+FFFD
// (a token's text is not always valid UTF-8 on its own).
std::string JsonText(const nlohmann::json& value);

// `text` as JsonText puts it on the wire: invalid UTF-8 replaced by U+FFFD.
// Token texts go through this one at a time, so that a whole reply is
// exactly the concatenation of its streamed pieces.
std::string WireText(const std::string& text);

}  // namespace octo
