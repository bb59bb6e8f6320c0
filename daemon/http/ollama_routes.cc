#include "daemon/http/ollama_routes.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "daemon/chat/reply_splitter.h"
#include "daemon/http/http_status.h"
#include "daemon/http/job_events.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/model_select.h"
#include "daemon/http/ollama_api.h"
#include "daemon/http/ollama_manage.h"
#include "daemon/http/schema_constraint.h"
#include "daemon/http/tool_fields.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Turns a job's events into Ollama's reply: one JSON object, or NDJSON
// lines. For /api/generate the text is "response" (a thinking model's
// thought "thinking"); for /api/chat it is "message": {"role": "assistant",
// "content", "thinking", "tool_calls"} (reply_splitter.h splits them).
class OllamaWriter {
 public:
  OllamaWriter(const OllamaRequest& request, bool chat, HttpExchange& exchange, const HttpRequest& http_request,
               double load_seconds, std::vector<int32_t> prompt_tokens, bool thinks, std::optional<ToolFormat> tools)
      : request_(request),
        chat_(chat),
        exchange_(exchange),
        received_(http_request.received),
        load_seconds_(load_seconds),
        context_(std::move(prompt_tokens)),
        splitter_(thinks, tools) {}

  bool On(const JobEvent& event) {
    switch (event.kind) {
      case JobEvent::Kind::kStarted:
        return !request_.stream || exchange_.StartStream("application/x-ndjson");
      case JobEvent::Kind::kToken: {
        context_.push_back(event.token.id);
        const ReplySplitter::Delta delta = splitter_.Add(WireText(event.token.text));
        if (!request_.stream) {
          Append(delta);
          return true;
        }
        if (delta.content.empty() && delta.reasoning.empty()) return true;  // held back
        return SendLine(Reply(delta, {}, false));
      }
      case JobEvent::Kind::kDone:
        OnDone(event);
        return true;
    }
    return true;
  }

 private:
  void OnDone(const JobEvent& event) {
    if (request_.stream && !exchange_.responded() && event.status.ok()) exchange_.StartStream("application/x-ndjson");
    if (!event.status.ok()) {
      if (!exchange_.responded()) return exchange_.ReplyError(event.status);
      SendLine({{"error", std::string(event.status.message())}});
      exchange_.EndStream();
      return;
    }
    ReplySplitter::Delta rest = splitter_.Add(WireText(event.tail));
    ReplySplitter::Final final = splitter_.Finish();
    rest.reasoning += final.rest.reasoning;
    rest.content += final.rest.content;
    if (!request_.stream) {
      Append(rest);
      rest = whole_;
    } else if (!final.calls.empty()) {
      // The calls in a line of their own before the last, as Ollama streams them.
      SendLine(Reply(rest, final.calls, false));
      rest = {};
    }
    nlohmann::json last = Reply(rest, request_.stream ? std::vector<ToolCall>() : final.calls, true);
    last["done_reason"] = event.finish_reason == "context" ? "length" : event.finish_reason;
    if (!chat_) last["context"] = context_;
    last.update(OllamaDoneStats(event.stats, SecondsSince(received_), load_seconds_));
    if (!request_.stream) return exchange_.ReplyJson(200, last);
    SendLine(last);
    exchange_.EndStream();
  }

  void Append(const ReplySplitter::Delta& delta) {
    whole_.reasoning += delta.reasoning;
    whole_.content += delta.content;
  }

  nlohmann::json Reply(const ReplySplitter::Delta& delta, const std::vector<ToolCall>& calls, bool done) const {
    nlohmann::json reply = {{"model", request_.model}, {"created_at", OllamaTimestamp()}};
    if (chat_) {
      nlohmann::json message = {{"role", "assistant"}, {"content", delta.content}};
      if (!delta.reasoning.empty()) message["thinking"] = delta.reasoning;
      if (!calls.empty()) message["tool_calls"] = OllamaToolCalls(calls);
      reply["message"] = std::move(message);
    } else {
      reply["response"] = delta.content;
      if (!delta.reasoning.empty()) reply["thinking"] = delta.reasoning;
    }
    reply["done"] = done;
    return reply;
  }

