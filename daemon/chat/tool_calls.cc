#include "daemon/chat/tool_calls.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "daemon/grammar/json_schema.h"
#include "daemon/grammar/think_first.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using ojson = nlohmann::ordered_json;

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kMistralTag = "[TOOL_CALLS]";
constexpr absl::string_view kLlamaPythonTag = "<|python_tag|>";
// The rule the converted call schema's root becomes inside a call grammar.
constexpr absl::string_view kCallRule = "tool-call-object";

std::string Dump(const ojson& value) { return value.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// {"type": "function", "function": {...}}, as the tool lists of the
// formats' own templates show a function.
ojson FunctionJson(const ToolFunction& tool) {
  ojson function = {{"name", tool.name}};
  if (!tool.description.empty()) function["description"] = tool.description;
  function["parameters"] = tool.parameters;
  return {{"type", "function"}, {"function", function}};
}

// The key a format's calls carry their arguments under.
const char* ArgumentsKey(ToolFormat format) { return format == ToolFormat::kLlama3 ? "parameters" : "arguments"; }

ojson CallJson(ToolFormat format, const ToolCall& call) {
  ojson arguments = ojson::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_discarded()) arguments = call.arguments;  // sent back as it came
  return {{"name", call.name}, {ArgumentsKey(format), arguments}};
}

// A call object a model wrote: {"name": ..., "arguments" | "parameters": {...}}
// (arguments may be a JSON object's text, as some models write them).
bool ReadCall(const ojson& value, ToolCall* call) {
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string()) return false;
  const ojson* arguments = nullptr;
  for (const char* key : {"arguments", "parameters"}) {
    if (value.contains(key)) arguments = &value[key];
  }
  ojson object = arguments == nullptr ? ojson::object() : *arguments;
  if (object.is_string()) object = ojson::parse(object.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return false;
  call->name = value["name"].get<std::string>();
  call->arguments = Dump(object);
  return !call->name.empty();
}

bool ReadCalls(const ojson& list, std::vector<ToolCall>* calls) {
  if (!list.is_array() || list.empty()) return false;
  std::vector<ToolCall> read(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    if (!ReadCall(list[i], &read[i])) return false;
  }
  *calls = std::move(read);
  return true;
}

ojson ParseJson(absl::string_view text) {
  return ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// Where `tag` starts in `text`, or where a suffix of `text` that could
// still grow into it does; npos when neither.
size_t TagOrItsStart(absl::string_view text, absl::string_view tag) {
  if (const size_t at = text.find(tag); at != absl::string_view::npos) return at;
  for (size_t keep = std::min(text.size(), tag.size() - 1); keep > 0; --keep) {
    if (absl::StartsWith(tag, text.substr(text.size() - keep))) return text.size() - keep;
  }
  return absl::string_view::npos;
}

// A reply that is a call as a whole: held from the start while it is
// blank, and for good when its first character is one of `starts`.
size_t HoldWhole(absl::string_view text, absl::string_view starts) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == absl::string_view::npos) return 0;  // only blanks yet: wait for the first character
  return starts.find(text[first]) != absl::string_view::npos ? 0 : text.size();
}

// Content is the text before the first call as it was written (a stream
// sends it before the call begins) and whatever else is not blank.
ParsedReply ParseHermes(absl::string_view text) {
  ParsedReply reply;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(kHermesOpen, at);
    if (open == absl::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body);
    const size_t end = close == absl::string_view::npos ? text.size() : close + kHermesClose.size();
    if (close == absl::string_view::npos) close = text.size();
    ToolCall call;
    if (!ReadCall(ParseJson(absl::StripAsciiWhitespace(text.substr(body, close - body))), &call)) break;
    const absl::string_view between = text.substr(at, open - at);
    if (reply.calls.empty() || !absl::StripAsciiWhitespace(between).empty()) absl::StrAppend(&reply.content, between);
    reply.calls.push_back(std::move(call));
    at = end;
  }
  const absl::string_view rest = text.substr(at);
  if (reply.calls.empty() || !absl::StripAsciiWhitespace(rest).empty()) absl::StrAppend(&reply.content, rest);
  return reply;
}

