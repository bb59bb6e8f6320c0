// octod's configuration: every RuntimeOptions field plus where to listen,
// from a config file and command-line flags (a flag wins over the file).
//
// The file (--config FILE) is TOML or INI, one `key = value` per line, with
// the long flag names as keys and no sections:
//
//   models-root = "/var/lib/octo/models"
//   model = "llama-3.2-1b"
//   layer-budget = "4GiB"     # or "auto"
//   ring-slots = 3
//   direct-io = false
//   backend = "cuda"
//   vram-budget = "60GiB"     # or "auto"
//   expert-cache = "8GiB"     # or "auto"; MoE models streaming their experts
//   draft-model = "tiny-draft"  # speculative decoding (relative to models-root)
//
// An unknown key is an error, as is every out-of-range value: the message
// starts with the key ("ring-slots: 0 is out of range [1, 16]"). Sizes are
// written as storage/byte_size.h reads them ("4GiB", "512M", "1.5G").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/residency_plan.h"  // kMaxRingSlots
#include "daemon/core/runtime.h"
#include "daemon/http/cors.h"
#include "daemon/http/listen_address.h"
#include "daemon/http/tls_context.h"
#include "daemon/server/credentials.h"

namespace CLI {
class App;
}

namespace octo {

// Ranges of the numeric settings (inclusive).
inline constexpr int64_t kMaxThreads = 1024;
inline constexpr int64_t kMaxPinnedLayers = 1 << 16;
inline constexpr int64_t kMaxSessionContext = 1 << 24;
inline constexpr int64_t kMaxSessions = 1 << 16;
inline constexpr int64_t kMaxLoadedModels = 64;
inline constexpr int64_t kMaxPrefillChunk = 1 << 16;
inline constexpr int64_t kMaxGpuIndex = 63;
inline constexpr int64_t kMinStagingBuffers = 2;  // double buffering: copy one while computing the other
inline constexpr int64_t kMaxStagingBuffers = 16;
// --loader-timeout in seconds, when not auto.
inline constexpr double kMinLoaderTimeoutSeconds = 0.1;
inline constexpr double kMaxLoaderTimeoutSeconds = 3600;
// --session-idle-timeout: at most a week (0: never).
inline constexpr absl::Duration kMaxSessionIdleTimeout = absl::Hours(24 * 7);

// The settings as written, before validation.
struct OctodFlags {
  std::string models_root;
  std::string model;
  std::string cache_dir;
  std::string loader;
  int64_t threads = 0;
  bool portable = false;
  std::string backend = "auto";
  int64_t gpu = 0;
  std::string vram_budget = "auto";
  int64_t staging_buffers = 3;  // kDefaultStagingBuffers
  bool cuda_graphs = true;
  int64_t pin_first = 1;
  int64_t pin_last = 1;
  std::string layer_budget = "auto";
  std::string memory_limit = "auto";
  int64_t ring_slots = 2;
  std::string expert_cache = "auto";
  bool direct_io = true;
  std::string loader_timeout = "auto";
  std::string session_idle_timeout = "1h";
  bool log_requests = true;
  std::string kv_budget = "1GiB";
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  int64_t session_context = 4096;
  int64_t max_sessions = 64;
  int64_t max_loaded_models = 3;
  std::string keep_alive = "forever";
  bool evict_idle_sessions = false;
  int64_t prefill_chunk = 512;
  int64_t embed_batch_tokens = 2048;
  std::string draft_model;
  int64_t draft_max = 8;
  int64_t draft_min = 1;
  int64_t draft_tree = 0;
  int64_t draft_branches = 2;
  std::string socket;
  std::string listen;
  std::string token_file;
  std::string admin_token_file;
  std::string http_listen;
  std::vector<std::string> http_cors_origins;
  bool http_metrics = true;
  std::string tls_cert, tls_key, tls_client_ca;
};

struct OctodConfig {
  RuntimeOptions runtime;
  std::string socket_path;           // absolute
  std::string listen;                // "host:port"; empty: no TCP
  Credentials credentials;            // token_file's and admin_token_file's; some whenever listen is
  // The HTTP API (daemon/http); unset: off. Not loopback -> token is set.
  std::optional<HttpListenAddress> http;
  // The origins whose browser pages may call it: cors.h's defaults and
  // --http-cors-origins.
  std::vector<std::string> http_cors_origins;
  bool http_metrics = true;  // GET /metrics on it (daemon/http/metrics.h)
  // TLS for `listen` and `http` (the unix socket stays plain); unset: none.
  std::optional<TlsFiles> tls;
  // Lines to log at start: listening beyond loopback without TLS.
  std::vector<std::string> warnings;
};

// Registers every setting on `app` as a flag (and so a config-file key),
// plus --config FILE. `flags` must outlive the parse.
void AddOctodFlags(CLI::App& app, OctodFlags& flags);

// Checks every value (INVALID_ARGUMENT starting with the key; NOT_FOUND for
// a path that does not exist) and fills defaults: the socket path
// (endpoint.h), the loader next to this executable.
absl::StatusOr<OctodConfig> ValidateOctodFlags(const OctodFlags& flags);

// Parses `args` (without the program name) as octod would, then validates.
// A parse error (unknown flag or key, unreadable config file, a number that
// is not one) is INVALID_ARGUMENT with CLI11's message.
absl::StatusOr<OctodConfig> ParseOctodConfig(const std::vector<std::string>& args);

}  // namespace octo
