#include "daemon/server/config.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/engine/draft_tree.h"
#include "daemon/loader/layer_stream.h"
#include "daemon/server/auth.h"
#include "daemon/server/endpoint.h"
#include "kernels/kv_types.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

namespace fs = std::filesystem;

absl::Status KeyError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", problem));
}

template <typename T>
absl::Status CheckRange(absl::string_view key, int64_t value, int64_t low, int64_t high, T* out) {
  if (value < low || value > high) {
    return KeyError(key, absl::StrCat(value, " is out of range [", low, ", ", high, "]"));
  }
  *out = static_cast<T>(value);
  return absl::OkStatus();
}

// "auto" -> 0 (the core's "auto"), else a positive size.
absl::Status ParseSize(absl::string_view key, const std::string& text, bool allow_auto, uint64_t* out) {
  if (allow_auto && text == "auto") {
    *out = 0;
    return absl::OkStatus();
  }
  const std::optional<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.has_value() || *bytes == 0) {
    return KeyError(key, absl::StrCat("'", text, "' is not a size such as 4GiB or 512M",
                                      allow_auto ? ", or auto" : "", " (and above 0)"));
  }
  *out = *bytes;
  return absl::OkStatus();
}

// The expert cache: "auto" -> kAutoExpertCache, else a size; unlike the
// budgets, 0 is allowed (no cache: every routed expert comes from disk).
absl::Status ParseExpertCache(const std::string& text, uint64_t* out) {
  if (text == "auto") {
    *out = kAutoExpertCache;
    return absl::OkStatus();
  }
  const std::optional<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.has_value() || *bytes == kAutoExpertCache) {
    return KeyError("expert-cache", absl::StrCat("'", text, "' is not a size such as 4GiB or 512M, 0 or auto"));
  }
  *out = *bytes;
  return absl::OkStatus();
}

// A model directory path relative to the models root that stays inside it.
absl::Status CheckRelativeModelPath(absl::string_view key, const std::string& model) {
  const fs::path path(model);
  if (path.is_absolute()) return KeyError(key, absl::StrCat("'", model, "' must be relative to models-root"));
  for (const fs::path& part : path) {
    if (part == "..") return KeyError(key, absl::StrCat("'", model, "' leaves models-root (..)"));
  }
  return absl::OkStatus();
}

// Where GGUF files are decomposed: --cache-dir, else "<models-root>/.octo-cache"
// when the root is writable, else $XDG_CACHE_HOME/octo (~/.cache/octo).
std::string CacheDir(const OctodFlags& flags, const std::string& models_root) {
  if (!flags.cache_dir.empty()) return fs::absolute(flags.cache_dir).string();
  if (::access(models_root.c_str(), W_OK) == 0) return models_root + "/.octo-cache";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/octo";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && home[0] == '/' ? home : "/tmp") + "/.cache/octo";
}

absl::Status ResolveModel(const OctodFlags& flags, RuntimeOptions& runtime) {
  std::error_code ec;
  if (flags.models_root.empty()) {
    // `--model DIR` or `--model FILE.gguf` alone: serve its folder as the models root.
    if (flags.model.empty()) {
      return KeyError("models-root",
                      "required (the folder that holds models), or give --model DIR or --model FILE.gguf");
    }
    const fs::path model = fs::weakly_canonical(flags.model, ec);
    const bool gguf = absl::EndsWithIgnoreCase(model.string(), ".gguf");
    if (ec || !(gguf ? fs::is_regular_file(model, ec) : fs::is_directory(model, ec))) {
      return absl::NotFoundError(absl::StrCat("model: no ", gguf ? "file " : "directory ", flags.model,
                                              " (and no models-root given)"));
    }
    runtime.models_root = model.parent_path().string();
    runtime.model = model.filename().string();
  } else {
    const fs::path root = fs::weakly_canonical(flags.models_root, ec);
    if (ec || !fs::is_directory(root, ec)) {
      return absl::NotFoundError(absl::StrCat("models-root: no directory ", flags.models_root));
    }
    runtime.models_root = root.string();
    if (!flags.model.empty()) OCTO_RETURN_IF_ERROR(CheckRelativeModelPath("model", flags.model));
    runtime.model = flags.model;
  }
  runtime.cache_dir = CacheDir(flags, runtime.models_root);
  return absl::OkStatus();
}