  bool SendLine(const nlohmann::json& line) { return exchange_.Send(JsonText(line) + "\n"); }

  const OllamaRequest& request_;
  const bool chat_;
  HttpExchange& exchange_;
  const std::chrono::steady_clock::time_point received_;
  const double load_seconds_;
  std::vector<int32_t> context_;  // prompt tokens, then each generated token
  ReplySplitter splitter_;
  ReplySplitter::Delta whole_;    // the whole reply, when not streamed
};

// The core job for a request: its prompt as tokens (so /api/generate can
// return them as context), sampled as asked.
absl::StatusOr<GenerateJob> OllamaJob(Runtime& runtime, const OllamaRequest& request, bool chat,
                                      const ModelSummary& model) {
  GenerateJob job;
  job.model = model.path;
  job.keep_alive = request.keep_alive;
  job.origin = chat ? "POST /api/chat" : "POST /api/generate";
  job.sampling = request.sampling;
  job.chat_template = request.chat_template;
  job.grammar = request.grammar;
  job.context_length = request.num_ctx;
  // num_keep -1 keeps the whole prompt: one too long is refused then.
  if (request.num_keep >= 0) job.truncate_keep = request.num_keep;
  if (chat) {
    job.chat = true;
    OCTO_RETURN_IF_ERROR(
        PrepareToolChat(request.tools, request.messages, ToolFormatFor(model, request.chat_template), &job));
  } else if (!request.raw && (!model.chat_template.empty() || !job.chat_template.empty())) {
    // Not raw: system and prompt as a chat, as Ollama does. The core's
    // summaries always name a family (chatml for a model without a template
    // of its own), so system is not dropped; only a summary naming none and
    // no `template` leave the prompt plain.
    job.chat = true;
    job.add_bos = request.context.empty();  // a continuation has its BOS at the start of the context
    if (!request.system.empty()) job.messages.push_back({"system", request.system});
    job.messages.push_back({"user", request.prompt});
  } else {
    job.prompt = request.prompt;
    job.add_bos = request.context.empty();
  }
  if (!job.prompt.empty() || !job.messages.empty()) {
    absl::StatusOr<std::vector<int32_t>> tokens = runtime.PromptTokens(job);
    if (!tokens.ok()) return tokens.status();
    job.prompt_tokens = request.context;
    job.prompt_tokens.insert(job.prompt_tokens.end(), tokens->begin(), tokens->end());
  } else {
    job.prompt_tokens = request.context;  // continue an earlier reply with no new text
  }
  job.prompt.clear();
  job.messages.clear();
  job.chat = false;
  return job;
}

// A request with nothing to generate: Ollama's way to load or unload a
// model. keep_alive 0 unloads it as soon as nothing holds it (at once when
// idle; sessions and running requests keep it until they end).
void LoadOnly(Runtime& runtime, const OllamaRequest& request, bool chat, HttpExchange& exchange) {
  if (request.keep_alive.has_value()) {
    if (absl::Status kept = runtime.SetKeepAlive(ModelPathOf(request.model), *request.keep_alive); !kept.ok()) {
      // Unloading a model that is not loaded: nothing to do.
      if (!(request.unload && absl::IsNotFound(kept))) return exchange.ReplyError(kept);
    }
  }
  nlohmann::json reply = {{"model", request.model}, {"created_at", OllamaTimestamp()}};
  if (chat) {
    reply["message"] = {{"role", "assistant"}, {"content", ""}};
  } else {
    reply["response"] = "";
  }
  reply["done"] = true;
  reply["done_reason"] = request.unload ? "unload" : "load";
  exchange.ReplyJson(200, reply);
}

