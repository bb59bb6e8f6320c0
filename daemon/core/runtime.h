// Runtime: everything octod does, with no gRPC in sight -- the loaded model
// and its residency, the loader, sessions and their KV caches, and the
// scheduler that batches every active session into each forward pass.
//
// The gRPC service (daemon/server) translates proto <-> these types and
// absl::Status <-> grpc::Status, nothing more.
//
// Threading: every method may be called from any thread. Token events are
// delivered to a job's TokenSink on the scheduler thread, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/chat/chat_template.h"
#include "daemon/core/job_metrics.h"
#include "daemon/core/speculation_settings.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/residency_plan.h"
#include "daemon/sampling/sampling_params.h"
#include "kernels/kv_types.h"

namespace octo {

// Named limits on requests (INVALID_ARGUMENT names the one exceeded).
inline constexpr size_t kMaxPromptBytes = 1 << 20;
inline constexpr size_t kMaxChatMessages = 256;
inline constexpr size_t kMaxSessionIdBytes = 64;
// Auto VRAM budget: what is left free on the device for the CUDA context's
// own growth, cuBLAS and fragmentation.
inline constexpr uint64_t kVramReserveBytes = 512ull << 20;

struct RuntimeOptions {
  std::string models_root;          // LoadModel paths are relative to it, confined to it
  std::string model;                // loaded at start when non-empty (relative to models_root)
  // Models held at once. A load past it, or past the shared budgets,
  // unloads idle models, least recently used first; models in use are
  // never unloaded for it (the load is UNAVAILABLE then).
  uint32_t max_loaded_models = 3;
  // How long an idle model stays loaded (a request's keep_alive overrides
  // it for its model); infinite: until another load needs its room.
  absl::Duration keep_alive = absl::InfiniteDuration();
  // Where GGUF files under models_root are decomposed on first load
  // (storage/gguf_cache.h). Empty: "<models_root>/.octo-cache".
  std::string cache_dir;
  // Sessions unused this long are closed (their KV cache freed); zero: never.
  absl::Duration session_idle_timeout = absl::Hours(1);
  // One line per event (loads, unloads and why they failed, GGUF
  // decomposition progress); unset: silent.
  std::function<void(absl::string_view)> log;
  // One log line per generation request when it ends: what asked, the
  // model, prompt and generated tokens, time and outcome.
  bool log_requests = false;
  std::string loader_path;          // the octo-loader executable
  std::vector<std::string> loader_args;  // appended to its command line (tests inject faults)
  int n_threads = 0;                // CPU backend threads; < 1: one per core
  bool allow_simd = true;
  // Backend: "auto" (CUDA when a device is usable, else the CPU), "cuda"
  // (an error when none is), "cpu". gpu: the CUDA device index. octod's
  // --backend defaults to auto; a Runtime made in code (tests) to the CPU,
  // the reference, so it computes the same on any machine.
  std::string backend = "cpu";
  int gpu = 0;
  // VRAM tier (CUDA): layers kept on the device plus the staging buffers
  // the other layers are copied through. 0 = auto: free VRAM at load minus
  // the KV budget, the workspaces and kVramReserveBytes.
  uint64_t vram_budget_bytes = 0;
  uint32_t staging_buffers = 3;     // device staging buffers, >= 2 (the prefetch depth; kDefaultStagingBuffers)
  bool cuda_graphs = true;          // decode passes replayed as CUDA graphs (--no-cuda-graphs: launch by launch)
  // Residency (SetResidency changes these at run time).
  uint32_t pin_first = 1;
  uint32_t pin_last = 1;
  uint64_t layer_budget_bytes = 0;  // 0 = auto: fill auto_budget_bytes
  uint64_t auto_budget_bytes = 0;   // the memory auto mode may fill; 0 = half of MemAvailable
  uint32_t ring_slots = 2;
  // The expert cache of a model streaming its experts selectively, out of
  // the layer budget; kAutoExpertCache = half of what the pinned layers and
  // the ring leave (residency_plan.h).
  uint64_t expert_cache_bytes = kAutoExpertCache;
  // MoE layers of a format-2 directory streamed in two phases, the dense
  // part then the routed experts (CPU backend); false streams them whole.
  bool selective_experts = true;
  bool direct_io = true;
  // Outstanding loader reads with no completion for this long: the loader is
  // hung, killed and restarted (layer_stream.h). Zero: from the largest layer.
  absl::Duration loader_timeout = absl::ZeroDuration();
  // Sessions and KV caches.
  uint64_t kv_budget_bytes = 1ull << 30;  // all sessions' caches together
  KvCacheTypes kv_types = {};             // a loaded model's caches, unless its load names others
  uint32_t session_context = 4096;        // a new session's positions when it asks none (capped by the model)
  uint32_t max_sessions = 64;
  bool evict_idle_sessions = false;       // when the KV budget is full: evict the longest-idle
                                          // session instead of RESOURCE_EXHAUSTED
  uint32_t prefill_chunk = 512;           // prompt tokens per session per pass
  // Embedding inputs' tokens per pass (Runtime::Embed), besides the
  // generations': a pass embeds many inputs with one read of each layer.
  uint32_t embed_batch_tokens = 2048;
  // Speculative decoding: the draft model (a directory under models_root,
  // kept resident; empty or "none": no speculation) for every request that
  // names none, and how it drafts (daemon/core/speculation.h).
  std::string draft_model;
  SpeculationSettings speculation;
};

// What a client asks for; see proto/octo.proto GenerateRequest/ChatRequest.
struct GenerateJob {
  std::string session_id;                 // empty: one-shot, in a temporary cache
  std::string owner;                      // the caller's credential: a session must be its own
  // The model to run (its name under the models root), loaded first when
  // it is not; empty: the session's, or the default model (the one loaded
  // last). A session's job must name its session's model or none.
  std::string model;
  // How long the model stays loaded once idle (Ollama's keep_alive; zero:
  // unloaded when this job ends, infinite: until room is needed); unset:
  // as it was.
  std::optional<absl::Duration> keep_alive;
  std::string origin;                     // what asked, for the request log ("POST /api/chat", "gRPC Generate")
  // Exactly one of: prompt text, prompt tokens, chat messages.
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<ChatMessage> messages;
  bool chat = false;                      // messages are a chat (rendered with the template)
  std::string chat_template;              // family name; empty = the model's
  bool add_bos = true;                    // false: no BOS in front, for a prompt or a chat's rendering
  bool parse_special = false;
  SamplingParams sampling;
  // The output held to this grammar (GBNF, daemon/grammar/grammar.h); empty:
  // unconstrained. A bad grammar is INVALID_ARGUMENT naming "grammar". A
  // draft model proposes only what the grammar allows.
  std::string grammar;
  // Speculative decoding for this request: a draft model under the models
  // root (unset or empty: the daemon's; "none": no draft), and the longest
  // draft (unset: the daemon's draft_max).
  std::optional<std::string> draft_model;
  std::optional<int> draft_max;
  // A one-shot job's context (Ollama's num_ctx): 0 = as much of the
  // model's trained context as the KV budget holds (ServableContext); more
  // is capped to that. A session's context is set when it is made.
  int context_length = 0;
  // A prompt longer than its context is refused (INVALID_ARGUMENT,
  // IsContextExceeded: daemon/engine/context_limit.h) -- unless this is
  // set: then, as Ollama does, its first truncate_keep tokens and its newest
  // ones are kept, leaving room to generate (max_tokens of it, at most half
  // the context; a quarter without max_tokens), and the log says so.
  std::optional<int> truncate_keep;
};

// Embeddings (Runtime::Embed). An input is a text or a list of token ids.
inline constexpr size_t kMaxEmbedInputs = 2048;  // per request, as OpenAI's

// What a client asks to embed; see proto/octo.proto EmbedRequest.
struct EmbedJob {
  std::string owner;   // the caller's credential
  std::string model;   // as GenerateJob's: loaded first when it is not; empty: the default model
  std::optional<absl::Duration> keep_alive;  // as GenerateJob's
  std::string origin;  // what asked, for the request log
  // Exactly one of these is non-empty; each element is one input.
  std::vector<std::string> texts;               // tokenized with the model's BOS/EOS rules
  std::vector<std::vector<int32_t>> token_inputs;
  // An input longer than its context is cut to its first tokens when set
  // (Ollama's truncate); else INVALID_ARGUMENT, IsContextExceeded.
  bool truncate = false;
  int context_length = 0;  // as GenerateJob's: 0 = ServableContext
  // The vectors returned: the first `dimensions` values (0: all; more than
  // the model's width is INVALID_ARGUMENT), scaled to unit L2 length when
  // `normalize` (daemon/engine/embedding.h ShapeEmbedding).
  int dimensions = 0;
  bool normalize = true;
};

struct EmbedResult {
  // One per input, in order: the pooled final hidden states, shaped as
  // EmbedJob.dimensions and .normalize ask.
  std::vector<std::vector<float>> embeddings{};
  std::vector<int> input_tokens{};  // each input's tokens, after any cut
  int prompt_tokens = 0;            // their sum
  bool truncated = false;           // some input was cut
  std::string model{};              // the model's path
  std::string pooling{};            // "mean", "cls", "last"
  double seconds = 0;
};

struct JobStats {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double queue_seconds = 0;
  double load_wait_seconds = 0;
  double compute_seconds = 0;
  uint64_t seed = 0;
  int batch_peak = 0;
  // Passes that decided tokens for this job (its last prompt chunk's and
  // every decode pass): generated_tokens of them without a draft, fewer with.
  int target_passes = 0;
  // Speculative decoding: the draft model, the draft tokens proposed and
  // accepted.
  std::string draft_model;
  int draft_proposed = 0, draft_accepted = 0;
};

// A job's events. Called on the scheduler thread; must not block (queue the
// event and return). OnDone is the last call, exactly once.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  virtual void OnStarted(const std::string& session_id, int prompt_tokens) = 0;
  virtual void OnToken(const GeneratedToken& token) = 0;
  // status not OK: the job failed (e.g. DATA_LOSS); finish_reason is
  // "stop", "length", "context" or "cancelled".
  virtual void OnDone(const absl::Status& status, const std::string& finish_reason,
                      const std::string& tail, const JobStats& stats) = 0;
};