// "auto", "cuda" or "cpu" (RuntimeOptions::backend).
absl::Status CheckBackend(const std::string& backend) {
  if (backend == "auto" || backend == "cuda" || backend == "cpu") return absl::OkStatus();
  return KeyError("backend", absl::StrCat("'", backend, "' is not one of auto, cuda, cpu"));
}

// A duration ("30m", "1h", "90s") or a number of seconds, not negative.
bool ParseSecondsOrDuration(const std::string& text, absl::Duration* out) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    *out = absl::Seconds(seconds);
    return std::isfinite(seconds) && seconds >= 0;
  }
  return absl::ParseDuration(text, out) && *out >= absl::ZeroDuration();
}

// A duration ("30m", "1h", "90s") or seconds; 0: never.
absl::Status ParseIdleTimeout(const std::string& text, absl::Duration* out) {
  if (!ParseSecondsOrDuration(text, out) || *out > kMaxSessionIdleTimeout) {
    return KeyError("session-idle-timeout",
                    absl::StrCat("'", text, "' is not a duration such as 30m or 2h (0: never; at most ",
                                 absl::FormatDuration(kMaxSessionIdleTimeout), ")"));
  }
  return absl::OkStatus();
}

// How long an idle model stays: a duration ("5m", "1h"), seconds, or
// "forever" / a negative number (Ollama's -1): until room is needed.
absl::Status ParseKeepAlive(const std::string& text, absl::Duration* out) {
  double seconds = 0;
  if (text == "forever" || (absl::SimpleAtod(text, &seconds) && seconds < 0)) {
    *out = absl::InfiniteDuration();
    return absl::OkStatus();
  }
  if (!ParseSecondsOrDuration(text, out)) {
    return KeyError("keep-alive", absl::StrCat("'", text, "' is not a duration such as 5m or 1h, seconds, or forever"));
  }
  return absl::OkStatus();
}

// "auto" (zero: LayerStream derives it) or seconds.
absl::Status ParseLoaderTimeout(const std::string& text, absl::Duration* out) {
  if (text == "auto") {
    *out = absl::ZeroDuration();
    return absl::OkStatus();
  }
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds < kMinLoaderTimeoutSeconds ||
      seconds > kMaxLoaderTimeoutSeconds) {
    return KeyError("loader-timeout", absl::StrCat("'", text, "' is not auto or seconds from ",
                                                   kMinLoaderTimeoutSeconds, " to ", kMaxLoaderTimeoutSeconds));
  }
  *out = absl::Seconds(seconds);
  return absl::OkStatus();
}

// --tls-cert and --tls-key go together, --tls-client-ca with them; each file
// must exist. Warns about a listener beyond loopback without TLS.
absl::Status ReadTlsFlags(const OctodFlags& flags, OctodConfig& config) {
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return KeyError(flags.tls_cert.empty() ? "tls-cert" : "tls-key", "tls-cert and tls-key go together");
  }
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty()) {
    return KeyError("tls-client-ca", "needs tls-cert and tls-key (the server's side of the handshake)");
  }
  for (const auto& [key, path] : {std::pair<const char*, const std::string&>{"tls-cert", flags.tls_cert},
                                  {"tls-key", flags.tls_key}, {"tls-client-ca", flags.tls_client_ca}}) {
    std::error_code ec;
    if (!path.empty() && !fs::is_regular_file(path, ec)) return KeyError(key, absl::StrCat("no file ", path));
  }
  if (!flags.tls_cert.empty()) {
    config.tls = TlsFiles{.cert = flags.tls_cert, .key = flags.tls_key, .client_ca = flags.tls_client_ca};
    if (config.listen.empty() && !config.http.has_value()) {
      config.warnings.push_back("tls-cert is set but nothing listens beyond the unix socket (--listen, --http-listen)");
    }
    return absl::OkStatus();
  }
  const absl::StatusOr<HttpListenAddress> tcp = ParseHttpListen(config.listen);  // the same host:port form
  if (!config.listen.empty() && !(tcp.ok() && tcp->loopback)) {
    config.warnings.push_back(absl::StrCat("listen ", config.listen,
                                           " is reachable from other machines without TLS: tokens and prompts "
                                           "travel in clear (--tls-cert, --tls-key)"));
  }
  if (config.http.has_value() && !config.http->loopback) {
    config.warnings.push_back(absl::StrCat("http-listen ", flags.http_listen,
                                           " is reachable from other machines without TLS: tokens and prompts "
                                           "travel in clear (--tls-cert, --tls-key)"));
  }
  return absl::OkStatus();
}

