#include "daemon/http/openai_api.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/grammar/grammar.h"
#include "daemon/grammar/json_grammar.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/tool_fields.h"
#include "storage/bounded_json.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// The output constraint: response_format (text, json_object, json_schema),
// or llama-server's grammar (GBNF, checked here so its errors name the
// field) or json_schema. A schema is converted later, from the body in its
// written order (schema_constraint.h).
absl::Status ReadConstraint(const FieldReader& fields, OpenAiRequest* request) {
  std::string& grammar = request->job.grammar;
  if (const nlohmann::json* format = fields.Find("response_format"); format != nullptr) {
    const nlohmann::json* type = format->is_object() ? FieldReader(*format).Find("type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return fields.Error("response_format", "expected an object with a \"type\": text, json_object or json_schema");
    }
    if (*type == "json_object") {
      grammar = kJsonObjectGrammar;
    } else if (*type == "json_schema") {
      const nlohmann::json* wrapper = FieldReader(*format).Find("json_schema");
      if (wrapper == nullptr || !wrapper->is_object() || !wrapper->contains("schema")) {
        return fields.Error("response_format", "json_schema needs {\"name\": ..., \"schema\": {...}}");
      }
      request->schema_path = {"response_format", "json_schema", "schema"};
      request->schema_field = "response_format";
    } else if (*type != "text") {
      return fields.Unsupported("response_format", absl::StrCat("type ", QuotePrefix(type->get<std::string>()),
                                                                 ": text, json_object and json_schema only"));
    }
  }
  if (const nlohmann::json* schema = fields.Find("json_schema"); schema != nullptr && !schema->is_null()) {
    if (!grammar.empty() || !request->schema_path.empty()) {
      return fields.Error("json_schema", "give one constraint: json_schema, grammar or response_format");
    }
    request->schema_path = {"json_schema"};
    request->schema_field = "json_schema";
  }
  std::string text;
  OCTO_RETURN_IF_ERROR(fields.String("grammar", &text));
  if (!text.empty()) {
    if (!grammar.empty() || !request->schema_path.empty()) {
      return fields.Error("grammar", "give one constraint: grammar, json_schema or response_format");
    }
    if (absl::StatusOr<Grammar> parsed = Grammar::Parse(text); !parsed.ok()) {
      return fields.Error("grammar", parsed.status().message());
    }
    grammar = std::move(text);
  }
  // Constraints octod does not take are refused, never run unconstrained.
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    if (const nlohmann::json* value = fields.Find(key); value != nullptr && !value->is_null()) {
      return fields.Unsupported(key, "vLLM's guided fields are not taken: use json_schema, grammar or response_format");
    }
  }
  return absl::OkStatus();
}

// The fields both endpoints share, over OpenAI's defaults.
absl::Status ReadCommon(const FieldReader& fields, OpenAiRequest* request) {
  OCTO_RETURN_IF_ERROR(fields.Require("model"));
  OCTO_RETURN_IF_ERROR(fields.String("model", &request->model));
  SamplingParams& s = request->job.sampling;
  s.temperature = 1.0;
  s.top_p = 1.0;
  s.top_k = 0;
  s.min_p = 0.0;
  s.repeat_penalty = 1.0;
  OCTO_RETURN_IF_ERROR(fields.Number("temperature", &s.temperature));
  OCTO_RETURN_IF_ERROR(fields.Number("top_p", &s.top_p));
  OCTO_RETURN_IF_ERROR(fields.Number("frequency_penalty", &s.frequency_penalty));
  OCTO_RETURN_IF_ERROR(fields.Number("presence_penalty", &s.presence_penalty));
  OCTO_RETURN_IF_ERROR(fields.Integer("top_k", 0, kMaxJsonInt32, &s.top_k));
  OCTO_RETURN_IF_ERROR(fields.Number("min_p", &s.min_p));
  OCTO_RETURN_IF_ERROR(fields.Number("repeat_penalty", &s.repeat_penalty));
  OCTO_RETURN_IF_ERROR(fields.Integer("repeat_last_n", -1, kMaxJsonInt32, &s.repeat_last_n));
  OCTO_RETURN_IF_ERROR(fields.Strings("stop", &s.stop));
  int64_t seed = -1;
  OCTO_RETURN_IF_ERROR(fields.Integer("seed", int64_t{0}, std::numeric_limits<int64_t>::max(), &seed));
  if (seed >= 0) s.seed = static_cast<uint64_t>(seed);
  OCTO_RETURN_IF_ERROR(fields.Bool("stream", &request->stream));
  if (const nlohmann::json* options = fields.Find("stream_options"); options != nullptr) {
    if (!options->is_object()) return fields.Error("stream_options", "expected an object");
    OCTO_RETURN_IF_ERROR(FieldReader(*options, "stream_options.").Bool("include_usage", &request->include_usage));
  }
  int32_t n = 1;
  OCTO_RETURN_IF_ERROR(fields.Integer("n", 1, kMaxJsonInt32, &n));
  if (n != 1) return fields.Unsupported("n", "one choice per request");
  if (const nlohmann::json* bias = fields.Find("logit_bias"); bias != nullptr && !bias->empty()) {
    return fields.Unsupported("logit_bias", "no logit bias");
  }
  if (const nlohmann::json* value = fields.Find("functions"); value != nullptr && !value->empty()) {
    return fields.Unsupported("functions", "the deprecated functions field is not taken: use tools");
  }
  if (!request->chat) {
    if (const nlohmann::json* value = fields.Find("tools"); value != nullptr && !value->empty()) {
      return fields.Unsupported("tools", "tools are for /v1/chat/completions");
    }
  }
  return ReadConstraint(fields, request);
}