// Lets the caller cancel a submitted job (client gone). Safe from any thread.
class JobHandle {
 public:
  virtual ~JobHandle() = default;
  virtual void Cancel() = 0;
};

// A load's own settings (LoadModel); unset: the daemon's.
struct ModelSettings {
  // Its draft model for speculative decoding; "none": no draft.
  std::optional<std::string> draft_model = std::nullopt;
  // Its sessions' KV cache types (--cache-type-k, --cache-type-v).
  std::optional<GgmlType> cache_type_k = std::nullopt, cache_type_v = std::nullopt;
};

struct ModelSummary {
  std::string path;  // relative to models_root
  std::string architecture;
  std::string name;
  uint32_t n_layers = 0, dim = 0, vocab_size = 0, context_length = 0, n_experts = 0;
  uint64_t total_bytes = 0;
  uint64_t n_params = 0;      // elements of every tensor
  std::string quantization;   // general.file_type's name ("Q4_K_M"), else the type most matrix bytes have
  bool loaded = false;
  std::string chat_template;  // family recognised, "" if none
  std::string chat_template_text;  // the GGUF's own template (Jinja) when octod chats in it, else ""
  std::vector<std::string> stop;   // the texts of its end-of-generation tokens (EOS, EOT)
  std::string draft_model;    // the loaded model's draft (speculative decoding), "" if none
  std::string pooling;        // how its embeddings pool: "mean", "cls", "last"; "rank" for a reranker
  bool generates = true;      // false for an encoder (bert, nomic-bert): it only embeds
  // From its GGUF's chat template: it thinks in <think>...</think> before
  // answering (a constraint starts after the thought), and the template
  // takes a tool list.
  bool thinks = false;
  bool template_tools = false;
};

