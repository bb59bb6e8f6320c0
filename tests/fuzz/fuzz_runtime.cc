#include "tests/fuzz/fuzz_runtime.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/chat/chat_template.h"
#include "daemon/sampling/sampling_params.h"
#include "storage/status_macros.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace octo::fuzzing {
namespace {

// Tokens a fuzzed job gets at most: enough for streaming, logprobs and a tail.
constexpr int kMaxFuzzTokens = 4;

const Tokenizer& TheTokenizer() { return FuzzTokenizers()[0]; }

class DoneHandle final : public JobHandle {
 public:
  void Cancel() override {}
};

}  // namespace

FuzzRuntime::FuzzRuntime() {
  model_.path = "tiny";
  model_.architecture = "llama";
  model_.name = "tiny";
  model_.n_layers = 2;
  model_.dim = 256;
  model_.vocab_size = static_cast<uint32_t>(TheTokenizer().vocab_size());
  model_.context_length = 2048;
  model_.quantization = "Q4_K_M";
  model_.chat_template = "chatml";
  model_.loaded = true;
}

absl::StatusOr<ModelSummary> FuzzRuntime::LoadModel(const std::string& path, const ModelSettings&) {
  if (path != model_.path) return absl::NotFoundError(absl::StrCat("no model '", path.substr(0, 64), "'"));
  loaded_ = true;
  return model_;
}

absl::Status FuzzRuntime::UnloadModel(const std::string&) {
  loaded_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ModelSummary>> FuzzRuntime::ListModels() {
  ModelSummary listed = model_;
  listed.loaded = loaded_;
  return std::vector<ModelSummary>{listed};
}

absl::Status FuzzRuntime::CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) {
  if (name == model_.path) return absl::AlreadyExistsError("taken");
  if (watch) {
    watch(LoadProgress{
        .model = name.substr(0, 64), .stage = "decomposing", .bytes_done = 1, .bytes_total = 1, .seconds = 0});
  }
  return gguf.empty() ? absl::NotFoundError("no file") : absl::OkStatus();
}

absl::Status FuzzRuntime::CopyModel(const std::string& source, const std::string& destination) {
  if (source != model_.path) return absl::NotFoundError("no such model");
  return destination == model_.path ? absl::AlreadyExistsError("taken") : absl::OkStatus();
}

absl::Status FuzzRuntime::DeleteModel(const std::string& name) {
  if (name != model_.path) return absl::NotFoundError("no such model");
  return loaded_ ? absl::FailedPreconditionError("loaded") : absl::OkStatus();
}

absl::StatusOr<SessionReport> FuzzRuntime::CreateSession(uint32_t context_length, const std::string& owner,
                                                         const std::string&, const std::string&) {
  return SessionReport{.id = "s1", .owner = owner, .context_length = context_length};
}

absl::Status FuzzRuntime::CloseSession(const std::string& id, const std::string&) {
  return absl::NotFoundError(absl::StrCat("no session '", id.substr(0, 64), "'"));
}

absl::StatusOr<std::shared_ptr<JobHandle>> FuzzRuntime::Submit(GenerateJob job, std::shared_ptr<TokenSink> sink) {
  OCTO_RETURN_IF_ERROR(ValidateSamplingParams(job.sampling));
  if (!loaded_) return absl::FailedPreconditionError("no model is loaded");
  if (!job.model.empty() && job.model != model_.path) return absl::FailedPreconditionError("another model is loaded");
  OCTO_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptTokens(job));
  sink->OnStarted("", static_cast<int>(prompt.size()));
  const int limit = job.sampling.max_tokens < 0 ? kMaxFuzzTokens : std::min(job.sampling.max_tokens, kMaxFuzzTokens);
  const Tokenizer& tokenizer = TheTokenizer();
  for (int i = 0; i < limit; ++i) {
    // Ids taken from the prompt, and byte token <0xE2> (id 3 + 0xE2), the
    // start of a character that never ends.
    const int32_t id = i == 1 ? 3 + 0xE2 : prompt[(i * 7) % prompt.size()];
    GeneratedToken token{.id = id, .text = tokenizer.Piece(id, false), .logprob = -0.5};
    for (int k = 0; k < job.sampling.top_logprobs; ++k) {
      token.top.push_back({.id = k, .logprob = -1.0 - k, .text = tokenizer.Piece(k + 3 + 0xC0, false)});
    }
    sink->OnToken(token);
  }
  const bool fail = absl::StrContains(job.prompt, "fail");
  JobStats stats{.prompt_tokens = static_cast<int>(prompt.size()), .generated_tokens = limit};
  sink->OnDone(fail ? absl::DataLossError("layer_001.bin: checksum mismatch") : absl::OkStatus(),
               limit == kMaxFuzzTokens ? "length" : "stop", "\xE2\x80", stats);
  return std::shared_ptr<JobHandle>(std::make_shared<DoneHandle>());
}

