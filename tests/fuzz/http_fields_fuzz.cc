// libFuzzer target for the OpenAI and Ollama request bodies: the input is a
// request body, read by ParseJsonObject and then by every route's field
// parser (openai_api.h, ollama_api.h), as the routes read it.
//
// Invariants: nothing throws or recurses past the depth limit (ASan would
// see the stack overflow); every refusal names what is wrong in a message
// that quotes at most a short prefix of what was sent; an accepted request
// goes through the core's sampling checks, which refuse by name; a chat's
// tools render and give a call grammar (or a named refusal) in every tool
// format; and the input, read as a model's reply, splits into content and
// tool calls without losing text that is not a call.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/chat/reply_splitter.h"
#include "daemon/grammar/grammar.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/ollama_api.h"
#include "daemon/http/openai_api.h"
#include "daemon/http/tool_fields.h"
#include "daemon/sampling/sampling_params.h"

namespace {

// Long enough for every message octod writes, far shorter than a body.
constexpr size_t kMaxMessageBytes = 1024;

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "http_fields_fuzz: invariant broken: %s\n", what);
  std::abort();
}

void CheckRefusal(const absl::Status& status) {
  Check(!status.message().empty(), "a refusal names what is wrong");
  Check(status.message().size() < kMaxMessageBytes, "a refusal quotes a short prefix at most");
  Check(status.code() == absl::StatusCode::kInvalidArgument, "a bad body is INVALID_ARGUMENT (400)");
}

constexpr octo::ToolFormat kFormats[] = {octo::ToolFormat::kGenericJson, octo::ToolFormat::kHermes,
                                         octo::ToolFormat::kLlama3, octo::ToolFormat::kMistral};

void CheckTools(const octo::OpenAiRequest& request) {
  for (const octo::ToolFormat format : kFormats) {
    octo::GenerateJob job = request.job;
    const absl::Status prepared = octo::PrepareToolChat(request.tools, request.messages, format, &job);
    if (!prepared.ok()) {
      Check(!prepared.message().empty() && prepared.code() == absl::StatusCode::kInvalidArgument,
            "a tool refusal is INVALID_ARGUMENT naming what is wrong");
      continue;
    }
    Check(job.messages.size() >= request.messages.size(), "every message is rendered");
    if (!job.grammar.empty() && job.grammar != request.job.grammar) {
      Check(octo::Grammar::Parse(job.grammar).ok(), "a call grammar parses");
    }
  }
}

void CheckReply(absl::string_view text) {
  for (const octo::ToolFormat format : kFormats) {
    const octo::ReplySplitter::Whole whole = octo::ReplySplitter::Split(/*thinks=*/true, format, text);
    Check(whole.calls.empty() || whole.content.size() <= text.size(), "calls come out of the text");
    if (whole.calls.empty()) {
      Check(whole.reasoning.size() + whole.content.size() <= text.size(), "nothing is made up");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  CheckReply(text);
  const absl::StatusOr<nlohmann::json> body = octo::ParseJsonObject(text);
  if (!body.ok()) {
    CheckRefusal(body.status());
    return 0;
  }
  for (const auto& request : {octo::ParseChatCompletionRequest(*body, text), octo::ParseCompletionRequest(*body)}) {
    if (!request.ok()) {
      CheckRefusal(request.status());
    } else {
      const absl::Status core = octo::ValidateSamplingParams(request->job.sampling);
      Check(core.ok() || !core.message().empty(), "the core's refusal names what is wrong");
      if (request->chat) CheckTools(*request);
    }
  }
  for (const auto& request : {octo::ParseOllamaGenerate(*body), octo::ParseOllamaChat(*body, text)}) {
    if (!request.ok()) {
      CheckRefusal(request.status());
    } else {
      const absl::Status core = octo::ValidateSamplingParams(request->sampling);
      Check(core.ok() || !core.message().empty(), "the core's refusal names what is wrong");
    }
  }
  return 0;
}
