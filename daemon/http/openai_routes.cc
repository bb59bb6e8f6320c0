#include "daemon/http/openai_routes.h"

#include <ctime>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/chat/reply_splitter.h"
#include "daemon/http/http_status.h"
#include "daemon/http/job_events.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/model_select.h"
#include "daemon/http/openai_api.h"
#include "daemon/http/schema_constraint.h"
#include "daemon/http/tool_fields.h"

namespace octo {
namespace {

std::string ResponseId(absl::string_view prefix) {
  thread_local std::mt19937_64 random(std::random_device{}());
  return absl::StrFormat("%s-%016x%08x", prefix, random(), static_cast<uint32_t>(random()));
}

// Turns a job's events into one completion: a JSON reply, or a stream of
// server-sent events.
// A chat's reply is split into reasoning_content (a thinking model's
// thought), content and tool_calls as it comes (reply_splitter.h).
class CompletionWriter {
 public:
  CompletionWriter(const OpenAiRequest& request, HttpExchange& exchange, bool thinks, std::optional<ToolFormat> tools)
      : request_(request),
        exchange_(exchange),
        id_(ResponseId(request.chat ? "chatcmpl" : "cmpl")),
        created_(std::time(nullptr)),
        thinks_(thinks),
        tools_(tools),
        splitter_(thinks, tools) {}

