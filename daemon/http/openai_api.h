// OpenAI's completion APIs as octod speaks them: request bodies -> a core
// GenerateJob, and the JSON of responses and stream chunks. Pure functions;
// the routes (openai_routes.h) do the I/O.
//
// Requests (unknown fields are ignored; a known one of the wrong type or
// range is 400 naming it):
//   POST /v1/chat/completions  model, messages[{role, content}] (content a
//     string or text parts; role system, developer, user, assistant (with
//     tool_calls) or tool (with tool_call_id)), max_completion_tokens |
//     max_tokens, stream, stream_options.include_usage, logprobs,
//     top_logprobs (0..20), tools, tool_choice, parallel_tool_calls
//     (tool_fields.h), response_format
//   POST /v1/completions  model, prompt (a string, or token ids, or a list
//     holding one of those), max_tokens (default 16, as OpenAI's), stream,
//     stream_options.include_usage, logprobs (0..5 alternatives)
//   both: temperature, top_p, stop (string or list), seed, frequency_penalty,
//     presence_penalty, n (1 only), and llama.cpp/vLLM's extensions top_k,
//     min_p, repeat_penalty, repeat_last_n, and chat_template (a family
//     name, chat only).
// Unset sampling fields take OpenAI's defaults, not the core's: temperature
// 1, top_p 1, and top_k, min_p and repeat penalties off.
// Refused with 400 rather than ignored, because the answer would not be
// what was asked: n > 1, best_of > 1, echo, suffix, logit_bias, functions
// (the deprecated form of tools), tools on /v1/completions, images in
// messages, and vLLM's guided_* fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/runtime.h"
#include "daemon/http/tool_fields.h"
#include "nlohmann/json.hpp"

namespace octo {

inline constexpr int32_t kMaxCompletionLogprobs = 5;  // OpenAI's limit for /v1/completions
inline constexpr int32_t kDefaultCompletionMaxTokens = 16;

struct OpenAiRequest {
  std::string model;
  GenerateJob job;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  bool logprobs = false;       // report each token's logprob (and job.sampling.top_logprobs alternatives)
  // A JSON Schema constraint, read again in order from the body
  // (schema_constraint.h) into job.grammar: where it is, and the field a
  // 400 names. Empty: none.
  std::vector<std::string> schema_path;
  std::string schema_field;
  // Chat: the messages as sent and the tools offered; the route renders
  // them into job.messages once it knows the model's chat family.
  std::vector<ToolChatMessage> messages;
  ToolFields tools;
};

// `text`: the body's text, for the tools' parameters in written order
// (empty: key order).
absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(const nlohmann::json& body, absl::string_view text = {});
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const nlohmann::json& body);

// OpenAI's finish_reason for the core's ("context" is "length" there).
std::string OpenAiFinishReason(const std::string& core_reason);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json OpenAiUsage(const JobStats& stats);

// Chat logprobs: one entry of choices[].logprobs.content.
nlohmann::json ChatLogprobEntry(const GeneratedToken& token);

// /v1/completions logprobs: {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"} for `tokens`, the first starting at text offset `offset`.
nlohmann::json CompletionLogprobs(const std::vector<GeneratedToken>& tokens, size_t offset);

// An entry of GET /v1/models.
nlohmann::json OpenAiModel(const ModelSummary& model, int64_t created);

}  // namespace octo
