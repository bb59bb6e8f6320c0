#include "client/gen_command.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/chat_input.h"
#include "client/embed_command.h"
#include "client/error_message.h"
#include "daemon/core/model_name.h"
#include "daemon/core/session_id.h"
#include "daemon/core/speculation_settings.h"
#include "daemon/grammar/json_schema.h"
#include "nlohmann/json.hpp"

namespace octo {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written: "event" first

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json StatsJson(const v1::GenerateStats& stats) {
  return {{"prompt_tokens", stats.prompt_tokens()},
          {"cached_tokens", stats.cached_tokens()},
          {"generated_tokens", stats.generated_tokens()},
          {"prefill_seconds", stats.prefill_seconds()},
          {"decode_seconds", stats.decode_seconds()},
          {"queue_seconds", stats.queue_seconds()},
          {"load_wait_seconds", stats.load_wait_seconds()},
          {"compute_seconds", stats.compute_seconds()},
          {"tokens_per_second", stats.tokens_per_second()},
          {"seed", stats.seed()},
          {"batch_peak", stats.batch_peak()},
          {"target_passes", stats.target_passes()},
          {"draft_model", stats.draft_model()},
          {"draft_proposed", stats.draft_proposed()},
          {"draft_accepted", stats.draft_accepted()}};
}

// Prints one reply's events as they come (text or JSON Lines) and keeps
// what the end of the reply needs.
class ReplyPrinter {
 public:
  ReplyPrinter(const GenFlags& flags, std::FILE* out) : flags_(flags), out_(out) {}

  void operator()(const v1::GenerateResponse& message) {
    if (message.has_token()) {
      const v1::GeneratedToken& token = message.token();
      text_ += token.text();
      if (flags_.json) {
        Json line = {{"event", "token"}, {"id", token.id()}, {"text", token.text()}};
        if (flags_.sampling.logprobs > 0) {
          line["logprob"] = token.logprob();
          line["top"] = Json::array();
          for (const v1::TokenLogprob& top : token.top()) {
            line["top"].push_back({{"id", top.id()}, {"logprob", top.logprob()}});
          }
        }
        Print(line);
      } else {
        std::fputs(token.text().c_str(), out_);
        std::fflush(out_);
        printed_ = true;
      }
    } else if (message.has_started()) {
      if (flags_.json) {
        Print({{"event", "started"},
               {"session_id", message.started().session_id()},
               {"prompt_tokens", message.started().prompt_tokens()}});
      }
    } else if (message.has_done()) {
      done_ = message.done();
      text_ += done_->tail();
      if (flags_.json) {
        Print({{"event", "done"},
               {"finish_reason", done_->finish_reason()},
               {"tail", done_->tail()},
               {"text", text_},
               {"stats", StatsJson(done_->stats())}});
      } else {
        std::fputs(done_->tail().c_str(), out_);
        printed_ = true;
      }
    }
  }

  // Ends the reply's text with a newline (text mode; not when the reply
  // failed before any text, so an error shows on its own).
  void EndReply() {
    if (!flags_.json && (printed_ || done_.has_value())) std::fputs("\n", out_);
    std::fflush(out_);
  }

  const std::optional<v1::GenerateResponse::Done>& done() const { return done_; }

 private:
  void Print(const Json& line) {
    std::fprintf(out_, "%s\n", Dump(line).c_str());
    std::fflush(out_);
  }