  bool On(const JobEvent& event) {
    switch (event.kind) {
      case JobEvent::Kind::kStarted:
        if (!request_.stream) return true;
        if (!exchange_.StartStream("text/event-stream")) return false;
        // Chat streams open with the assistant's role and no text yet.
        return !request_.chat || SendChoice({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
      case JobEvent::Kind::kToken: {
        GeneratedToken token = event.token;
        token.text = WireText(token.text);
        return OnToken(token);
      }
      case JobEvent::Kind::kDone:
        OnDone(event);
        return true;
    }
    return true;
  }

 private:
  bool OnToken(const GeneratedToken& token) {
    const size_t offset = text_.size();
    text_ += token.text;
    if (!request_.stream) {
      tokens_.push_back(token);
      return true;
    }
    nlohmann::json logprobs = nullptr;
    if (request_.logprobs) {
      logprobs = request_.chat ? nlohmann::json{{"content", {ChatLogprobEntry(token)}}}
                               : CompletionLogprobs({token}, offset);
    }
    if (!request_.chat) return SendChoice(nlohmann::json(token.text), logprobs, nullptr);
    const ReplySplitter::Delta delta = splitter_.Add(token.text);
    if (delta.reasoning.empty() && delta.content.empty() && logprobs.is_null()) return true;  // held back
    return SendChoice(ChatDelta(delta), logprobs, nullptr);
  }

  void OnDone(const JobEvent& event) {
    if (request_.stream && !exchange_.responded()) {  // ended before it started
      if (!event.status.ok()) return exchange_.ReplyError(event.status);
      exchange_.StartStream("text/event-stream");
    }
    if (!event.status.ok()) {
      if (!request_.stream) {
        exchange_.ReplyError(event.status);
        return;
      }
      Send(ErrorBody("/v1/", event.status));
      Finish();
      return;
    }
    const std::string tail = WireText(event.tail);
    text_ += tail;
    std::string finish_reason = OpenAiFinishReason(event.finish_reason);
    if (!request_.stream) {
      exchange_.ReplyJson(200, WholeResponse(finish_reason, event.stats));
      return;
    }
    if (!request_.chat) {
      if (!tail.empty()) SendChoice(nlohmann::json(tail), nullptr, nullptr);
      SendChoice(nlohmann::json(""), nullptr, finish_reason);
    } else {
      ReplySplitter::Delta last = splitter_.Add(tail);
      ReplySplitter::Final rest = splitter_.Finish();
      last.reasoning += rest.rest.reasoning;
      last.content += rest.rest.content;
      if (!last.reasoning.empty() || !last.content.empty()) SendChoice(ChatDelta(last), nullptr, nullptr);
      if (!rest.calls.empty()) {
        for (ToolCall& call : rest.calls) call.id = NewToolCallId();
        SendChoice({{"tool_calls", OpenAiToolCalls(rest.calls, /*with_index=*/true)}}, nullptr, nullptr);
        finish_reason = "tool_calls";
      }
      SendChoice(nlohmann::json::object(), nullptr, finish_reason);
    }
    if (request_.include_usage) {
      nlohmann::json chunk = Envelope(true);
      chunk["choices"] = nlohmann::json::array();
      chunk["usage"] = OpenAiUsage(event.stats);
      Send(chunk);
    }
    Finish();
  }

  static nlohmann::json ChatDelta(const ReplySplitter::Delta& delta) {
    nlohmann::json out = nlohmann::json::object();
    if (!delta.reasoning.empty()) out["reasoning_content"] = delta.reasoning;
    if (!delta.content.empty() || delta.reasoning.empty()) out["content"] = delta.content;
    return out;
  }

  nlohmann::json Envelope(bool chunk) const {
    const char* object = request_.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", request_.model}};
  }

  // One stream chunk with one choice. `delta` is the chat delta object, or
  // the completion's text.
  bool SendChoice(const nlohmann::json& delta, const nlohmann::json& logprobs, const nlohmann::json& finish_reason) {
    nlohmann::json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
    choice[request_.chat ? "delta" : "text"] = delta;
    nlohmann::json chunk = Envelope(true);
    chunk["choices"] = {choice};
    if (request_.include_usage) chunk["usage"] = nullptr;  // as OpenAI: null until the last chunk
    return Send(chunk);
  }

  bool Send(const nlohmann::json& chunk) { return exchange_.Send(absl::StrCat("data: ", JsonText(chunk), "\n\n")); }

  void Finish() {
    exchange_.Send("data: [DONE]\n\n");
    exchange_.EndStream();
  }

  nlohmann::json WholeResponse(const std::string& finish_reason, const JobStats& stats) {
    nlohmann::json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
    if (request_.chat) {
      ReplySplitter::Whole reply = ReplySplitter::Split(thinks_, tools_, text_);
      nlohmann::json message = {{"role", "assistant"}, {"content", reply.content}};
      if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
      if (!reply.calls.empty()) {
        for (ToolCall& call : reply.calls) call.id = NewToolCallId();
        if (reply.content.empty()) message["content"] = nullptr;  // as OpenAI: calls only
        message["tool_calls"] = OpenAiToolCalls(reply.calls, /*with_index=*/false);
        choice["finish_reason"] = "tool_calls";
      }
      choice["message"] = std::move(message);
      if (request_.logprobs) {
        nlohmann::json content = nlohmann::json::array();
        for (const GeneratedToken& token : tokens_) content.push_back(ChatLogprobEntry(token));
        choice["logprobs"] = {{"content", content}};
      }
    } else {
      choice["text"] = text_;
      if (request_.logprobs) choice["logprobs"] = CompletionLogprobs(tokens_, 0);
    }
    nlohmann::json response = Envelope(false);
    response["choices"] = {choice};
    response["usage"] = OpenAiUsage(stats);
    return response;
  }

  const OpenAiRequest& request_;
  HttpExchange& exchange_;
  const std::string id_;
  const int64_t created_;
  std::string text_;
  std::vector<GeneratedToken> tokens_;  // kept for the whole (not streamed) reply
  const bool thinks_;
  const std::optional<ToolFormat> tools_;
  ReplySplitter splitter_;  // a stream's
};

void ServeCompletion(Runtime& runtime, const HttpRequest& http_request, HttpExchange& exchange, bool chat) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(http_request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  absl::StatusOr<OpenAiRequest> request =
      chat ? ParseChatCompletionRequest(*body, http_request.body) : ParseCompletionRequest(*body);
  if (!request.ok()) return exchange.ReplyError(request.status());
  if (!request->schema_path.empty()) {
    if (absl::Status schema = SchemaGrammar(http_request.body, request->schema_path, request->schema_field,
                                            &request->job.grammar);
        !schema.ok()) {
      return exchange.ReplyError(schema);
    }
  }
  absl::StatusOr<SelectedModel> model = SelectModel(runtime, request->model);
  if (!model.ok()) return exchange.ReplyError(model.status());
  request->job.model = model->summary.path;
  request->job.owner = http_request.caller.credential;
  request->job.origin = chat ? "POST /v1/chat/completions" : "POST /v1/completions";
  std::optional<ToolFormat> tools;
  if (chat) {
    const ToolFormat format = ToolFormatFor(model->summary, request->job.chat_template);
    if (absl::Status prepared = PrepareToolChat(request->tools, request->messages, format, &request->job);
        !prepared.ok()) {
      return exchange.ReplyError(prepared);
    }
    if (request->tools.offered()) tools = format;
  }
  CompletionWriter writer(*request, exchange, chat && model->summary.thinks, tools);
  const absl::Status submitted =
      RunJob(runtime, std::move(request->job), exchange, [&writer](const JobEvent& event) { return writer.On(event); });
  if (!submitted.ok()) exchange.ReplyError(submitted);
}

}  // namespace

void AddOpenAiRoutes(HttpRouter& router, Runtime& runtime, int64_t created) {
  router.Add("POST", "/v1/chat/completions", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeCompletion(runtime, request, exchange, /*chat=*/true);
  });
  router.Add("POST", "/v1/completions", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeCompletion(runtime, request, exchange, /*chat=*/false);
  });
  router.Add("GET", "/v1/models", [&runtime, created](const HttpRequest&, HttpExchange& exchange) {
    absl::StatusOr<std::vector<ModelSummary>> models = runtime.ListModels();
    if (!models.ok()) return exchange.ReplyError(models.status());
    nlohmann::json data = nlohmann::json::array();
    for (const ModelSummary& model : *models) data.push_back(OpenAiModel(model, created));
    exchange.ReplyJson(200, {{"object", "list"}, {"data", data}});
  });
  router.AddPrefix("GET", "/v1/models/", [&runtime, created](const HttpRequest& request, HttpExchange& exchange) {
    absl::StatusOr<ModelSummary> model = FindModel(runtime, request.path.substr(std::string("/v1/models/").size()));
    if (!model.ok()) return exchange.ReplyError(model.status());
    exchange.ReplyJson(200, OpenAiModel(*model, created));
  });
}

}  // namespace octo