absl::Status ResolveLoader(const std::string& loader, std::string* out) {
  std::error_code ec;
  if (loader.empty()) {
    // The octo-loader installed beside this executable; the Runtime reports
    // it if it is missing when it needs it.
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    *out = ec ? std::string("octo-loader") : (self.parent_path() / "octo-loader").string();
    return absl::OkStatus();
  }
  if (!fs::is_regular_file(loader, ec)) return absl::NotFoundError(absl::StrCat("loader: no file ", loader));
  if (::access(loader.c_str(), X_OK) != 0) return KeyError("loader", absl::StrCat(loader, " is not executable"));
  *out = fs::absolute(loader, ec).string();
  return absl::OkStatus();
}

}  // namespace

void AddOctodFlags(CLI::App& app, OctodFlags& flags) {
  app.set_config("--config", "", "Config file (TOML/INI: key = value, keys are the long flag names)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_option("--models-root", flags.models_root, "Directory holding model directories (LoadModel paths are inside it)");
  app.add_option("--model", flags.model,
                 "Model to load at start: a layer directory or a .gguf file (relative to models-root; or a path "
                 "alone, whose folder becomes the models root)");
  app.add_option("--cache-dir", flags.cache_dir,
                 "Where GGUF files are decomposed on first load (default: <models-root>/.octo-cache when "
                 "writable, else $XDG_CACHE_HOME/octo)");
  app.add_option("--loader", flags.loader, "The octo-loader executable (default: beside octod)");
  app.add_option("-t,--threads", flags.threads, "CPU backend threads (0: one per core)");
  app.add_flag("--portable", flags.portable, "Portable CPU kernels, no AVX2");
  app.add_option("--backend", flags.backend, "auto (CUDA when a device is usable, else the CPU), cuda or cpu");
  app.add_option("--gpu", flags.gpu, "CUDA device index");
  app.add_option("--vram-budget", flags.vram_budget,
                 absl::StrCat("VRAM tier (CUDA): device-resident layers + staging buffers, SIZE or auto (free VRAM "
                              "at load minus the KV cache, workspaces and a ",
                              FormatByteSize(kVramReserveBytes), " reserve)"));
  app.add_option("--staging-buffers", flags.staging_buffers,
                 "CUDA: device staging buffers the other layers are copied through (the prefetch depth)");
  app.add_flag("--cuda-graphs,!--no-cuda-graphs", flags.cuda_graphs,
               "CUDA: replay each decode step as one CUDA graph (default on; off: launch by launch)");
  app.add_option("--pin-first", flags.pin_first, "First layers always resident");
  app.add_option("--pin-last", flags.pin_last, "Last layers always resident");
  app.add_option("--layer-budget", flags.layer_budget, "Layer memory (resident layers + ring), SIZE or auto");
  app.add_option("--memory-limit", flags.memory_limit, "Memory the auto budget may fill, SIZE or auto (half of MemAvailable)");
  app.add_option("--ring-slots", flags.ring_slots, "Ring slots for streamed layers (2: double buffering)");
  app.add_option("--expert-cache", flags.expert_cache,
                 "MoE models streaming their experts selectively: experts kept in memory, out of the layer "
                 "budget, SIZE, 0 (none) or auto (half of what the pinned layers and the ring leave)");
  app.add_flag("--direct-io,!--no-direct-io", flags.direct_io, "Read layer files with O_DIRECT (default on)");
  app.add_option("--loader-timeout", flags.loader_timeout,
                 absl::StrCat("Seconds outstanding reads may go without a completion before octo-loader counts as "
                              "hung and is restarted; auto: the largest layer at ",
                              kLoaderFloorBytesPerSecond / 1e6, " MB/s plus ",
                              absl::FormatDuration(kLoaderStallMargin)));
  app.add_option("--kv-budget", flags.kv_budget, "KV cache memory for all sessions together, SIZE");
  app.add_option("--cache-type-k", flags.cache_type_k,
                 absl::StrCat("The KV cache's keys: ", kKvCacheTypeNames,
                              " (q8_0 holds about twice the context of f16 in the same budget, q4_0 about 3.6 times)"));
  app.add_option("--cache-type-v", flags.cache_type_v, absl::StrCat("The KV cache's values: ", kKvCacheTypeNames));
  app.add_option("--session-context", flags.session_context, "Positions of a new session that asks for none (a one-shot request may use the model's whole context)");
  app.add_option("--max-sessions", flags.max_sessions, "Most sessions open at once");
  app.add_option("--max-loaded-models", flags.max_loaded_models,
                 "Models held at once; a request for another loads it, unloading idle ones (least recently used "
                 "first) when this or the shared budgets need their room");
  app.add_option("--keep-alive", flags.keep_alive,
                 "How long an idle model stays loaded (5m, 1h, seconds; forever: until room is needed); a "
                 "request's keep_alive (Ollama) sets its model's");
  app.add_flag("--log-requests,!--no-log-requests", flags.log_requests,
               "A log line per generation request: what asked, model, tokens, time, outcome (default on)");
  app.add_option("--session-idle-timeout", flags.session_idle_timeout,
                 "Close sessions unused this long (30m, 2h, seconds; 0: never)");
  app.add_flag("--evict-idle-sessions", flags.evict_idle_sessions,
               "When the KV budget is full, evict the longest-idle session instead of refusing");
  app.add_option("--prefill-chunk", flags.prefill_chunk, "Prompt tokens per session per forward pass");
  app.add_option("--embed-batch-tokens", flags.embed_batch_tokens,
                 "Embedding inputs' tokens one forward pass may carry, besides the generations' (one read of each "
                 "streamed layer embeds them all)");
  app.add_option("--draft-model", flags.draft_model,
                 "Speculative decoding: a small model (relative to models-root, kept resident, the same "
                 "vocabulary) that proposes tokens the model verifies in one pass; none: off");
  app.add_option("--draft-max", flags.draft_max,
                 absl::StrCat("Most tokens a draft proposes per session per pass (1..", kMaxDraftTokens,
                              "); adapts down to --draft-min with the acceptance"));
  app.add_option("--draft-min", flags.draft_min, "Fewest tokens a draft proposes while it drafts at all");
  app.add_option("--draft-tree", flags.draft_tree,
                 absl::StrCat("Greedy requests: draft a tree of up to N tokens per session per pass, verified in "
                              "one pass (0: linear drafts; at most ", kMaxDraftTreeNodes, ")"));
  app.add_option("--draft-branches", flags.draft_branches, "Draft trees: the most children of one token");
  app.add_option("--socket", flags.socket, "Unix socket path (default: $XDG_RUNTIME_DIR/octo/octod.sock, /run/octo as root)");
  app.add_option("--listen", flags.listen, "Also listen on TCP host:port (needs --token-file)");
  app.add_option("--token-file", flags.token_file,
                 "File holding the bearer tokens TCP and HTTP clients send, one per line, each its own credential "
                 "(its sessions are its own); not world-readable");
  app.add_option("--admin-token-file", flags.admin_token_file,
                 "File holding the admin token: over TCP and HTTP, loading, unloading and residency need it, "
                 "and it sees every session in status");
  app.add_option("--tls-cert", flags.tls_cert, "TLS for --listen and --http-listen: the server's certificate (PEM)");
  app.add_option("--tls-key", flags.tls_key, "TLS: the certificate's private key (PEM)");
  app.add_option("--tls-client-ca", flags.tls_client_ca,
                 "Mutual TLS: clients must present a certificate this CA signed (PEM)");
  app.add_option("--http-cors-origins", flags.http_cors_origins,
                 "Web origins (besides localhost's and desktop apps') whose browser pages may call the HTTP API, "
                 "comma-separated, '*' a wildcard: https://chat.example.com,chrome-extension://*")
      ->delimiter(',');
  app.add_flag("--http-metrics,!--no-http-metrics", flags.http_metrics,
               "GET /metrics on the HTTP API: Prometheus's text format, names prefixed octo_");
  app.add_option("--http-listen", flags.http_listen,
                 "Serve the OpenAI and Ollama HTTP API on host:port (off by default; a token-file is required "
                 "unless the host is loopback, and is checked whenever given)");
}

absl::StatusOr<OctodConfig> ValidateOctodFlags(const OctodFlags& flags) {
  OctodConfig config;
  RuntimeOptions& runtime = config.runtime;
  OCTO_RETURN_IF_ERROR(ResolveModel(flags, runtime));
  OCTO_RETURN_IF_ERROR(ResolveLoader(flags.loader, &runtime.loader_path));
  OCTO_RETURN_IF_ERROR(CheckRange("threads", flags.threads, 0, kMaxThreads, &runtime.n_threads));
  runtime.allow_simd = !flags.portable;
  runtime.cuda_graphs = flags.cuda_graphs;
  OCTO_RETURN_IF_ERROR(CheckBackend(flags.backend));
  runtime.backend = flags.backend;
  OCTO_RETURN_IF_ERROR(CheckRange("gpu", flags.gpu, 0, kMaxGpuIndex, &runtime.gpu));
  OCTO_RETURN_IF_ERROR(ParseSize("vram-budget", flags.vram_budget, /*allow_auto=*/true, &runtime.vram_budget_bytes));
  OCTO_RETURN_IF_ERROR(CheckRange("staging-buffers", flags.staging_buffers, kMinStagingBuffers, kMaxStagingBuffers,
                                  &runtime.staging_buffers));
  OCTO_RETURN_IF_ERROR(CheckRange("pin-first", flags.pin_first, 0, kMaxPinnedLayers, &runtime.pin_first));
  OCTO_RETURN_IF_ERROR(CheckRange("pin-last", flags.pin_last, 0, kMaxPinnedLayers, &runtime.pin_last));
  OCTO_RETURN_IF_ERROR(ParseSize("layer-budget", flags.layer_budget, /*allow_auto=*/true, &runtime.layer_budget_bytes));
  OCTO_RETURN_IF_ERROR(ParseSize("memory-limit", flags.memory_limit, /*allow_auto=*/true, &runtime.auto_budget_bytes));
  OCTO_RETURN_IF_ERROR(CheckRange("ring-slots", flags.ring_slots, 1, kMaxRingSlots, &runtime.ring_slots));
  OCTO_RETURN_IF_ERROR(ParseExpertCache(flags.expert_cache, &runtime.expert_cache_bytes));
  runtime.direct_io = flags.direct_io;
  OCTO_RETURN_IF_ERROR(ParseLoaderTimeout(flags.loader_timeout, &runtime.loader_timeout));
  OCTO_RETURN_IF_ERROR(ParseIdleTimeout(flags.session_idle_timeout, &runtime.session_idle_timeout));
  runtime.log_requests = flags.log_requests;
  OCTO_RETURN_IF_ERROR(ParseSize("kv-budget", flags.kv_budget, /*allow_auto=*/false, &runtime.kv_budget_bytes));
  OCTO_ASSIGN_OR_RETURN(runtime.kv_types.k, ParseKvCacheType("cache-type-k", flags.cache_type_k));
  OCTO_ASSIGN_OR_RETURN(runtime.kv_types.v, ParseKvCacheType("cache-type-v", flags.cache_type_v));
  OCTO_RETURN_IF_ERROR(
      CheckRange("session-context", flags.session_context, 1, kMaxSessionContext, &runtime.session_context));
  OCTO_RETURN_IF_ERROR(CheckRange("max-sessions", flags.max_sessions, 1, kMaxSessions, &runtime.max_sessions));
  OCTO_RETURN_IF_ERROR(CheckRange("max-loaded-models", flags.max_loaded_models, 1, kMaxLoadedModels,
                                  &runtime.max_loaded_models));
  OCTO_RETURN_IF_ERROR(ParseKeepAlive(flags.keep_alive, &runtime.keep_alive));
  OCTO_RETURN_IF_ERROR(CheckRange("prefill-chunk", flags.prefill_chunk, 1, kMaxPrefillChunk, &runtime.prefill_chunk));
  OCTO_RETURN_IF_ERROR(
      CheckRange("embed-batch-tokens", flags.embed_batch_tokens, 1, kMaxPrefillChunk, &runtime.embed_batch_tokens));
  runtime.evict_idle_sessions = flags.evict_idle_sessions;
  if (!flags.draft_model.empty() && flags.draft_model != kNoDraftModel) {
    OCTO_RETURN_IF_ERROR(CheckRelativeModelPath("draft-model", flags.draft_model));
    runtime.draft_model = flags.draft_model;
  }
  SpeculationSettings& spec = runtime.speculation;
  OCTO_RETURN_IF_ERROR(CheckRange("draft-max", flags.draft_max, 1, kMaxDraftTokens, &spec.draft_max));
  OCTO_RETURN_IF_ERROR(CheckRange("draft-min", flags.draft_min, 1, spec.draft_max, &spec.draft_min));
  OCTO_RETURN_IF_ERROR(CheckRange("draft-tree", flags.draft_tree, 0, kMaxDraftTreeNodes, &spec.tree_nodes));
  OCTO_RETURN_IF_ERROR(CheckRange("draft-branches", flags.draft_branches, 1, kMaxDraftTreeNodes, &spec.tree_branches));

  config.socket_path = flags.socket.empty() ? DefaultSocketPath() : flags.socket;
  std::error_code ec;
  config.socket_path = fs::absolute(config.socket_path, ec).lexically_normal().string();
  if (absl::Status length = CheckUnixSocketPathLength(config.socket_path); !length.ok()) {
    return KeyError("socket", length.message());
  }
  if (!flags.listen.empty()) {
    if (absl::Status address = CheckListenAddress(flags.listen); !address.ok()) {
      return KeyError("listen", address.message());
    }
    if (flags.token_file.empty() && flags.admin_token_file.empty()) {
      return KeyError("token-file", "required with listen (TCP callers need a token)");
    }
    config.listen = flags.listen;
  }
  std::vector<std::string> tokens;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> read = ReadTokenFile(flags.token_file);
    if (!read.ok()) return Annotate(read.status(), "token-file");
    tokens = *std::move(read);
  }
  std::optional<std::string> admin_token;
  if (!flags.admin_token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> read = ReadTokenFile(flags.admin_token_file);
    if (!read.ok()) return Annotate(read.status(), "admin-token-file");
    if (read->size() != 1) return KeyError("admin-token-file", "must hold exactly one token");
    for (const std::string& token : tokens) {
      if (token == read->front()) return KeyError("admin-token-file", "its token is also in token-file");
    }
    admin_token = read->front();
  }
  config.credentials = Credentials(std::move(tokens), std::move(admin_token));
  if (!flags.http_listen.empty()) {
    absl::StatusOr<HttpListenAddress> http = ParseHttpListen(flags.http_listen);
    if (!http.ok()) return KeyError("http-listen", http.status().message());
    if (!http->loopback && !config.credentials.any()) {
      return KeyError("http-listen", absl::StrCat("'", flags.http_listen,
                                                  "' is reachable from other machines: give a token-file too"));
    }
    config.http = *std::move(http);
  }
  if (absl::Status origins = CheckCorsOrigins(flags.http_cors_origins); !origins.ok()) {
    return KeyError("http-cors-origins", origins.message());
  }
  config.http_metrics = flags.http_metrics;
  config.http_cors_origins = DefaultCorsOrigins();
  config.http_cors_origins.insert(config.http_cors_origins.end(), flags.http_cors_origins.begin(),
                                  flags.http_cors_origins.end());
  OCTO_RETURN_IF_ERROR(ReadTlsFlags(flags, config));
  return config;
}

absl::StatusOr<OctodConfig> ParseOctodConfig(const std::vector<std::string>& args) {
  CLI::App app{"octod"};
  OctodFlags flags;
  AddOctodFlags(app, flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return ValidateOctodFlags(flags);
}

}  // namespace octo