// A message's content: a string, or parts of which only text is accepted.
absl::StatusOr<std::string> MessageContent(const nlohmann::json& message, const std::string& name) {
  const FieldReader fields(message, name + ".");
  const nlohmann::json* content = fields.Find("content");
  if (content == nullptr) return std::string();  // an assistant turn that only called tools
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return fields.Error("content", absl::StrCat("expected a string or an array of parts, got ", JsonTypeName(*content)));
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const nlohmann::json& part = (*content)[i];
    const std::string part_name = absl::StrCat("content[", i, "]");
    const nlohmann::json* type = part.is_object() ? FieldReader(part).Find("type") : nullptr;
    const nlohmann::json* part_text = part.is_object() ? FieldReader(part).Find("text") : nullptr;
    if (type == nullptr || *type != "text" || part_text == nullptr || !part_text->is_string()) {
      return fields.Error(part_name, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    text += part_text->get_ref<const std::string&>();
  }
  return text;
}

absl::Status ReadMessages(const FieldReader& fields, std::vector<ToolChatMessage>* messages) {
  OCTO_RETURN_IF_ERROR(fields.Require("messages"));
  const nlohmann::json& list = *fields.Find("messages");
  if (!list.is_array() || list.empty()) return fields.Error("messages", "expected a non-empty array of messages");
  if (list.size() > kMaxChatMessages) {
    return fields.Error("messages", absl::StrCat(list.size(), " messages; at most ", kMaxChatMessages));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = absl::StrCat("messages[", i, "]");
    if (!list[i].is_object()) return fields.Error(name, "expected an object with role and content");
    ToolChatMessage message;
    const FieldReader message_fields(list[i], name + ".");
    OCTO_RETURN_IF_ERROR(message_fields.Require("role"));
    OCTO_RETURN_IF_ERROR(message_fields.String("role", &message.role));
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name for it
    if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool") {
      return message_fields.Error("role",
                                  absl::StrCat(QuotePrefix(message.role), " is not system, user, assistant or tool"));
    }
    OCTO_ASSIGN_OR_RETURN(message.content, MessageContent(list[i], name));
    if (message.role == "assistant") OCTO_RETURN_IF_ERROR(ReadToolCalls(message_fields, /*openai=*/true, &message.calls));
    if (message.role == "tool") OCTO_RETURN_IF_ERROR(message_fields.String("tool_call_id", &message.tool_call_id));
    messages->push_back(std::move(message));
  }
  return absl::OkStatus();
}

// /v1/completions' prompt: "text", [ids], or a list holding one of those.
absl::Status ReadPrompt(const FieldReader& fields, GenerateJob* job) {
  OCTO_RETURN_IF_ERROR(fields.Require("prompt"));
  const nlohmann::json* prompt = fields.Find("prompt");
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1) return fields.Unsupported("prompt", "one prompt per request");
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    job->prompt = prompt->get<std::string>();
    if (job->prompt.empty()) return fields.Error("prompt", "empty");
    return absl::OkStatus();
  }
  if (!prompt->is_array() || prompt->empty()) {
    return fields.Error("prompt", "expected a string, or an array of token ids");
  }
  return fields.TokenIds("prompt", *prompt, &job->prompt_tokens);
}

