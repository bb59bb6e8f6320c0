#include "daemon/http/http_status.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/engine/context_limit.h"
#include "storage/bounded_json.h"
#include "storage/utf8.h"

namespace octo {
namespace {

constexpr char kParamPayload[] = "octo.dev/param";
constexpr char kModelNotFoundPayload[] = "octo.dev/model-not-found";

// OpenAI's error "type" for an HTTP status.
const char* OpenAiErrorType(int http_code) {
  if (http_code == 401) return "authentication_error";
  if (http_code == 403) return "permission_error";
  if (http_code == 429) return "rate_limit_error";
  if (http_code >= 500) return "server_error";
  return "invalid_request_error";
}

}  // namespace

int HttpCodeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

absl::Status WithParam(absl::Status status, absl::string_view param) {
  if (!status.ok() && !status.GetPayload(kParamPayload).has_value()) {
    status.SetPayload(kParamPayload, absl::Cord(param));
  }
  return status;
}

std::string ParamOf(const absl::Status& status) {
  const absl::optional<absl::Cord> param = status.GetPayload(kParamPayload);
  return param.has_value() ? std::string(*param) : std::string();
}

absl::Status ModelNotFound(absl::string_view model) {
  absl::Status status = absl::NotFoundError(absl::StrCat("model ", QuotePrefix(model), " not found"));
  status.SetPayload(kModelNotFoundPayload, absl::Cord("1"));
  return WithParam(status, "model");
}

bool IsOpenAiPath(absl::string_view path) { return absl::StartsWith(path, "/v1/"); }

nlohmann::json ErrorBody(absl::string_view path, const absl::Status& status) {
  const std::string message(status.message());
  if (!IsOpenAiPath(path)) return {{"error", message}};
  const int http_code = HttpCodeFor(status.code());
  nlohmann::json code = nullptr;
  if (status.GetPayload(kModelNotFoundPayload).has_value()) {
    code = "model_not_found";
  } else if (IsContextExceeded(status)) {
    code = "context_length_exceeded";
  } else if (http_code == 401) {
    code = "invalid_api_key";
  }
  const std::string param = ParamOf(status);
  return {{"error",
           {{"message", message},
            {"type", OpenAiErrorType(http_code)},
            {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
            {"code", code}}}};
}

std::string JsonText(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace octo

namespace octo {

std::string WireText(const std::string& text) {
  if (IsValidUtf8(text)) return text;  // nearly every token: no detour through JSON
  return nlohmann::json::parse(JsonText(nlohmann::json(text))).get<std::string>();
}

}  // namespace octo