  const GenFlags& flags_;
  std::FILE* out_;
  std::string text_;
  bool printed_ = false;
  std::optional<v1::GenerateResponse::Done> done_;
};

void PrintStats(const v1::GenerateResponse::Done& done, std::FILE* err) {
  const v1::GenerateStats& s = done.stats();
  absl::FPrintF(err,
                "prompt %d tokens (%d cached) in %.3f s; generated %d tokens in %.3f s, %.1f tokens/s; "
                "waiting on the loader %.3f s, computing %.3f s, queued %.3f s; batch peak %d; seed %u; finish %s\n",
                s.prompt_tokens(), s.cached_tokens(), s.prefill_seconds(), s.generated_tokens(), s.decode_seconds(),
                s.tokens_per_second(), s.load_wait_seconds(), s.compute_seconds(), s.queue_seconds(),
                s.batch_peak(), s.seed(), done.finish_reason());
  if (!s.draft_model().empty()) {
    // Speculative decoding: how often the draft was right, and what it saved.
    absl::FPrintF(err,
                  "draft %s: proposed %d tokens, accepted %d (%.2f); %d target passes for %d tokens "
                  "(%.2f passes per token)\n",
                  s.draft_model(), s.draft_proposed(), s.draft_accepted(),
                  s.draft_proposed() > 0 ? static_cast<double>(s.draft_accepted()) / s.draft_proposed() : 0.0,
                  s.target_passes(), s.generated_tokens(),
                  s.generated_tokens() > 0 ? static_cast<double>(s.target_passes()) / s.generated_tokens() : 0.0);
  }
}

// The speculation flags the user gave.
void DraftToProto(const GenFlags& flags, v1::DraftParams* proto) {
  proto->set_draft_model(flags.draft_model);
  if (flags.draft_max > 0) proto->set_draft_max(flags.draft_max);
}

// Runs one streamed reply; prints it and, with --stats, its timings.
absl::Status Reply(const GenFlags& flags, std::FILE* out, std::FILE* err,
                   const std::function<absl::Status(const OctoClient::MessageCallback&)>& call) {
  ReplyPrinter printer(flags, out);
  const absl::Status status = call([&](const v1::GenerateResponse& message) { printer(message); });
  printer.EndReply();
  if (status.ok() && flags.stats && printer.done().has_value()) PrintStats(*printer.done(), err);
  return status;
}

v1::ChatRequest ChatTurn(const GenFlags& flags, const std::string& session, bool with_system,
                         const std::string& user) {
  v1::ChatRequest request;
  request.set_session_id(session);
  request.set_model(flags.model);
  request.set_grammar(flags.grammar);
  request.set_chat_template(flags.chat_template);
  if (with_system && !flags.system.empty()) {
    v1::ChatMessage* system = request.add_messages();
    system->set_role("system");
    system->set_content(flags.system);
  }
  v1::ChatMessage* message = request.add_messages();
  message->set_role("user");
  message->set_content(user);
  SamplingToProto(flags.sampling, request.mutable_sampling());
  DraftToProto(flags, request.mutable_draft());
  return request;
}

int Fail(const absl::Status& status, OctoClient& client, std::FILE* err) {
  if (client.cancelled()) return 130;
  absl::FPrintF(err, "octo-gen: %s\n", ErrorMessage(status));
  return 1;
}

// --model: the requests name it, and octod loads it beside its other
// models on first use (as the HTTP API does for a request's "model"); said
// on stderr when it is not loaded yet, as that takes a while.
absl::Status EnsureModel(const GenFlags& flags, OctoClient& client, std::FILE* err) {
  if (flags.model.empty()) return absl::OkStatus();
  absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
  if (!status.ok()) return status.status();
  for (const v1::LoadedModelStatus& loaded : status->models()) {
    if (loaded.model().path() == CanonicalModelName(flags.model)) return absl::OkStatus();
  }
  if (!flags.json) absl::FPrintF(err, "octo-gen: loading %s\n", flags.model);
  return absl::OkStatus();
}

// --chat without a prompt: one turn per input line (or """ block), in one
// session, with the slash commands of chat_input.h. Ctrl-C during a reply
// stops that reply only (octo_gen.cc's watcher calls StopCall).
// `new_session`: --session named one that this run opened.
int Conversation(const GenFlags& given, bool new_session, OctoClient& client, std::istream& in, std::FILE* out,
                 std::FILE* err) {
  GenFlags flags = given;  // /set changes it
  std::string session = flags.session;
  const bool own_session = session.empty();
  auto open = [&]() -> absl::Status {
    absl::StatusOr<v1::CreateSessionResponse> created = client.CreateSession(flags.context, given.session, flags.model);
    if (!created.ok()) return created.status();
    session = created->session_id();
    return absl::OkStatus();
  };
  if (own_session) {
    if (absl::Status opened = open(); !opened.ok()) return Fail(opened, client, err);
  }
  int exit_code = 0;
  bool send_system = own_session || new_session;  // a continued session already has its system message
  auto prompt = [&](const char* text) {
    if (!flags.interactive) return;
    std::fputs(text, err);
    std::fflush(err);
  };
  while (true) {
    prompt("> ");
    const std::optional<std::string> turn = ReadTurn(in, [&] { prompt(". "); });
    if (!turn.has_value()) break;
    const ChatInput input = ParseChatInput(*turn, flags.interactive);
    if (input.kind == ChatInput::Kind::kBye) break;
    if (input.kind == ChatInput::Kind::kHelp) {
      std::fputs(ChatCommandsHelp(), err);
      continue;
    }
    if (input.kind == ChatInput::Kind::kUnknown) {
      absl::FPrintF(err, "unknown command %s; /help lists them\n", input.text);
      continue;
    }
    if (input.kind == ChatInput::Kind::kClear) {
      // A fresh session of the same kind: a new id, or the same name emptied.
      absl::Status cleared = client.CloseSession(session);
      if (cleared.ok()) cleared = open();
      if (!cleared.ok()) {
        exit_code = Fail(cleared, client, err);
        break;
      }
      send_system = true;
      std::fputs("(the conversation is cleared)\n", err);
      continue;
    }
    if (input.kind == ChatInput::Kind::kSet) {
      double temperature = 0;
      if (input.key == "temperature" && absl::SimpleAtod(input.value, &temperature) && temperature >= 0) {
        flags.sampling.temperature = temperature;
      } else if (input.key == "system" && !input.value.empty()) {
        flags.system = input.value;
        send_system = true;
      } else {
        std::fputs("/set temperature T (0 or more) or /set system TEXT\n", err);
        continue;
      }
      absl::FPrintF(err, "(%s set)\n", input.key);
      continue;
    }
    if (absl::StripAsciiWhitespace(input.text).empty()) continue;
    const v1::ChatRequest request = ChatTurn(flags, session, send_system, input.text);
    send_system = false;
    const absl::Status status = Reply(flags, out, err, [&](const auto& on_message) {
      return client.Chat(request, on_message);
    });
    if (status.code() == absl::StatusCode::kCancelled && !client.cancelled()) {
      std::fputs("\n", out);  // Ctrl-C stopped this reply; the conversation goes on
      std::fflush(out);
      std::fputs("(reply stopped)\n", err);
      continue;
    }
    if (!status.ok()) {
      exit_code = Fail(status, client, err);
      break;
    }
  }
  if (own_session) {
    if (absl::Status closed = client.CloseSession(session); !closed.ok() && exit_code == 0) {
      exit_code = Fail(closed, client, err);
    }
  }
  if (exit_code == 0 && client.cancelled()) exit_code = 130;  // input ended by Ctrl-C
  return exit_code;
}

}  // namespace

