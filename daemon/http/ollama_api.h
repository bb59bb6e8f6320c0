// Ollama's API as octod speaks it: request bodies -> what to run, and the
// JSON of its replies. Pure functions; the routes (ollama_routes.h) do the
// I/O.
//
//   POST /api/generate  model, prompt, system, template, raw, context (token
//     ids from an earlier reply), stream (default true), options, keep_alive
//   POST /api/chat      model, messages[{role, content, tool_calls,
//     tool_name}], tools, template, stream, options, keep_alive, think
//   options: temperature, top_k, top_p, min_p, seed (< 0: random),
//     num_predict (-1 and -2: no limit), stop, repeat_penalty,
//     repeat_last_n, frequency_penalty, presence_penalty; others (num_ctx,
//     num_gpu, ...) are ignored, as Ollama ignores what a runner lacks.
// Unset options take Ollama's defaults: temperature 0.8, top_k 40, top_p
// 0.9, min_p 0, repeat_penalty 1.1 over the last 64 tokens.
// format: "json" or a JSON Schema, the reply held to it. Replies carry a
// thinking model's thought apart (message.thinking, or "thinking" beside
// "response") and /api/chat's tool calls in message.tool_calls.
// Refused with 400: images, and tools on /api/generate.
// /api/generate without raw makes the prompt a chat: `system` (if any) and
// the prompt as the user's message, through the model's chat template; raw
// sends the prompt as is and ignores system and template, as Ollama does.
// template: a chat template family octod knows ("chatml", "llama3", ...;
// ChatTemplate::FromName), or a template's text (Ollama's Go template, a
// GGUF's Jinja) whose family ChatTemplate::Detect recognises from its
// special tokens; anything else is refused with 400. Empty: the model's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/chat/chat_template.h"
#include "daemon/core/runtime.h"
#include "daemon/http/tool_fields.h"
#include "nlohmann/json.hpp"

namespace octo {

// The longest `template` accepted, in bytes. Real chat templates, Go or
// Jinja, tool-calling ones included, are a few KiB; this leaves room and
// bounds what FromName and Detect read.
inline constexpr size_t kMaxOllamaTemplateBytes = 64 << 10;

struct OllamaRequest {
  std::string model;
  bool stream = true;
  SamplingParams sampling;
  // options.num_ctx: the context of this request (0: all the model's that
  // the KV budget holds); a longer prompt is cut as Ollama cuts it, keeping
  // its first options.num_keep tokens (Ollama's default 4; -1: refused
  // instead) and the newest.
  int num_ctx = 0;
  int num_keep = 4;
  std::string chat_template;        // from `template`: a family name; empty: the model's
  std::string grammar;              // from `format` "json": the output held to JSON (GenerateJob::grammar)
  bool format_schema = false;       // `format` is a JSON Schema: the route converts it (schema_constraint.h)
  // /api/generate
  std::string prompt;
  std::string system;
  bool raw = false;                 // the prompt as is, no chat template
  std::vector<int32_t> context;     // an earlier exchange's tokens, continued
  // /api/chat: the messages as sent, and the tools offered (rendered into
  // the job once the model's chat family is known: tool_fields.h)
  std::vector<ToolChatMessage> messages;
  ToolFields tools;
  // keep_alive (ReadKeepAlive); 0 ("0", "0s", 0) unloads the model: with
  // nothing to generate, the request only loads (or unloads) the model.
  std::optional<absl::Duration> keep_alive;
  bool unload = false;
};

class FieldReader;
// keep_alive as Ollama takes it: a number of seconds or a Go-style duration
// string ("5m", "1h30m", "300ms", "0"); negative means forever
// (InfiniteDuration). Absent: *keep_alive untouched. Anything else is
// INVALID_ARGUMENT naming keep_alive.
absl::Status ReadKeepAlive(const FieldReader& fields, std::optional<absl::Duration>* keep_alive);

absl::StatusOr<OllamaRequest> ParseOllamaGenerate(const nlohmann::json& body);
// `text`: the body's text, for the tools' parameters in written order.
absl::StatusOr<OllamaRequest> ParseOllamaChat(const nlohmann::json& body, absl::string_view text = {});

// UTC now, or seconds_from_now later, as Ollama writes it:
// "2026-11-21T10:22:45.123456789Z".
std::string OllamaTimestamp(double seconds_from_now = 0);

// The statistics of a done reply: total_duration, load_duration,
// prompt_eval_count/_duration, eval_count/_duration (durations in ns).
nlohmann::json OllamaDoneStats(const JobStats& stats, double total_seconds, double load_seconds);

// {format, family, families, parameter_size, quantization_level} of a model.
nlohmann::json OllamaDetails(const ModelSummary& model);

// An entry of /api/tags (and /api/ps).
nlohmann::json OllamaModelEntry(const ModelSummary& model, const std::string& modified_at);
// A loaded model as /api/ps lists it: what it holds in RAM and VRAM, when
// its keep_alive unloads it.
inline constexpr char kOllamaForever[] = "9999-12-31T23:59:59Z";
nlohmann::json OllamaRunningEntry(const LoadedModelReport& model, const std::string& modified_at);

// What the model can do, as /api/show lists it: "completion"; "embedding"
// unless it is a reranker; "tools" when its chat template takes a tool
// list; "thinking" when it thinks in <think>...</think>.
nlohmann::json OllamaCapabilities(const ModelSummary& model);

// The reply of /api/show.
nlohmann::json OllamaShow(const ModelSummary& model, const std::string& modified_at);

}  // namespace octo