struct ResidencyChange {  // unset: keep
  std::string model;   // the loaded model it is for; empty: the default model
  bool reset = false;  // start from the configured settings (octod's flags), not the current ones
  std::optional<uint32_t> pin_first, pin_last;
  std::optional<uint64_t> budget_bytes;
  std::optional<bool> auto_budget;
  std::optional<uint64_t> vram_budget_bytes;  // CUDA: the VRAM tier's budget
  std::optional<bool> vram_auto;
  std::optional<uint64_t> expert_cache_bytes;  // kAutoExpertCache: auto
};

// Where a layer lives between passes.
enum class LayerTier { kDevice, kHost, kDisk };
const char* LayerTierName(LayerTier tier);  // "vram", "host", "disk"

struct LayerReport {
  bool resident = false, pinned = false;  // resident: in the device or host tier
  LayerTier tier = LayerTier::kHost;
  uint64_t bytes = 0, loads = 0;
  double load_seconds = 0, load_wait_seconds = 0, compute_seconds = 0;  // means
  // CUDA, from events, means per pass: the host-to-device copy, the time the
  // compute stream waited for it, and the layer's compute.
  uint64_t copies = 0;
  double copy_seconds = 0, copy_wait_seconds = 0;
};

// The VRAM tier (CUDA backend only; empty otherwise).
struct DeviceReport {
  bool present = false;
  std::string name;               // "NVIDIA H100 80GB HBM3"
  int index = 0;
  uint64_t total_bytes = 0, free_bytes = 0;  // cudaMemGetInfo, now
  bool auto_budget = true;
  uint64_t budget_bytes = 0;      // VRAM tier: layers + staging
  uint64_t held_bytes = 0, peak_bytes = 0;
  uint32_t device_layers = 0;     // layers held in VRAM
  uint32_t staging_buffers = 0;
  uint64_t staging_bytes = 0;     // each
  uint64_t global_bytes = 0;      // token_embd, lm_head, final norm, rope factors on the device
  uint64_t workspace_bytes = 0;   // activations and scratch
  uint64_t kv_bytes = 0;          // sessions' caches on the device
  uint64_t copied_bytes = 0;      // host-to-device layer copies since load
  double copy_seconds = 0;        // the summed event time of the timed copies
  double h2d_gbps = 0;            // the timed copies' bytes / copy_seconds
  double overlap = 0;             // fraction of copy time hidden behind compute, [0, 1]
  uint32_t timing_every = 0;      // layers' copy and compute times come from one use in this many
  uint64_t unpinned_bytes = 0;    // host layer memory cudaHostRegister refused: copied as pageable
  std::string pin_error;          // its error ("" when all is pinned)
  uint64_t graph_captures = 0, graph_replays = 0, eager_stretches = 0;  // CUDA graphs (step_graphs.h)
  bool programmatic_launches = false;  // kernels scheduled while their predecessor finishes
  uint32_t weight_prefetch_bytes = 0;  // of each weight row, asked of L2 before the predecessor is done
};

