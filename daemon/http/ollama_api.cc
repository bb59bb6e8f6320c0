#include "daemon/http/ollama_api.h"

#include <chrono>
#include <ctime>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/grammar/json_grammar.h"
#include "daemon/http/json_fields.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

absl::Status ReadOptions(const FieldReader& fields, OllamaRequest* request) {
  SamplingParams* s = &request->sampling;
  s->temperature = 0.8;
  s->top_k = 40;
  s->top_p = 0.9;
  s->min_p = 0.0;
  s->repeat_penalty = 1.1;
  s->repeat_last_n = 64;
  const nlohmann::json* options = fields.Find("options");
  if (options == nullptr) return absl::OkStatus();
  if (!options->is_object()) return fields.Error("options", "expected an object");
  const FieldReader o(*options, "options.");
  OCTO_RETURN_IF_ERROR(o.Number("temperature", &s->temperature));
  OCTO_RETURN_IF_ERROR(o.Integer("top_k", 0, kMaxJsonInt32, &s->top_k));
  OCTO_RETURN_IF_ERROR(o.Number("top_p", &s->top_p));
  OCTO_RETURN_IF_ERROR(o.Number("min_p", &s->min_p));
  OCTO_RETURN_IF_ERROR(o.Number("repeat_penalty", &s->repeat_penalty));
  OCTO_RETURN_IF_ERROR(o.Integer("repeat_last_n", -1, kMaxJsonInt32, &s->repeat_last_n));
  OCTO_RETURN_IF_ERROR(o.Number("frequency_penalty", &s->frequency_penalty));
  OCTO_RETURN_IF_ERROR(o.Number("presence_penalty", &s->presence_penalty));
  OCTO_RETURN_IF_ERROR(o.Strings("stop", &s->stop));
  int64_t seed = -1;
  OCTO_RETURN_IF_ERROR(o.Integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &seed));
  if (seed >= 0) s->seed = static_cast<uint64_t>(seed);
  OCTO_RETURN_IF_ERROR(o.Integer("num_predict", -2, kMaxJsonInt32, &s->max_tokens));
  OCTO_RETURN_IF_ERROR(o.Integer("num_ctx", 1, kMaxJsonInt32, &request->num_ctx));
  OCTO_RETURN_IF_ERROR(o.Integer("num_keep", -1, kMaxJsonInt32, &request->num_keep));
  if (s->max_tokens == -2) s->max_tokens = -1;  // "fill the context": the core stops there anyway
  return absl::OkStatus();
}

// `template`: a family's name, or a template's text whose family Detect
// recognises (Ollama's Go templates carry the same special tokens as a
// GGUF's Jinja); *family gets the family's name.
absl::Status ReadTemplate(const FieldReader& fields, std::string* family) {
  std::string text;
  OCTO_RETURN_IF_ERROR(fields.String("template", &text));
  if (text.empty()) return absl::OkStatus();  // Ollama's "": the model's own
  if (text.size() > kMaxOllamaTemplateBytes) {
    return fields.Error("template", absl::StrCat(text.size(), " bytes; at most ", kMaxOllamaTemplateBytes));
  }
  absl::StatusOr<ChatTemplate> chat_template = ChatTemplate::FromName(text);
  if (!chat_template.ok()) chat_template = ChatTemplate::Detect(text);
  if (!chat_template.ok()) {
    return fields.Error("template", absl::StrCat(QuotePrefix(text), " is neither a chat template family octod knows ",
                                                 "nor a template whose family it recognises; name one of: ",
                                                 absl::StrJoin(KnownChatTemplateNames(), ", ")));
  }
  *family = std::string(chat_template->name());
  return absl::OkStatus();
}

