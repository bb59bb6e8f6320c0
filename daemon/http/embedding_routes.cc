#include "daemon/http/embedding_routes.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/model_select.h"
#include "daemon/http/ollama_api.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

struct EmbedRequest {
  EmbedJob job;
  std::string model;    // as the client named it
  bool base64 = false;  // OpenAI encoding_format
};

// OpenAI's `input`: a string, strings, token ids, or lists of token ids.
absl::Status ReadOpenAiInput(const FieldReader& fields, EmbedJob* job) {
  OCTO_RETURN_IF_ERROR(fields.Require("input"));
  const nlohmann::json& input = *fields.Find("input");
  if (input.is_array() && !input.empty() && input[0].is_number()) {
    job->token_inputs.emplace_back();
    return fields.TokenIds("input", &job->token_inputs.back());
  }
  if (input.is_array() && !input.empty() && input[0].is_array()) {
    for (size_t i = 0; i < input.size() && i <= kMaxEmbedInputs; ++i) {
      job->token_inputs.emplace_back();
      OCTO_RETURN_IF_ERROR(fields.TokenIds("input", input[i], &job->token_inputs.back()));
    }
  } else {
    OCTO_RETURN_IF_ERROR(fields.Strings("input", &job->texts));
  }
  return absl::OkStatus();
}