ParsedReply ParseLlama3(absl::string_view text) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  absl::ConsumePrefix(&body, kLlamaPythonTag);
  ParsedReply reply;
  ToolCall call;
  const ojson parsed = ParseJson(body);
  if (ReadCall(parsed, &call)) {
    reply.calls.push_back(std::move(call));
  } else if (!ReadCalls(parsed, &reply.calls)) {
    reply.content = std::string(text);
  }
  return reply;
}

ParsedReply ParseMistral(absl::string_view text) {
  ParsedReply reply;
  size_t tag = text.find(kMistralTag);
  absl::string_view before = tag == absl::string_view::npos ? absl::string_view() : text.substr(0, tag);
  absl::string_view body = tag == absl::string_view::npos ? text : text.substr(tag + kMistralTag.size());
  body = absl::StripAsciiWhitespace(body);
  if (!ReadCalls(ParseJson(body), &reply.calls)) {
    reply.content = std::string(text);
    return reply;
  }
  reply.content = std::string(before);
  return reply;
}

ParsedReply ParseGeneric(absl::string_view text) {
  ParsedReply reply;
  const ojson parsed = ParseJson(absl::StripAsciiWhitespace(text));
  bool read = false;
  if (parsed.is_object() && parsed.contains("tool_calls")) {
    read = ReadCalls(parsed["tool_calls"], &reply.calls);
  } else if (parsed.is_object() && parsed.contains("tool_call")) {
    reply.calls.resize(1);
    read = ReadCall(parsed["tool_call"], &reply.calls[0]);
  }
  if (!read) {
    reply.calls.clear();
    reply.content = std::string(text);
  }
  return reply;
}

// Rewrites every "$ref" under `schema` from the parameters schema's own
// root to the combined schema's "#/$defs/<prefix>..." names.
void RewriteRefs(ojson& schema, const std::string& prefix) {
  if (schema.is_array()) {
    for (ojson& item : schema) RewriteRefs(item, prefix);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string()) {
      std::string target = value.get<std::string>();
      if (target == "#") {
        value = absl::StrCat("#/$defs/", prefix, "root");
        continue;
      }
      for (const char* section : {"#/$defs/", "#/definitions/"}) {
        if (absl::StartsWith(target, section)) {
          value = absl::StrCat("#/$defs/", prefix, target.substr(std::string(section).size()));
        }
      }
      continue;
    }
    RewriteRefs(value, prefix);
  }
}

// The call object of `tool` as a schema, its definitions moved into `defs`
// under names of its own (tool `index`), so many tools share one schema.
ojson CallSchema(ToolFormat format, const ToolFunction& tool, size_t index, ojson& defs) {
  const std::string prefix = absl::StrCat("tool", index, "-");
  ojson parameters = tool.parameters.is_object() ? tool.parameters : ojson::object();
  for (const char* section : {"$defs", "definitions"}) {
    if (!parameters.contains(section) || !parameters[section].is_object()) continue;
    for (auto& [name, def] : parameters[section].items()) defs[prefix + name] = def;
    parameters.erase(section);
  }
  RewriteRefs(parameters, prefix);
  for (auto& [name, def] : defs.items()) {
    if (absl::StartsWith(name, prefix)) RewriteRefs(def, prefix);
  }
  if (parameters.empty()) parameters = {{"type", "object"}};
  defs[prefix + "root"] = parameters;
  return {{"type", "object"},
          {"properties", {{"name", {{"const", tool.name}}}, {ArgumentsKey(format), parameters}}},
          {"required", {"name", ArgumentsKey(format)}},
          {"additionalProperties", false}};
}

// `converted` (JsonSchemaToGrammar's text, whose first line is its root
// rule) with that root renamed kCallRule, under a new root `root_body`.
std::string WrapCallGrammar(const std::string& converted, absl::string_view root_body) {
  std::string rules = converted;
  rules.replace(0, std::string("root").size(), std::string(kCallRule));
  return absl::StrCat("root ::= ", root_body, "\n", rules);
}

