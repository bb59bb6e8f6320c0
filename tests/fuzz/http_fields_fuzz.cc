// libFuzzer target for the OpenAI and Ollama request bodies: the input is a
// request body, read by ParseJsonObject and then by every route's field
// parser (openai_api.h, ollama_api.h), as the routes read it.
//
// Invariants: nothing throws or recurses past the depth limit (ASan would
// see the stack overflow); every refusal names what is wrong in a message
// that quotes at most a short prefix of what was sent; an accepted request
// goes through the core's sampling checks, which refuse by name.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/http/json_fields.h"
#include "daemon/http/ollama_api.h"
#include "daemon/http/openai_api.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::StatusOr<nlohmann::json> body =
      octo::ParseJsonObject(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!body.ok()) {
    CheckRefusal(body.status());
    return 0;
  }
  for (const auto& request : {octo::ParseChatCompletionRequest(*body), octo::ParseCompletionRequest(*body)}) {
    if (!request.ok()) {
      CheckRefusal(request.status());
    } else {
      const absl::Status core = octo::ValidateSamplingParams(request->job.sampling);
      Check(core.ok() || !core.message().empty(), "the core's refusal names what is wrong");
    }
  }
  for (const auto& request : {octo::ParseOllamaGenerate(*body), octo::ParseOllamaChat(*body)}) {
    if (!request.ok()) {
      CheckRefusal(request.status());
    } else {
      const absl::Status core = octo::ValidateSamplingParams(request->sampling);
      Check(core.ok() || !core.message().empty(), "the core's refusal names what is wrong");
    }
  }
  return 0;
}