// Selective expert streaming (two-phase MoE layers; empty otherwise).
struct ExpertReport {
  bool present = false;          // some layer streams its experts selectively
  std::string not_selective;     // why a MoE model streams whole layers, when it does
  uint32_t two_phase_layers = 0;
  uint64_t cache_capacity_bytes = 0, cache_held_bytes = 0;
  uint32_t cache_entries = 0;
  uint64_t cache_hits = 0, cache_misses = 0, cache_evictions = 0;
  uint64_t routed = 0;            // routed experts (each pass's union, per layer)
  uint64_t routed_from_disk = 0;  // ... read from disk (cache misses)
  uint64_t predicted = 0;         // ... of which the prediction had named
  uint64_t prefetched = 0;        // expert reads the prediction issued (some maybe not routed)
  uint64_t prefetch_wasted = 0;   // ... not routed after all
  uint64_t whole_layer_reads = 0; // passes whose union passed kWholeLayerExpertShare
  uint64_t dense_bytes_read = 0, expert_bytes_read = 0;
};

struct ResidencyReport {
  uint32_t pin_first = 0, pin_last = 0;
  bool auto_budget = false;
  uint64_t budget_bytes = 0, held_bytes = 0, peak_bytes = 0;
  uint32_t ring_slots = 0;
  uint64_t slot_bytes = 0;
  uint32_t resident_layers = 0, streamed_layers = 0;  // host side: resident = host tier, streamed = disk tier
  uint64_t global_bytes = 0;
  DeviceReport device;
  ExpertReport experts;
};

