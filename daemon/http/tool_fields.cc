#include "daemon/http/tool_fields.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "daemon/http/http_status.h"
#include "daemon/http/json_fields.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using ojson = nlohmann::ordered_json;

absl::Status ReadFunction(const nlohmann::json& entry, const std::string& name, ToolFunction* tool) {
  if (!entry.is_object()) return absl::InvalidArgumentError(absl::StrCat(name, ": expected a tool object"));
  const FieldReader fields(entry, name + ".");
  std::string type = "function";
  OCTO_RETURN_IF_ERROR(fields.String("type", &type));
  if (type != "function") return fields.Unsupported("type", "function tools only");
  OCTO_RETURN_IF_ERROR(fields.Require("function"));
  const nlohmann::json& function = *fields.Find("function");
  if (!function.is_object()) return fields.Error("function", "expected an object with a name");
  const FieldReader f(function, name + ".function.");
  OCTO_RETURN_IF_ERROR(f.Require("name"));
  OCTO_RETURN_IF_ERROR(f.String("name", &tool->name));
  if (absl::Status named = CheckToolName(tool->name); !named.ok()) return f.Error("name", named.message());
  OCTO_RETURN_IF_ERROR(f.String("description", &tool->description));
  if (const nlohmann::json* parameters = f.Find("parameters"); parameters != nullptr && !parameters->is_object()) {
    return f.Error("parameters", "expected a JSON Schema object");
  }
  return absl::OkStatus();
}

absl::Status ReadChoice(const FieldReader& fields, ToolFields* out) {
  const nlohmann::json* choice = fields.Find("tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  using Mode = ToolChoice::Mode;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "auto") return absl::OkStatus();
    if (mode == "none") out->choice.mode = Mode::kNone;
    else if (mode == "required") out->choice.mode = Mode::kRequired;
    else return fields.Error("tool_choice", absl::StrCat(QuotePrefix(mode), " is not auto, none or required"));
  } else {
    const nlohmann::json* function = choice->is_object() ? FieldReader(*choice).Find("function") : nullptr;
    const nlohmann::json* name = function != nullptr && function->is_object() ? FieldReader(*function).Find("name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return fields.Error("tool_choice", "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                                         "\"function\": {\"name\": ...}}");
    }
    out->choice.mode = Mode::kNamed;
    out->choice.name = name->get<std::string>();
  }
  if (out->tools.empty() && out->choice.mode != Mode::kNone) return fields.Error("tool_choice", "there are no tools");
  if (out->choice.mode == Mode::kNamed) {
    for (const ToolFunction& tool : out->tools) {
      if (tool.name == out->choice.name) return absl::OkStatus();
    }
    return fields.Error("tool_choice", absl::StrCat("no tool is named ", QuotePrefix(out->choice.name)));
  }
  return absl::OkStatus();
}

std::mt19937_64& Random() {
  thread_local std::mt19937_64 random(std::random_device{}());
  return random;
}

}  // namespace

absl::Status ReadTools(const FieldReader& fields, absl::string_view body, bool openai, ToolFields* out) {
  if (const nlohmann::json* tools = fields.Find("tools"); tools != nullptr) {
    if (!tools->is_array()) return fields.Error("tools", "expected an array of tools");
    if (tools->size() > kMaxTools) return fields.Error("tools", absl::StrCat(tools->size(), " tools; at most ", kMaxTools));
    // The parameters in written order (the body parsed once already, so well
    // formed; without its text, in key order).
    const ojson ordered = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolFunction tool;
      OCTO_RETURN_IF_ERROR(ReadFunction((*tools)[i], fields.Name(absl::StrCat("tools[", i, "]")), &tool));
      for (size_t j = 0; j < i; ++j) {
        if (out->tools[j].name == tool.name) {
          return fields.Error(absl::StrCat("tools[", i, "]"), absl::StrCat("a second tool named ", QuotePrefix(tool.name)));
        }
      }
      const ojson function = ordered.is_object() ? ordered["tools"][i]["function"] : ojson((*tools)[i]["function"]);
      if (function.contains("parameters") && function["parameters"].is_object()) tool.parameters = function["parameters"];
      out->tools.push_back(std::move(tool));
    }
  }
  if (!openai) return absl::OkStatus();
  OCTO_RETURN_IF_ERROR(fields.Bool("parallel_tool_calls", &out->choice.parallel));
  return ReadChoice(fields, out);
}

