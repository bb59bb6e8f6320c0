// LoadedModel: one model directory as octod serves it -- manifest,
// tokenizer, chat template, the always-resident tensors, the residency
// manager (resident layers + the loader's ring) and the CPU backend.
//
// Threading: Forward and residency changes run on the scheduler thread;
// the read-only parts (manifest, tokenizer, template, summary) from any.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/chat/chat_template.h"
#include "daemon/core/residency.h"
#include "daemon/core/runtime.h"
#include "daemon/engine/forward.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model_files.h"
#include "daemon/engine/run_state.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/engine/cpu_backend.h"

namespace octo {

struct ModelLoadOptions {
  std::string dir;                 // absolute model directory
  std::string path;                // as the client named it (relative to the models root)
  ResidencySettings residency;
  LayerStreamOptions stream;       // loader path, direct I/O; dir and ring filled in here
  LayerStreamFactory stream_factory;
  int n_threads = 0;
  bool allow_simd = true;
};

class LoadedModel {
 public:
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const ModelLoadOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const ModelConfig& config() const { return manifest_.config; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The model's own chat template family; NOT_FOUND status when it has none.
  const absl::StatusOr<ChatTemplate>& chat_template() const { return chat_template_; }
  const ModelSummary& summary() const { return summary_; }
  uint64_t global_bytes() const { return globals_.bytes(); }
  std::string backend() const;

  ResidencyManager& residency() { return *residency_; }
  const ResidencyManager& residency() const { return *residency_; }

  // A cache of at most max_positions (capped at the context length).
  std::unique_ptr<KvCache> NewCache(int max_positions) const;

  // One pass (forward.h's contract).
  absl::Status Forward(std::span<const SequenceStep> batch, std::vector<float>& logits);

 private:
  LoadedModel() = default;

  Manifest manifest_;
  std::optional<Tokenizer> tokenizer_;  // set by Load
  absl::StatusOr<ChatTemplate> chat_template_ = absl::NotFoundError("no template");
  ModelSummary summary_;
  ResidentGlobals globals_;
  std::unique_ptr<ResidencyManager> residency_;
  std::shared_ptr<Backend> backend_;
  RunState state_;
};

// The summary of a model directory from its manifest alone.
ModelSummary SummarizeManifest(const Manifest& manifest, const std::string& path);

}  // namespace octo