absl::Status ReadCommon(const FieldReader& fields, OllamaRequest* request) {
  OCTO_RETURN_IF_ERROR(fields.Require("model"));
  OCTO_RETURN_IF_ERROR(fields.String("model", &request->model));
  OCTO_RETURN_IF_ERROR(fields.Bool("stream", &request->stream));
  OCTO_RETURN_IF_ERROR(ReadOptions(fields, request));
  OCTO_RETURN_IF_ERROR(ReadKeepAlive(fields, &request->keep_alive));
  request->unload = request->keep_alive == absl::ZeroDuration();
  OCTO_RETURN_IF_ERROR(ReadTemplate(fields, &request->chat_template));
  if (const nlohmann::json* format = fields.Find("format"); format != nullptr && *format != "" && !format->is_null()) {
    if (format->is_object()) {
      request->format_schema = true;
    } else if (*format == "json") {
      request->grammar = kJsonObjectGrammar;
    } else {
      return fields.Error("format", "expected \"json\" or a JSON Schema object");
    }
  }
  bool think = true;  // a thinking model's thought is reported apart either way
  OCTO_RETURN_IF_ERROR(fields.Bool("think", &think));
  if (const nlohmann::json* images = fields.Find("images"); images != nullptr && !images->empty()) {
    return fields.Unsupported("images", "text models only");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadKeepAlive(const FieldReader& fields, std::optional<absl::Duration>* keep_alive) {
  const nlohmann::json* value = fields.Find("keep_alive");
  if (value == nullptr) return absl::OkStatus();
  absl::Duration duration;
  if (value->is_number()) {
    const double seconds = value->get<double>();  // finite: ParseJsonObject refuses the rest
    duration = seconds < 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
  } else if (value->is_string()) {
    const std::string text = value->get<std::string>();
    if (text.size() > 32 || !absl::ParseDuration(text, &duration)) {
      return fields.Error("keep_alive", "expected a duration such as \"5m\", \"1h30m\", \"0\" or a number of seconds");
    }
    if (duration < absl::ZeroDuration()) duration = absl::InfiniteDuration();
  } else {
    return fields.Error("keep_alive", absl::StrCat("expected a duration, got ", JsonTypeName(*value)));
  }
  *keep_alive = duration;
  return absl::OkStatus();
}

absl::StatusOr<OllamaRequest> ParseOllamaGenerate(const nlohmann::json& body) {
  OllamaRequest request;
  const FieldReader fields(body);
  OCTO_RETURN_IF_ERROR(ReadCommon(fields, &request));
  if (const nlohmann::json* tools = fields.Find("tools"); tools != nullptr && !tools->empty()) {
    return fields.Unsupported("tools", "tools are for /api/chat");
  }
  OCTO_RETURN_IF_ERROR(fields.String("prompt", &request.prompt));
  OCTO_RETURN_IF_ERROR(fields.String("system", &request.system));
  OCTO_RETURN_IF_ERROR(fields.Bool("raw", &request.raw));
  if (request.prompt.size() > kMaxPromptBytes) {
    return fields.Error("prompt", absl::StrCat(request.prompt.size(), " bytes; at most ", kMaxPromptBytes));
  }
  OCTO_RETURN_IF_ERROR(fields.TokenIds("context", &request.context));
  return request;
}

absl::StatusOr<OllamaRequest> ParseOllamaChat(const nlohmann::json& body, absl::string_view text) {
  OllamaRequest request;
  const FieldReader fields(body);
  OCTO_RETURN_IF_ERROR(ReadCommon(fields, &request));
  OCTO_RETURN_IF_ERROR(ReadTools(fields, text, /*openai=*/false, &request.tools));
  const nlohmann::json* messages = fields.Find("messages");
  if (messages == nullptr) return request;  // only loads (or unloads) the model
  if (!messages->is_array()) return fields.Error("messages", "expected an array of messages");
  if (messages->size() > kMaxChatMessages) {
    return fields.Error("messages", absl::StrCat(messages->size(), " messages; at most ", kMaxChatMessages));
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string name = absl::StrCat("messages[", i, "]");
    if (!(*messages)[i].is_object()) return fields.Error(name, "expected an object with role and content");
    const FieldReader m((*messages)[i], name + ".");
    ToolChatMessage message;
    OCTO_RETURN_IF_ERROR(m.Require("role"));
    OCTO_RETURN_IF_ERROR(m.String("role", &message.role));
    OCTO_RETURN_IF_ERROR(m.String("content", &message.content));
    if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool") {
      return m.Error("role", absl::StrCat(QuotePrefix(message.role), " is not system, user, assistant or tool"));
    }
    if (message.role == "assistant") OCTO_RETURN_IF_ERROR(ReadToolCalls(m, /*openai=*/false, &message.calls));
    if (message.role == "tool") OCTO_RETURN_IF_ERROR(m.String("tool_name", &message.tool_name));
    if (const nlohmann::json* images = m.Find("images"); images != nullptr && !images->empty()) {
      return m.Unsupported("images", "text models only");
    }
    request.messages.push_back(std::move(message));
  }
  return request;
}

std::string OllamaTimestamp(double seconds_from_now) {
  const auto now = std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(
                       std::chrono::duration<double>(seconds_from_now));
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() % 1000000000;
  std::tm utc = {};
  gmtime_r(&seconds, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%09dZ", date, nanos);
}

nlohmann::json OllamaDoneStats(const JobStats& stats, double total_seconds, double load_seconds) {
  auto ns = [](double seconds) { return static_cast<int64_t>(seconds * 1e9); };
  return {{"total_duration", ns(total_seconds)},
          {"load_duration", ns(load_seconds)},
          {"prompt_eval_count", stats.prompt_tokens - stats.cached_tokens},
          {"prompt_eval_duration", ns(stats.prefill_seconds)},
          {"eval_count", stats.generated_tokens},
          {"eval_duration", ns(stats.decode_seconds)}};
}

nlohmann::json OllamaDetails(const ModelSummary& model) {
  return {{"parent_model", ""},
          {"format", "octo"},
          {"family", model.architecture},
          {"families", {model.architecture}},
          {"parameter_size", ParameterSizeLabel(model.n_params)},
          {"quantization_level", model.quantization}};
}

nlohmann::json OllamaModelEntry(const ModelSummary& model, const std::string& modified_at) {
  return {{"name", model.path},
          {"model", model.path},
          {"modified_at", modified_at},
          {"size", model.total_bytes},
          {"digest", ""},
          {"details", OllamaDetails(model)}};
}

nlohmann::json OllamaRunningEntry(const LoadedModelReport& model, const std::string& modified_at) {
  nlohmann::json entry = OllamaModelEntry(model.summary, modified_at);
  const ResidencyReport& r = model.residency;
  // What it holds: its layers and whole-model tensors in RAM, and on a
  // device (CUDA) what the VRAM tier holds; Ollama's size counts both.
  const uint64_t vram = r.device.present ? r.device.held_bytes + r.device.global_bytes : 0;
  entry["size"] = r.held_bytes + r.global_bytes + vram;
  entry["size_vram"] = vram;
  // Unloaded at expires_at while idle; "forever" (until room is needed) as a far date.
  entry["expires_at"] = model.expires_in_seconds.has_value() ? OllamaTimestamp(*model.expires_in_seconds)
                                                             : std::string(kOllamaForever);
  entry["context_length"] = model.summary.context_length;
  return entry;
}

nlohmann::json OllamaCapabilities(const ModelSummary& model) {
  // Every decoder generates and embeds (/api/embed); an encoder only embeds.
  if (!model.generates) return nlohmann::json{"embedding"};
  nlohmann::json capabilities = {"completion"};
  if (model.pooling != "rank") capabilities.push_back("embedding");
  if (model.template_tools) capabilities.push_back("tools");
  if (model.thinks) capabilities.push_back("thinking");
  return capabilities;
}

nlohmann::json OllamaShow(const ModelSummary& model, const std::string& modified_at) {
  const std::string& arch = model.architecture;
  nlohmann::json info = {{"general.architecture", arch},
                         {"general.name", model.name},
                         {arch + ".block_count", model.n_layers},
                         {arch + ".embedding_length", model.dim},
                         {arch + ".context_length", model.context_length},
                         {arch + ".vocab_size", model.vocab_size}};
  if (model.n_experts > 0) info[arch + ".expert_count"] = model.n_experts;
  // Its stop tokens as a Modelfile's parameters; its own template text, or
  // the family octod chats in when the GGUF has none.
  std::string parameters;
  for (const std::string& stop : model.stop) {
    absl::StrAppend(&parameters, parameters.empty() ? "" : "\n", "stop \"", absl::CEscape(stop), "\"");
  }
  return {{"license", ""},
          {"modelfile", ""},
          {"parameters", parameters},
          {"template", model.chat_template_text.empty() ? model.chat_template : model.chat_template_text},
          {"details", OllamaDetails(model)},
          {"model_info", info},
          {"capabilities", OllamaCapabilities(model)},
          {"modified_at", modified_at}};
}

}  // namespace octo