absl::StatusOr<EmbedResult> FuzzRuntime::Embed(const EmbedJob& job, const std::function<bool()>&) {
  if (!loaded_) return absl::FailedPreconditionError("no model is loaded");
  if (!job.model.empty() && job.model != model_.path) return absl::FailedPreconditionError("another model is loaded");
  const size_t n = job.texts.size() + job.token_inputs.size();
  if (n == 0 || n > kMaxEmbedInputs) return absl::InvalidArgumentError("input: bad count");
  // Each input's vector: 8 values from its tokens (ids wrap around).
  EmbedResult result{.model = model_.path, .pooling = "last"};
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> tokens =
        job.texts.empty() ? job.token_inputs[i] : TheTokenizer().Encode(job.texts[i], true, false);
    if (tokens.empty()) return absl::InvalidArgumentError("input: empty");
    std::vector<float> v(8);
    for (size_t t = 0; t < tokens.size(); ++t) v[t % 8] += static_cast<float>(tokens[t] % 97) - 48.0f;
    result.embeddings.push_back(std::move(v));
    result.input_tokens.push_back(static_cast<int>(tokens.size()));
    result.prompt_tokens += static_cast<int>(tokens.size());
  }
  return result;
}

absl::StatusOr<std::vector<int32_t>> FuzzRuntime::Tokenize(const std::string& text, bool add_bos, bool parse_special,
                                                           std::vector<std::string>* pieces) {
  std::vector<int32_t> ids = TheTokenizer().Encode(text, add_bos, parse_special);
  if (pieces != nullptr) {
    for (int32_t id : ids) pieces->push_back(TheTokenizer().Piece(id, true));
  }
  return ids;
}

absl::StatusOr<std::string> FuzzRuntime::Detokenize(const std::vector<int32_t>& tokens) {
  for (int32_t id : tokens) {
    if (id < 0 || id >= TheTokenizer().vocab_size()) return absl::InvalidArgumentError("a token is outside the vocabulary");
  }
  return TheTokenizer().Decode(tokens, true);
}

absl::StatusOr<std::vector<int32_t>> FuzzRuntime::PromptTokens(const GenerateJob& job) {
  std::vector<int32_t> tokens = job.prompt_tokens;
  for (int32_t id : tokens) {
    if (id < 0 || id >= TheTokenizer().vocab_size()) return absl::InvalidArgumentError("a token is outside the vocabulary");
  }
  if (!job.messages.empty()) {
    OCTO_ASSIGN_OR_RETURN(ChatTemplate chat,
                          ChatTemplate::FromName(job.chat_template.empty() ? model_.chat_template : job.chat_template));
    OCTO_ASSIGN_OR_RETURN(std::string text, chat.Apply(job.messages, /*add_generation_prompt=*/true));
    tokens = TheTokenizer().Encode(text, !chat.renders_bos(), /*parse_special=*/true);
  } else if (!job.prompt.empty()) {
    tokens = TheTokenizer().Encode(job.prompt, job.add_bos, job.parse_special);
  }
  if (tokens.empty()) return absl::InvalidArgumentError("the request has no prompt");
  return tokens;
}

absl::StatusOr<ResidencyReport> FuzzRuntime::SetResidency(const ResidencyChange&) { return ResidencyReport{}; }

RuntimeReport FuzzRuntime::Report() {
  RuntimeReport report;
  if (loaded_) report.model = model_;
  report.backend = "cpu";
  return report;
}

}  // namespace octo::fuzzing
