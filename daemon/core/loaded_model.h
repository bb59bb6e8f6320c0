// LoadedModel: one model directory as octod serves it -- manifest,
// tokenizer, chat template, the always-resident tensors, the residency
// manager (resident layers + the loader's ring) and the CPU backend.
//
// Threading: Forward and residency changes run on the scheduler thread;
// the read-only parts (manifest, tokenizer, template, summary) from any.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/chat/chat_template.h"
#include "daemon/core/residency.h"
#include "daemon/core/runtime.h"
#include "daemon/engine/forward.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model_files.h"
#include "daemon/engine/run_state.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/engine/backend_setup.h"

namespace octo {

// The VRAM tier's settings (CUDA).
struct VramSettings {
  bool auto_budget = true;       // free VRAM at load - kv_budget - workspaces - kVramReserveBytes
  uint64_t budget_bytes = 0;     // when !auto_budget
  uint32_t staging_buffers = kDefaultStagingBuffers;
  bool cuda_graphs = true;       // decode passes replayed as CUDA graphs
  uint64_t kv_budget_bytes = 0;  // what auto leaves for the sessions' caches
  int pass_rows = 512;           // the most rows a pass carries: auto leaves room for their workspaces
  uint32_t pin_first = 1, pin_last = 1;  // the residency pins: these layers go to VRAM first
};

struct ModelLoadOptions {
  std::string dir;                 // absolute model directory
  std::string path;                // as the client named it (relative to the models root)
  ResidencySettings residency;
  LayerStreamOptions stream;       // loader path, direct I/O; dir and ring filled in here
  LayerStreamFactory stream_factory;
  bool selective_experts = true;   // RuntimeOptions::selective_experts
  int n_threads = 0;
  bool allow_simd = true;
  // The backend (backend_setup.h) and, on CUDA, the VRAM tier.
  std::string backend = "auto";
  int gpu = 0;
  VramSettings vram;
  KvCacheTypes kv_types = {};      // its sessions' caches (checked against its rows)
};

class LoadedModel {
 public:
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const ModelLoadOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const ModelConfig& config() const { return manifest_.config; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The family chats use unless a request names one: the model's own, or
  // chatml when its GGUF has no template we recognise (ChatTemplate::ForModel).
  const ChatTemplate& chat_template() const { return chat_template_->chat_template; }
  // ForModel's notice when the model chats in the fallback, once: the first
  // call returns it, every later call (and any call for a model with its own
  // template) "". The caller logs it. Any thread.
  std::string TakeChatTemplateNotice();
  const ModelSummary& summary() const { return summary_; }
  // The vocabulary as constrained generation sees it, built on first use
  // (a trie of every token's bytes). Any thread.
  std::shared_ptr<const GrammarVocab> grammar_vocab() const;
  uint64_t global_bytes() const { return globals_.bytes(); }
  std::string backend() const;
  std::string backend_kind() const { return backend_->kind(); }  // "cpu" or "cuda"

  ResidencyManager& residency() { return *residency_; }
  const ResidencyManager& residency() const { return *residency_; }
  bool on_device() const { return weights_->on_device(); }

  // Between passes: re-plans the host tier under `host` and, on CUDA, the
  // VRAM tier under `vram`. On an error the previous plans stay in force.
  absl::Status ApplyResidency(const ResidencySettings& host, const VramSettings& vram);
  const VramSettings& vram() const { return vram_; }
  // What its VRAM tier holds (layers and staging); 0 off the device.
  uint64_t device_held_bytes() const;
  // The VRAM tier's report and per-layer copy times (CUDA), into `report`.
  void AddDeviceReport(ResidencyReport& report, std::vector<LayerReport>& layers);
  // What octod logs when cudaHostRegister refused host layer memory (it is
  // then copied as pageable memory), else "" (all pinned, or the CPU).
  std::string PinNotice() const;

  // A cache of at most max_positions (capped at the context length).
  std::unique_ptr<KvCache> NewCache(int max_positions) const;
  KvCacheTypes kv_types() const { return kv_types_; }

  // One pass (forward.h's contract).
  absl::Status Forward(std::span<const SequenceStep> batch, std::vector<float>& logits,
                       std::vector<float>* hidden = nullptr, std::vector<LogitCandidates>* candidates = nullptr);

 private:
  LoadedModel() = default;

  Manifest manifest_;
  std::optional<Tokenizer> tokenizer_;  // set by Load
  std::optional<ModelChatTemplate> chat_template_;  // set by Load
  std::atomic<bool> chat_template_notice_taken_{false};
  mutable std::once_flag grammar_vocab_once_;
  mutable std::shared_ptr<const GrammarVocab> grammar_vocab_;
  ModelSummary summary_;
  ResidentGlobals globals_;
  std::unique_ptr<ResidencyManager> residency_;
  // The VRAM plan under `vram`; *budget gets the budget it used.
  absl::StatusOr<LayerPlan> PlanVramTier(const VramSettings& vram, uint64_t* budget) const;

  std::string dir_;
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<BackendWeights> weights_;
  VramSettings vram_;
  uint64_t vram_budget_ = 0;  // in force
  RunState state_;
  KvCacheTypes kv_types_;
};

// The summary of a model directory from its manifest alone.
ModelSummary SummarizeManifest(const Manifest& manifest, const std::string& path);

}  // namespace octo
