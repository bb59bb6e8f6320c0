#include "daemon/http/llama_server_routes.h"

#include <string>
#include <vector>

#include "daemon/http/json_fields.h"

namespace octo {
namespace {

void ServeTokenize(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::string content;
  bool add_special = false, parse_special = true, with_pieces = false;
  absl::Status read = fields.Require("content");
  if (read.ok()) read = fields.String("content", &content);
  if (read.ok()) read = fields.Bool("add_special", &add_special);
  if (read.ok()) read = fields.Bool("parse_special", &parse_special);
  if (read.ok()) read = fields.Bool("with_pieces", &with_pieces);
  if (!read.ok()) return exchange.ReplyError(read);
  std::vector<std::string> pieces;
  absl::StatusOr<std::vector<int32_t>> tokens =
      runtime.Tokenize(content, add_special, parse_special, with_pieces ? &pieces : nullptr);
  if (!tokens.ok()) return exchange.ReplyError(tokens.status());
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < tokens->size(); ++i) {
    if (with_pieces) {
      list.push_back({{"id", (*tokens)[i]}, {"piece", pieces[i]}});
    } else {
      list.push_back((*tokens)[i]);
    }
  }
  exchange.ReplyJson(200, {{"tokens", list}});
}

void ServeDetokenize(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::vector<int32_t> ids;
  absl::Status read = fields.Require("tokens");
  if (read.ok()) read = fields.TokenIds("tokens", &ids);
  if (!read.ok()) return exchange.ReplyError(read);
  absl::StatusOr<std::string> text = runtime.Detokenize(ids);
  if (!text.ok()) return exchange.ReplyError(text.status());
  exchange.ReplyJson(200, {{"content", *text}});
}

}  // namespace

void AddLlamaServerRoutes(HttpRouter& router, Runtime& runtime) {
  router.Add("GET", "/health", [&runtime](const HttpRequest&, HttpExchange& exchange) {
    const RuntimeReport report = runtime.Report();
    if (!report.serving) return exchange.ReplyJson(503, {{"status", "shutting down"}});
    exchange.ReplyJson(200, {{"status", "ok"},
                             {"model", report.model.has_value() ? nlohmann::json(report.model->path) : nullptr}});
  });
  router.Add("POST", "/tokenize", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeTokenize(runtime, request, exchange);
  });
  router.Add("POST", "/detokenize", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeDetokenize(runtime, request, exchange);
  });
}

}  // namespace octo