struct SessionReport {
  std::string id;
  std::string owner;  // the credential that created it
  std::string model;  // the model it belongs to
  uint32_t positions = 0, context_length = 0;
  uint64_t kv_bytes = 0;
  bool active = false;
  double idle_seconds = 0;
  bool created = false;  // CreateSession: opened by this call (not an existing named session)
};

struct LoaderReport {
  bool running = false;
  int pid = 0;
  uint32_t restarts = 0, stalls = 0, checksum_failures = 0;  // stalls: restarts of a hung loader
  uint64_t bytes_read = 0;
  double read_gbps = 0;
  std::string io_mode;
};

// Speculative decoding (daemon/core/speculation.h); present when the
// loaded model has a draft model or some request brought one.
struct SpeculationReport {
  bool present = false;
  std::string draft_model;          // the loaded model's draft, "" if none
  uint64_t draft_bytes = 0;         // its weights
  uint32_t drafts_loaded = 0;       // draft models in memory (requests may name others)
  SpeculationSettings settings;
  uint64_t rounds = 0, proposed = 0, accepted = 0, tokens = 0;  // SpeculationCounters
  double acceptance = 0;            // accepted / proposed
  double tokens_per_round = 0;      // tokens / rounds: a session's tokens per target pass
  uint64_t errors = 0;
  std::string last_error;
};

// A load in progress: a GGUF being decomposed into the cache, then the
// model being opened.
struct LoadProgress {
  std::string model;  // its canonical name
  std::string stage;  // "decomposing into the cache", "loading"
  uint64_t bytes_done = 0, bytes_total = 0;  // while decomposing
  double seconds = 0;                        // since the load began
};

// Watches one model being created (Runtime::CreateModel): called on the
// creating thread as the GGUF's bytes are written.
using CreateWatcher = std::function<void(const LoadProgress&)>;

// One loaded model (RuntimeReport::models).
struct LoadedModelReport {
  ModelSummary summary;
  std::string backend;
  ResidencyReport residency;
  LoaderReport loader;
  bool is_default = false;        // requests naming no model run on it
  uint32_t jobs = 0, sessions = 0;  // running or waiting on it; its open sessions
  uint64_t kv_bytes = 0;          // its sessions' caches
  uint64_t resident_layer_bytes = 0, streamed_layer_bytes = 0;  // its layers, kept (VRAM or RAM) or streamed
  double overlap = 0;             // fraction of its loader time hidden behind compute
  double idle_seconds = 0;        // since a request last asked for it (0 while in use)
  // Its keep_alive: seconds until it is unloaded while idle; unset: kept
  // until another load needs its room.
  std::optional<double> expires_in_seconds;
  // Its sessions' KV caches: the types, the bytes one position takes in
  // every attention layer, and the positions kv_budget holds at that rate
  // (capped at the trained context).
  KvCacheTypes kv_types;
  uint64_t kv_bytes_per_position = 0;
  uint32_t kv_budget_positions = 0;
};