void ServeGeneration(Runtime& runtime, const HttpRequest& http_request, HttpExchange& exchange, bool chat) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(http_request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  absl::StatusOr<OllamaRequest> request = chat ? ParseOllamaChat(*body, http_request.body) : ParseOllamaGenerate(*body);
  if (!request.ok()) return exchange.ReplyError(request.status());
  const bool nothing_to_generate = chat ? request->messages.empty() : request->prompt.empty() && request->context.empty();
  if (nothing_to_generate && request->unload) {
    if (absl::Status exists = FindModel(runtime, request->model).status(); !exists.ok()) {
      return exchange.ReplyError(exists);
    }
    return LoadOnly(runtime, *request, chat, exchange);
  }
  if (request->format_schema) {
    if (absl::Status schema = SchemaGrammar(http_request.body, {"format"}, "format", &request->grammar); !schema.ok()) {
      return exchange.ReplyError(schema);
    }
  }
  absl::StatusOr<SelectedModel> model = SelectModel(runtime, request->model);
  if (!model.ok()) return exchange.ReplyError(model.status());
  if (nothing_to_generate) return LoadOnly(runtime, *request, chat, exchange);
  absl::StatusOr<GenerateJob> job = OllamaJob(runtime, *request, chat, model->summary);
  if (!job.ok()) return exchange.ReplyError(job.status());
  job->owner = http_request.caller.credential;
  std::optional<ToolFormat> tools;
  if (chat && request->tools.offered()) tools = ToolFormatFor(model->summary, request->chat_template);
  OllamaWriter writer(*request, chat, exchange, http_request, model->load_seconds, job->prompt_tokens,
                      model->summary.thinks, tools);
  const absl::Status submitted =
      RunJob(runtime, *std::move(job), exchange, [&writer](const JobEvent& event) { return writer.On(event); });
  if (!submitted.ok()) exchange.ReplyError(submitted);
}

}  // namespace

void AddOllamaRoutes(HttpRouter& router, Runtime& runtime, std::string version, std::string started_at) {
  router.Add("POST", "/api/generate", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeGeneration(runtime, request, exchange, /*chat=*/false);
  });
  router.Add("POST", "/api/chat", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeGeneration(runtime, request, exchange, /*chat=*/true);
  });
  router.Add("POST", "/api/create", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeCreate(runtime, request, exchange);
  });
  router.Add("POST", "/api/copy", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeCopy(runtime, request, exchange);
  });
  router.Add("DELETE", "/api/delete", [&runtime](const HttpRequest& request, HttpExchange& exchange) {
    ServeDelete(runtime, request, exchange);
  });
  router.Add("POST", "/api/pull", ServePull);
  router.Add("GET", "/api/tags", [&runtime, started_at](const HttpRequest&, HttpExchange& exchange) {
    absl::StatusOr<std::vector<ModelSummary>> models = runtime.ListModels();
    if (!models.ok()) return exchange.ReplyError(models.status());
    nlohmann::json list = nlohmann::json::array();
    for (const ModelSummary& model : *models) list.push_back(OllamaModelEntry(model, started_at));
    exchange.ReplyJson(200, {{"models", list}});
  });
  router.Add("GET", "/api/ps", [&runtime, started_at](const HttpRequest&, HttpExchange& exchange) {
    nlohmann::json list = nlohmann::json::array();
    for (const LoadedModelReport& model : runtime.Report().models) list.push_back(OllamaRunningEntry(model, started_at));
    exchange.ReplyJson(200, {{"models", list}});
  });
  router.Add("POST", "/api/show", [&runtime, started_at](const HttpRequest& request, HttpExchange& exchange) {
    absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
    if (!body.ok()) return exchange.ReplyError(body.status());
    std::string name;
    const FieldReader fields(*body);
    absl::Status read = fields.String("name", &name);  // the older spelling
    if (read.ok()) read = fields.String("model", &name);
    if (!read.ok()) return exchange.ReplyError(read);
    absl::StatusOr<ModelSummary> model = FindModel(runtime, name);
    if (!model.ok()) return exchange.ReplyError(model.status());
    exchange.ReplyJson(200, OllamaShow(*model, started_at));
  });
  router.Add("GET", "/api/version", [version](const HttpRequest&, HttpExchange& exchange) {
    exchange.ReplyJson(200, {{"version", version}});
  });
  router.Add("GET", "/", [](const HttpRequest&, HttpExchange& exchange) {
    exchange.ReplyText(200, "text/plain; charset=utf-8", "Octo is running");
  });
}

}  // namespace octo