void SamplingToProto(const SamplingFlags& flags, v1::SamplingParams* proto) {
  if (flags.max_tokens) proto->set_max_tokens(*flags.max_tokens);
  if (flags.temperature) proto->set_temperature(*flags.temperature);
  if (flags.top_k) proto->set_top_k(*flags.top_k);
  if (flags.top_p) proto->set_top_p(*flags.top_p);
  if (flags.min_p) proto->set_min_p(*flags.min_p);
  if (flags.repeat_penalty) proto->set_repeat_penalty(*flags.repeat_penalty);
  if (flags.repeat_last_n) proto->set_repeat_last_n(*flags.repeat_last_n);
  if (flags.frequency_penalty) proto->set_frequency_penalty(*flags.frequency_penalty);
  if (flags.presence_penalty) proto->set_presence_penalty(*flags.presence_penalty);
  if (flags.seed) proto->set_seed(*flags.seed);
  for (const std::string& stop : flags.stop) proto->add_stop(stop);
  proto->set_top_logprobs(flags.logprobs);
}

absl::Status CheckGenFlags(const GenFlags& flags) {
  if (!flags.chat && flags.prompt.empty()) {
    return absl::InvalidArgumentError("give a prompt, or --chat for a conversation");
  }
  if (!flags.chat && !flags.system.empty()) return absl::InvalidArgumentError("--system needs --chat");
  if (!flags.chat && !flags.chat_template.empty()) return absl::InvalidArgumentError("--chat-template needs --chat");
  if (flags.context != 0 && !(flags.chat && flags.prompt.empty()) && flags.session.empty()) {
    return absl::InvalidArgumentError("--context sizes the session --chat or --session NAME opens");
  }
  if (flags.embed && (flags.chat || !flags.session.empty() || !flags.draft_model.empty())) {
    return absl::InvalidArgumentError("--embed takes a text (or - for stdin lines), not --chat, --session or a draft");
  }
  if (!flags.embed && (flags.dimensions != 0 || flags.raw)) {
    return absl::InvalidArgumentError("--dimensions and --raw shape the vectors of --embed");
  }
  if (flags.draft_max < 0 || flags.draft_max > kMaxDraftTokens) {
    return absl::InvalidArgumentError(absl::StrCat("--draft-max is ", flags.draft_max, "; it must be 1..",
                                                   kMaxDraftTokens));
  }
  return absl::OkStatus();
}