// What both forms of `input` share: the count, no empty input.
absl::Status CheckInputs(const FieldReader& fields, const EmbedRequest& request) {
  constexpr char key[] = "input";
  const size_t n = request.job.texts.size() + request.job.token_inputs.size();
  if (n == 0) return fields.Error(key, "expected at least one input, got an empty array");
  if (n > kMaxEmbedInputs) {
    return fields.Error(key, absl::StrCat("more than ", kMaxEmbedInputs, " inputs; send them in several requests"));
  }
  for (size_t i = 0; i < request.job.texts.size(); ++i) {
    if (request.job.texts[i].empty()) return fields.Error(key, absl::StrCat("item ", i, " is an empty string"));
  }
  for (size_t i = 0; i < request.job.token_inputs.size(); ++i) {
    if (request.job.token_inputs[i].empty()) return fields.Error(key, absl::StrCat("item ", i, " has no tokens"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EmbedRequest> ParseOpenAiEmbeddings(const nlohmann::json& body) {
  const FieldReader fields(body);
  EmbedRequest request;
  OCTO_RETURN_IF_ERROR(fields.Require("model"));
  OCTO_RETURN_IF_ERROR(fields.String("model", &request.model));
  OCTO_RETURN_IF_ERROR(ReadOpenAiInput(fields, &request.job));
  OCTO_RETURN_IF_ERROR(CheckInputs(fields, request));
  std::string format = "float";
  OCTO_RETURN_IF_ERROR(fields.String("encoding_format", &format));
  if (format != "float" && format != "base64") {
    return fields.Error("encoding_format", "expected \"float\" or \"base64\"");
  }
  request.base64 = format == "base64";
  OCTO_RETURN_IF_ERROR(fields.Integer("dimensions", 1, kMaxJsonInt32, &request.job.dimensions));
  return request;
}

// /api/embed (input) and /api/embeddings (prompt).
absl::StatusOr<EmbedRequest> ParseOllamaEmbed(const nlohmann::json& body, bool legacy) {
  const FieldReader fields(body);
  EmbedRequest request;
  OCTO_RETURN_IF_ERROR(fields.Require("model"));
  OCTO_RETURN_IF_ERROR(fields.String("model", &request.model));
  if (legacy) {
    std::string prompt;
    OCTO_RETURN_IF_ERROR(fields.String("prompt", &prompt));
    if (!prompt.empty()) request.job.texts.push_back(std::move(prompt));
  } else {
    OCTO_RETURN_IF_ERROR(fields.Require("input"));
    OCTO_RETURN_IF_ERROR(fields.Strings("input", &request.job.texts));
    OCTO_RETURN_IF_ERROR(CheckInputs(fields, request));
    request.job.truncate = true;
    OCTO_RETURN_IF_ERROR(fields.Bool("truncate", &request.job.truncate));
    OCTO_RETURN_IF_ERROR(fields.Integer("dimensions", 1, kMaxJsonInt32, &request.job.dimensions));
  }
  if (const nlohmann::json* options = fields.Find("options"); options != nullptr) {
    if (!options->is_object()) return fields.Error("options", absl::StrCat("expected an object, got ", JsonTypeName(*options)));
    OCTO_RETURN_IF_ERROR(FieldReader(*options, "options.").Integer("num_ctx", 1, kMaxJsonInt32, &request.job.context_length));
  }
  OCTO_RETURN_IF_ERROR(ReadKeepAlive(fields, &request.job.keep_alive));
  return request;
}

// Little-endian float32 values, base64 (OpenAI's encoding_format "base64").
std::string Base64Floats(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // x86-64 and arm64 are little-endian
  return absl::Base64Escape(bytes);
}

// Runs the request on the model it names; the vectors shaped as asked.
absl::StatusOr<EmbedResult> RunEmbed(Runtime& runtime, const HttpRequest& http_request, HttpExchange& exchange,
                                     EmbedRequest& request, const char* origin, bool normalize, double* load_seconds) {
  OCTO_ASSIGN_OR_RETURN(SelectedModel model, SelectModel(runtime, request.model));
  *load_seconds = model.load_seconds;
  request.job.model = model.summary.path;
  request.job.owner = http_request.caller.credential;
  request.job.origin = origin;
  if (request.job.texts.empty() && request.job.token_inputs.empty()) return EmbedResult{};  // /api/embeddings, no prompt
  request.job.normalize = normalize;
  return runtime.Embed(request.job, [&exchange] { return exchange.ClientGone(); });
}

void ServeOpenAi(Runtime& runtime, const HttpRequest& http_request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(http_request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  absl::StatusOr<EmbedRequest> request = ParseOpenAiEmbeddings(*body);
  if (!request.ok()) return exchange.ReplyError(request.status());
  double load_seconds = 0;
  absl::StatusOr<EmbedResult> result =
      RunEmbed(runtime, http_request, exchange, *request, "POST /v1/embeddings", true, &load_seconds);
  if (!result.ok()) return exchange.ReplyError(result.status());
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < result->embeddings.size(); ++i) {
    const std::vector<float>& v = result->embeddings[i];
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", request->base64 ? nlohmann::json(Base64Floats(v)) : nlohmann::json(v)}});
  }
  exchange.ReplyJson(200, {{"object", "list"},
                           {"data", std::move(data)},
                           {"model", request->model},
                           {"usage", {{"prompt_tokens", result->prompt_tokens}, {"total_tokens", result->prompt_tokens}}}});
}

void ServeOllama(Runtime& runtime, const HttpRequest& http_request, HttpExchange& exchange, bool legacy) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(http_request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  absl::StatusOr<EmbedRequest> request = ParseOllamaEmbed(*body, legacy);
  if (!request.ok()) return exchange.ReplyError(request.status());
  double load_seconds = 0;
  absl::StatusOr<EmbedResult> result = RunEmbed(runtime, http_request, exchange, *request,
                                                legacy ? "POST /api/embeddings" : "POST /api/embed", !legacy, &load_seconds);
  if (!result.ok()) return exchange.ReplyError(result.status());
  if (legacy) {
    exchange.ReplyJson(200, {{"embedding", result->embeddings.empty() ? std::vector<float>{} : result->embeddings[0]}});
    return;
  }
  auto ns = [](double seconds) { return static_cast<int64_t>(seconds * 1e9); };
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  exchange.ReplyJson(200, {{"model", request->model},
                           {"embeddings", result->embeddings},
                           {"total_duration", ns(total)},
                           {"load_duration", ns(load_seconds)},
                           {"prompt_eval_count", result->prompt_tokens}});
}

}  // namespace

void AddEmbeddingRoutes(HttpRouter& router, Runtime& runtime) {
  router.Add("POST", "/v1/embeddings", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeOpenAi(runtime, request, exchange);
  });
  router.Add("POST", "/api/embed", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeOllama(runtime, request, exchange, /*legacy=*/false);
  });
  router.Add("POST", "/api/embeddings", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeOllama(runtime, request, exchange, /*legacy=*/true);
  });
}

}  // namespace octo