absl::Status ReadToolCalls(const FieldReader& message, bool openai, std::vector<ToolCall>* calls) {
  const nlohmann::json* list = message.Find("tool_calls");
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return message.Error("tool_calls", "expected an array of calls");
  if (list->size() > kMaxTools) return message.Error("tool_calls", absl::StrCat("at most ", kMaxTools, " calls"));
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string name = absl::StrCat("tool_calls[", i, "]");
    const nlohmann::json& entry = (*list)[i];
    const nlohmann::json* function = entry.is_object() ? FieldReader(entry).Find("function") : nullptr;
    if (function == nullptr || !function->is_object()) return message.Error(name, "expected {\"function\": {\"name\", \"arguments\"}}");
    ToolCall call;
    const FieldReader call_fields(entry, message.Name(name) + ".");
    OCTO_RETURN_IF_ERROR(call_fields.String("id", &call.id));
    const FieldReader f(*function, message.Name(name) + ".function.");
    OCTO_RETURN_IF_ERROR(f.Require("name"));
    OCTO_RETURN_IF_ERROR(f.String("name", &call.name));
    if (absl::Status named = CheckToolName(call.name); !named.ok()) return f.Error("name", named.message());
    const nlohmann::json* arguments = f.Find("arguments");
    if (arguments == nullptr) {
      call.arguments = "{}";
    } else if (arguments->is_string()) {
      call.arguments = arguments->get<std::string>();
    } else if (arguments->is_object() && !openai) {
      call.arguments = JsonText(*arguments);
    } else {
      return f.Error("arguments", openai ? "expected a string of JSON" : "expected an object");
    }
    calls->push_back(std::move(call));
  }
  return absl::OkStatus();
}

absl::Status PrepareToolChat(const ToolFields& tools, std::span<const ToolChatMessage> messages, ToolFormat format,
                             GenerateJob* job) {
  job->messages = ToolChatMessages(format, tools.tools, tools.choice, messages);
  using Mode = ToolChoice::Mode;
  if (!tools.offered()) return absl::OkStatus();
  if (tools.choice.mode == Mode::kAuto) {
    // A call the model starts is held to its schema; a response format or
    // grammar asked beside auto tools holds the whole reply instead.
    if (job->grammar.empty()) job->grammar = LazyToolCallGrammar(format, tools.tools, tools.choice);
    return absl::OkStatus();
  }
  if (!job->grammar.empty()) {
    return WithParam(absl::InvalidArgumentError("tool_choice: a required call cannot also be held to a response "
                                                "format or grammar"),
                     "tool_choice");
  }
  absl::StatusOr<std::string> grammar = ToolCallGrammar(format, tools.tools, tools.choice);
  if (!grammar.ok()) return WithParam(grammar.status(), "tools");
  job->grammar = *std::move(grammar);
  return absl::OkStatus();
}

ToolFormat ToolFormatFor(const ModelSummary& model, const std::string& chat_template) {
  const std::string& name = chat_template.empty() ? model.chat_template : chat_template;
  absl::StatusOr<ChatTemplate> family = ChatTemplate::FromName(name.empty() ? kFallbackChatTemplate : name);
  return family.ok() ? family->tool_format() : ToolFormat::kGenericJson;
}

std::string NewToolCallId() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[Random()() % (sizeof(kAlphabet) - 1)];
  return id;
}

nlohmann::json OpenAiToolCalls(std::span<const ToolCall> calls, bool with_index) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json call = {{"id", calls[i].id},
                           {"type", "function"},
                           {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    list.push_back(std::move(call));
  }
  return list;
}

nlohmann::json OllamaToolCalls(std::span<const ToolCall> calls) {
  nlohmann::json list = nlohmann::json::array();
  for (const ToolCall& call : calls) {
    nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!arguments.is_object()) arguments = nlohmann::json::object();
    list.push_back({{"function", {{"name", call.name}, {"arguments", arguments}}}});
  }
  return list;
}

}  // namespace octo
