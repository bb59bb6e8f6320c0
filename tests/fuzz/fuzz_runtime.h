// The Runtime behind the HTTP fuzz target: one model, "tiny", with a real
// generated tokenizer and the real chat templates, and jobs answered at
// once on the caller's thread, so a fuzzed request costs microseconds and
// nothing piles up over millions of them.
//
// Submit checks what the core checks before queueing (the sampling
// parameters, the model name, the prompt tokenized or the chat rendered)
// and refuses by name; an accepted job gets its events before Submit
// returns: started, up to max_tokens tokens (one of them a lone byte of a
// character, as byte tokens are), then done, or a failure when the prompt
// asks for it ("fail" in the prompt).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/runtime.h"

namespace octo::fuzzing {

class FuzzRuntime final : public Runtime {
 public:
  FuzzRuntime();

  absl::StatusOr<ModelSummary> LoadModel(const std::string& path, const ModelSettings& settings) override;
  absl::Status UnloadModel(const std::string& name) override;
  absl::StatusOr<std::vector<ModelSummary>> ListModels() override;
  absl::Status CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) override;
  absl::Status CopyModel(const std::string& source, const std::string& destination) override;
  absl::Status DeleteModel(const std::string& name) override;
  absl::StatusOr<SessionReport> CreateSession(uint32_t context_length, const std::string& owner,
                                              const std::string& name = "", const std::string& model = "") override;
  absl::Status CloseSession(const std::string& id, const std::string& owner) override;
  absl::StatusOr<std::shared_ptr<JobHandle>> Submit(GenerateJob job, std::shared_ptr<TokenSink> sink) override;
  absl::StatusOr<EmbedResult> Embed(const EmbedJob& job, const std::function<bool()>& cancelled) override;
  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos, bool parse_special,
                                                std::vector<std::string>* pieces) override;
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& tokens) override;
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const GenerateJob& job) override;
  absl::StatusOr<ResidencyReport> SetResidency(const ResidencyChange& change) override;
  RuntimeReport Report() override;
  void Shutdown() override {}

 private:
  ModelSummary model_;
  bool loaded_ = true;
};

}  // namespace octo::fuzzing