namespace {

// --json-schema FILE as the grammar it holds the output to (json_schema.h),
// properties in the order the file writes them.
absl::StatusOr<std::string> SchemaFileGrammar(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("--json-schema: cannot read ", path));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("--json-schema: ", path, " is not JSON"));
  absl::StatusOr<std::string> grammar = JsonSchemaToGrammar(schema);
  if (!grammar.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--json-schema: ", path, ": ", grammar.status().message()));
  }
  return grammar;
}

}  // namespace

int RunGen(const GenFlags& given, OctoClient& client, std::istream& in, std::FILE* out, std::FILE* err) {
  GenFlags flags = given;
  if (!flags.grammar_file.empty()) {
    std::ifstream file(flags.grammar_file, std::ios::binary);
    if (!file) return Fail(absl::NotFoundError(absl::StrCat("--grammar: cannot read ", flags.grammar_file)), client, err);
    flags.grammar.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  if (!flags.json_schema_file.empty()) {
    if (!flags.grammar.empty()) {
      return Fail(absl::InvalidArgumentError("give --grammar or --json-schema, not both"), client, err);
    }
    absl::StatusOr<std::string> grammar = SchemaFileGrammar(flags.json_schema_file);
    if (!grammar.ok()) return Fail(grammar.status(), client, err);
    flags.grammar = *std::move(grammar);
  }
  if (absl::Status loaded = EnsureModel(flags, client, err); !loaded.ok()) return Fail(loaded, client, err);
  // --session NAME: the caller's session of that name, opened when missing
  // and kept after this run (octo-ctl sessions close NAME ends it). An id
  // octod made (s + 32 hex digits) is used as it is.
  bool new_session = false;
  if (!flags.session.empty() && !IsGeneratedSessionId(flags.session)) {
    absl::StatusOr<v1::CreateSessionResponse> opened = client.CreateSession(flags.context, flags.session, flags.model);
    if (!opened.ok()) return Fail(opened.status(), client, err);
    new_session = opened->created();
  }
  if (flags.embed) {
    const absl::Status embedded = RunEmbed(flags, client, in, out);
    return embedded.ok() ? 0 : Fail(embedded, client, err);
  }
  if (flags.chat && flags.prompt.empty()) return Conversation(flags, new_session, client, in, out, err);
  std::string prompt = flags.prompt;
  if (prompt == "-") prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  absl::Status status;
  if (flags.chat) {
    const v1::ChatRequest request = ChatTurn(flags, flags.session, /*with_system=*/true, prompt);
    status = Reply(flags, out, err, [&](const auto& on_message) { return client.Chat(request, on_message); });
  } else {
    v1::GenerateRequest request;
    request.set_session_id(flags.session);
    request.set_model(flags.model);
    request.set_grammar(flags.grammar);
    request.set_prompt(prompt);
    SamplingToProto(flags.sampling, request.mutable_sampling());
    DraftToProto(flags, request.mutable_draft());
    status = Reply(flags, out, err, [&](const auto& on_message) { return client.Generate(request, on_message); });
  }
  return status.ok() ? 0 : Fail(status, client, err);
}

}  // namespace octo