// The format's whole call syntax around one call (`call`), or up to
// kMaxParallelToolCalls of them.
std::string CallSyntax(ToolFormat format, bool parallel) {
  const std::string more = absl::StrCat("{0,", kMaxParallelToolCalls - 1, "}");
  const auto calls = [&](absl::string_view one, absl::string_view separator) {
    return parallel ? absl::StrCat(one, " ( ", separator, " ", one, " )", more) : std::string(one);
  };
  const std::string call(kCallRule);
  switch (format) {
    case ToolFormat::kHermes:
      return calls(absl::StrCat("\"<tool_call>\\n\" ", call, " \"\\n</tool_call>\""), "\"\\n\"");
    case ToolFormat::kLlama3:
      return call;
    case ToolFormat::kMistral:
      return absl::StrCat("\"[\" ", calls(call, "\", \""), " \"]\"");
    case ToolFormat::kGenericJson:
      return absl::StrCat("\"{\\\"tool_calls\\\": [\" ", calls(call, "\", \""), " \"]}\"");
  }
  return call;
}

}  // namespace

absl::string_view ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kGenericJson: return "generic-json";
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kLlama3: return "llama3-json";
    case ToolFormat::kMistral: return "mistral";
  }
  return "?";
}

absl::Status CheckToolName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a function name is 1 to ", kMaxToolNameBytes, " characters"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return absl::InvalidArgumentError("a function name is made of letters, digits, '_' and '-'");
    }
  }
  return absl::OkStatus();
}

std::string ToolListPrompt(ToolFormat format, std::span<const ToolFunction> tools, const ToolChoice& choice) {
  std::vector<std::string> lines;
  for (const ToolFunction& tool : tools) lines.push_back(Dump(FunctionJson(tool)));
  std::string must;
  if (choice.mode == ToolChoice::Mode::kRequired) must = "\n\nAnswer this message with a function call.";
  if (choice.mode == ToolChoice::Mode::kNamed) must = absl::StrCat("\n\nAnswer this message by calling ", choice.name, ".");
  switch (format) {
    case ToolFormat::kHermes:
      return absl::StrCat(
          "# Tools\n\nYou may call one or more of these functions to help with the user's request. "
          "Their signatures are inside <tools></tools>:\n<tools>\n",
          absl::StrJoin(lines, "\n"),
          "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments inside "
          "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}\n</tool_call>",
          must);
    case ToolFormat::kLlama3:
      return absl::StrCat(
          "You can call the functions below. To call one, reply with only a JSON object of the form "
          "{\"name\": function name, \"parameters\": object of argument names and values}, and no variables.\n\n",
          absl::StrJoin(lines, "\n\n"), must);
    case ToolFormat::kMistral:
      return absl::StrCat("[AVAILABLE_TOOLS] [", absl::StrJoin(lines, ", "), "][/AVAILABLE_TOOLS]", must);
    case ToolFormat::kGenericJson:
      return absl::StrCat(
          "You can call these tools:\n", absl::StrJoin(lines, "\n"),
          "\n\nTo call tools, reply with only a JSON object: {\"tool_calls\": [{\"name\": \"<tool name>\", "
          "\"arguments\": {<arguments>}}]}. Otherwise reply as usual.",
          must);
  }
  return std::string();
}

std::string RenderToolCalls(ToolFormat format, std::span<const ToolCall> calls) {
  if (calls.empty()) return std::string();
  std::vector<std::string> each;
  for (const ToolCall& call : calls) each.push_back(Dump(CallJson(format, call)));
  switch (format) {
    case ToolFormat::kHermes: {
      std::vector<std::string> blocks;
      for (const std::string& call : each) blocks.push_back(absl::StrCat(kHermesOpen, "\n", call, "\n", kHermesClose));
      return absl::StrJoin(blocks, "\n");
    }
    case ToolFormat::kLlama3:
      return absl::StrJoin(each, "; ");
    case ToolFormat::kMistral:
      return absl::StrCat(kMistralTag, " [", absl::StrJoin(each, ", "), "]");
    case ToolFormat::kGenericJson:
      return absl::StrCat("{\"tool_calls\": [", absl::StrJoin(each, ", "), "]}");
  }
  return std::string();
}