std::vector<int> Bytes(const std::string& text) {
  return std::vector<int>(reinterpret_cast<const unsigned char*>(text.data()),
                          reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(const nlohmann::json& body, absl::string_view text) {
  OpenAiRequest request;
  request.chat = true;
  request.job.chat = true;
  const FieldReader fields(body);
  OCTO_RETURN_IF_ERROR(ReadCommon(fields, &request));
  OCTO_RETURN_IF_ERROR(ReadMessages(fields, &request.messages));
  OCTO_RETURN_IF_ERROR(ReadTools(fields, text, /*openai=*/true, &request.tools));
  OCTO_RETURN_IF_ERROR(fields.String("chat_template", &request.job.chat_template));
  SamplingParams& s = request.job.sampling;
  OCTO_RETURN_IF_ERROR(fields.Integer("max_tokens", 0, kMaxJsonInt32, &s.max_tokens));
  OCTO_RETURN_IF_ERROR(fields.Integer("max_completion_tokens", 0, kMaxJsonInt32, &s.max_tokens));
  OCTO_RETURN_IF_ERROR(fields.Bool("logprobs", &request.logprobs));
  OCTO_RETURN_IF_ERROR(fields.Integer("top_logprobs", 0, kMaxTopLogprobs, &s.top_logprobs));
  if (s.top_logprobs > 0 && !request.logprobs) return fields.Error("top_logprobs", "needs logprobs: true");
  return request;
}

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const nlohmann::json& body) {
  OpenAiRequest request;
  const FieldReader fields(body);
  OCTO_RETURN_IF_ERROR(ReadCommon(fields, &request));
  OCTO_RETURN_IF_ERROR(ReadPrompt(fields, &request.job));
  SamplingParams& s = request.job.sampling;
  s.max_tokens = kDefaultCompletionMaxTokens;
  OCTO_RETURN_IF_ERROR(fields.Integer("max_tokens", 0, kMaxJsonInt32, &s.max_tokens));
  int32_t logprobs = -1;
  OCTO_RETURN_IF_ERROR(fields.Integer("logprobs", 0, kMaxCompletionLogprobs, &logprobs));
  request.logprobs = logprobs >= 0;
  s.top_logprobs = std::max(logprobs, 0);
  bool flag = false;
  OCTO_RETURN_IF_ERROR(fields.Bool("echo", &flag));
  if (flag) return fields.Unsupported("echo", "the prompt is not repeated");
  int32_t best_of = 1;
  OCTO_RETURN_IF_ERROR(fields.Integer("best_of", 1, kMaxJsonInt32, &best_of));
  if (best_of != 1) return fields.Unsupported("best_of", "one candidate per request");
  if (const nlohmann::json* suffix = fields.Find("suffix"); suffix != nullptr && *suffix != "") {
    return fields.Unsupported("suffix", "no insertion");
  }
  return request;
}

std::string OpenAiFinishReason(const std::string& core_reason) {
  return core_reason == "context" ? "length" : core_reason;
}

nlohmann::json OpenAiUsage(const JobStats& stats) {
  return {{"prompt_tokens", stats.prompt_tokens},
          {"completion_tokens", stats.generated_tokens},
          {"total_tokens", stats.prompt_tokens + stats.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", stats.cached_tokens}}},
          // OpenAI's counts for predicted tokens: here a draft model's
          // proposals the model kept and turned down (0 without a draft).
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", stats.draft_accepted},
            {"rejected_prediction_tokens", stats.draft_proposed - stats.draft_accepted}}}};
}

nlohmann::json ChatLogprobEntry(const GeneratedToken& token) {
  nlohmann::json top = nlohmann::json::array();
  for (const TokenLogprob& alternative : token.top) {
    top.push_back({{"token", alternative.text}, {"logprob", alternative.logprob}, {"bytes", Bytes(alternative.text)}});
  }
  return {{"token", token.text}, {"logprob", token.logprob}, {"bytes", Bytes(token.text)}, {"top_logprobs", top}};
}

nlohmann::json CompletionLogprobs(const std::vector<GeneratedToken>& tokens, size_t offset) {
  nlohmann::json result = {{"tokens", nlohmann::json::array()},
                           {"token_logprobs", nlohmann::json::array()},
                           {"top_logprobs", nlohmann::json::array()},
                           {"text_offset", nlohmann::json::array()}};
  for (const GeneratedToken& token : tokens) {
    result["tokens"].push_back(token.text);
    result["token_logprobs"].push_back(token.logprob);
    nlohmann::json top = nlohmann::json::object();
    for (const TokenLogprob& alternative : token.top) top[alternative.text] = alternative.logprob;
    result["top_logprobs"].push_back(top);
    result["text_offset"].push_back(offset);
    offset += token.text.size();
  }
  return result;
}

nlohmann::json OpenAiModel(const ModelSummary& model, int64_t created) {
  return {{"id", model.path}, {"object", "model"}, {"created", created}, {"owned_by", "octo"}};
}

}  // namespace octo