struct RuntimeReport {
  // The default model (the one requests naming none run on), with its
  // residency, loader and layers below; every loaded model is in `models`.
  std::optional<ModelSummary> model;
  std::vector<LoadedModelReport> models;  // by name
  std::optional<LoadProgress> loading;
  SpeculationReport speculation;
  ResidencyReport residency;
  LoaderReport loader;
  std::vector<LayerReport> layers;
  std::vector<SessionReport> sessions;
  uint64_t kv_budget_bytes = 0, kv_used_bytes = 0;
  double tokens_per_second = 0;  // over the last 10 s
  double overlap = 0;            // fraction of loader time hidden behind compute
  uint64_t passes = 0, generated_tokens = 0;
  uint32_t jobs_running = 0, jobs_waiting = 0;  // in the scheduler now (waiting: no pass yet)
  JobTotals jobs;                                // every job ended since start
  double uptime_seconds = 0;
  std::string backend;
  bool serving = true;
};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // Validates the options (INVALID_ARGUMENT naming the bad one), starts the
  // scheduler and, when options.model is set, loads it.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const RuntimeOptions& options);

  // Models. LoadModel loads a model beside the loaded ones (and makes it
  // the default), unloading idle ones when it needs their room (see
  // RuntimeOptions::max_loaded_models): UNAVAILABLE when only models in use
  // hold it. Loading a loaded model loads it again (its sessions end;
  // FAILED_PRECONDITION while it is in use). A load that fails after
  // unloading others loads them again. NOT_FOUND / INVALID_ARGUMENT for a
  // bad path, which must stay inside models_root.
  // settings.draft_model: its draft model (speculative decoding): unset:
  // the one the options name; "none": no draft. A draft whose vocabulary is
  // not the target's is INVALID_ARGUMENT naming the difference, and nothing
  // is loaded then. settings.cache_type_k, _v: its caches' types, unset:
  // the options'; types the model's rows cannot take are INVALID_ARGUMENT
  // naming cache-type-k or cache-type-v.
  virtual absl::StatusOr<ModelSummary> LoadModel(const std::string& path, const ModelSettings& settings) = 0;
  // Unloads the model `name` (empty: the only loaded one), ending its
  // sessions: FAILED_PRECONDITION while jobs run on it, NOT_FOUND when it is
  // not loaded, INVALID_ARGUMENT for "" while several are.
  virtual absl::Status UnloadModel(const std::string& name) = 0;
  // The loaded model `name` (empty: the default model), loaded now when it
  // is not, as a request naming it would be; *loaded_now (when set) says
  // whether this call loaded it. NOT_FOUND for no such model.
  virtual absl::StatusOr<ModelSummary> AcquireModel(const std::string& name, bool* loaded_now) {
    const RuntimeReport report = Report();
    if (loaded_now != nullptr) *loaded_now = false;
    for (const LoadedModelReport& m : report.models) {
      if (m.summary.path == name || (name.empty() && m.is_default)) return m.summary;
    }
    if (report.model.has_value() && (name.empty() || report.model->path == name)) return *report.model;
    if (loaded_now != nullptr) *loaded_now = true;
    return LoadModel(name, {});
  }
  // How long the loaded model `name` stays loaded once idle (Ollama's
  // keep_alive; zero: unloaded as soon as no request, job or session holds
  // it). NOT_FOUND when it is not loaded.
  virtual absl::Status SetKeepAlive(const std::string& name, absl::Duration keep_alive) {
    return keep_alive == absl::ZeroDuration() ? UnloadModel(name) : absl::OkStatus();
  }
  virtual absl::StatusOr<std::vector<ModelSummary>> ListModels() = 0;
  // Imports a GGUF as a new model: decomposes the file at `gguf` (a path
  // on this machine, absolute or under models_root) into the layer
  // directory models_root/NAME, `watch` (when set) seeing its progress
  // (stage "decomposing"). INVALID_ARGUMENT for a name outside the root or
  // a file that is no GGUF Octo runs, ALREADY_EXISTS when NAME is taken,
  // NOT_FOUND for a missing file; a failure leaves nothing at NAME.
  virtual absl::Status CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) = 0;
  // Copies the model `source` (a layer directory or GGUF under the root) to
  // the new name `destination`, whole or not at all: NOT_FOUND, or
  // ALREADY_EXISTS when `destination` is taken.
  virtual absl::Status CopyModel(const std::string& source, const std::string& destination) = 0;
  // Removes the model `name` from the root (a GGUF's decomposed copy in
  // the cache too): NOT_FOUND, or FAILED_PRECONDITION while it is loaded.
  virtual absl::Status DeleteModel(const std::string& name) = 0;

  // Sessions: a KV cache kept between turns. context_length 0 = default.
  // A session belongs to `owner`, the credential that created it
  // (daemon/server/credentials.h): only a job with the same owner may use
  // it, only that owner may close it; to anyone else it does not exist
  // (NOT_FOUND). Ids are 128 random bits.
  // A non-empty `name` opens the owner's session of that name, or returns it
  // when it exists (SessionReport.created says which); its id is the name.
  // A session belongs to `model` (loaded first when it is not; empty: the
  // default model) and holds it loaded while it is open.
  virtual absl::StatusOr<SessionReport> CreateSession(uint32_t context_length, const std::string& owner,
                                                      const std::string& name = "", const std::string& model = "") = 0;
  virtual absl::Status CloseSession(const std::string& id, const std::string& owner) = 0;

  // Queues a job; events go to `sink`. Errors found before queueing
  // (INVALID_ARGUMENT, NOT_FOUND session, FAILED_PRECONDITION no model,
  // RESOURCE_EXHAUSTED) are returned here and the sink is not called.
  virtual absl::StatusOr<std::shared_ptr<JobHandle>> Submit(GenerateJob job,
                                                           std::shared_ptr<TokenSink> sink) = 0;

  // Embeds every input of `job` and waits for them: they run as jobs of
  // the scheduler (each input its own sequence, in a temporary cache), so
  // the inputs of one request, of concurrent requests and the generations
  // running beside them share forward passes. `cancelled` (when set) is
  // asked every 50 ms; true cancels the inputs not
  // yet done (CANCELLED). Errors: as Submit's, INVALID_ARGUMENT for an empty
  // or oversized input list or input, FAILED_PRECONDITION for a reranking
  // model (pooling "rank"), and a failed pass's error.
  virtual absl::StatusOr<EmbedResult> Embed(const EmbedJob& job, const std::function<bool()>& cancelled) = 0;

  virtual absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos,
                                                        bool parse_special, std::vector<std::string>* pieces) = 0;
  virtual absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& tokens) = 0;
  // The tokens `job`'s prompt becomes when it runs without a session: its
  // chat rendered with the template, or its prompt text tokenized. Errors
  // as Submit's (INVALID_ARGUMENT, FAILED_PRECONDITION no model).
  virtual absl::StatusOr<std::vector<int32_t>> PromptTokens(const GenerateJob& job) = 0;

  // Applied between forward passes; sessions continue.
  virtual absl::StatusOr<ResidencyReport> SetResidency(const ResidencyChange& change) = 0;

  virtual RuntimeReport Report() = 0;

  // How long the forward pass in progress has gone without a layer
  // starting or finishing; zero when no pass runs. A watchdog (systemd's,
  // octod_main.cc) stops vouching for a daemon whose pass stands still.
  // Any thread, cheap.
  virtual absl::Duration PassSilence() { return absl::ZeroDuration(); }

  // Graceful stop: refuses new jobs (UNAVAILABLE), ends running ones (their
  // sinks get UNAVAILABLE "octod is shutting down", finish "cancelled"),
  // stops the loader, frees shared memory.
  virtual void Shutdown() = 0;
};

}  // namespace octo