std::string ToolResultContent(ToolFormat format, absl::string_view name, absl::string_view content) {
  if (format != ToolFormat::kGenericJson) return std::string(content);
  return absl::StrCat("The tool ", name.empty() ? "call" : name, " returned: ", content);
}

absl::StatusOr<std::string> ToolCallGrammar(ToolFormat format, std::span<const ToolFunction> tools,
                                            const ToolChoice& choice) {
  ojson defs = ojson::object();
  ojson alternatives = ojson::array();
  std::vector<size_t> used;  // the tools' indices
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.mode == ToolChoice::Mode::kNamed && tools[i].name != choice.name) continue;
    alternatives.push_back(CallSchema(format, tools[i], i, defs));
    used.push_back(i);
  }
  if (alternatives.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tool_choice: no tool is named \"", choice.name.substr(0, 64), "\""));
  }
  ojson schema = alternatives.size() == 1 ? alternatives[0] : ojson{{"anyOf", alternatives}};
  schema["$defs"] = defs;
  const absl::StatusOr<std::string> converted = JsonSchemaToGrammar(schema);
  if (!converted.ok()) {
    // Which function's schema: each on its own, so the error names its tool.
    for (const size_t i : used) {
      ojson own_defs = ojson::object();
      ojson alone = CallSchema(format, tools[i], i, own_defs);
      alone["$defs"] = own_defs;
      if (absl::StatusOr<std::string> one = JsonSchemaToGrammar(alone); !one.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("tools[", i, "].function.parameters: ", one.status().message()));
      }
    }
    return converted.status();
  }
  const bool parallel = choice.parallel && format != ToolFormat::kLlama3;
  return WrapCallGrammar(*converted, CallSyntax(format, parallel));
}

std::string LazyToolCallGrammar(ToolFormat format, std::span<const ToolFunction> tools, const ToolChoice& choice) {
  if (format != ToolFormat::kHermes || tools.empty()) return std::string();
  const absl::StatusOr<std::string> whole =
      ToolCallGrammar(format, tools, {ToolChoice::Mode::kRequired, "", choice.parallel});
  if (!whole.ok()) return std::string();  // a schema the grammar cannot hold: the calls are parsed unheld
  // The required grammar's rules, its root replaced: free text until the
  // tag, then the call (and more, when parallel).
  const std::string rules = whole->substr(whole->find('\n') + 1);
  const std::string block = absl::StrCat("[ \\t\\n]{0,4} ", kCallRule, " [ \\t\\n]{0,4} \"", kHermesClose, "\"");
  const std::string more =
      choice.parallel ? absl::StrCat("( [ \\t\\n]{0,4} \"", kHermesOpen, "\" ", block, " ){0,", kMaxParallelToolCalls - 1, "} ")
                      : std::string();
  return absl::StrCat("root ::= text-0\n",
                      TextUntilRules(kHermesOpen, "text", absl::StrCat(block, " ", more, "[ \\t\\n]{0,4}"), true),
                      rules);
}

ParsedReply ParseToolCalls(ToolFormat format, absl::string_view text) {
  switch (format) {
    case ToolFormat::kHermes: return ParseHermes(text);
    case ToolFormat::kLlama3: return ParseLlama3(text);
    case ToolFormat::kMistral: return ParseMistral(text);
    case ToolFormat::kGenericJson: return ParseGeneric(text);
  }
  return {std::string(text), {}};
}

size_t ToolCallHold(ToolFormat format, absl::string_view text) {
  switch (format) {
    case ToolFormat::kHermes: {
      const size_t at = TagOrItsStart(text, kHermesOpen);
      return at == absl::string_view::npos ? text.size() : at;
    }
    case ToolFormat::kLlama3:
      return HoldWhole(text, "{<");
    case ToolFormat::kMistral: {
      const size_t at = TagOrItsStart(text, kMistralTag);
      return std::min(at == absl::string_view::npos ? text.size() : at, HoldWhole(text, "["));
    }
    case ToolFormat::kGenericJson:
      return HoldWhole(text, "{");
  }
  return text.size();
}

}  // namespace octo
