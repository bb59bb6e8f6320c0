// GET /metrics: octod in Prometheus's text format (version 0.0.4), every
// name prefixed octo_, on the HTTP listener (octod --no-http-metrics turns
// it off). It needs the token when one is configured, as every route but
// /health does.
//
//   octo_http_requests_total{route,code}        requests answered, by route pattern and status
//   octo_requests_total{outcome}                generations ended: ok, error
//   octo_prompt_tokens_total, octo_prompt_tokens_cached_total, octo_generated_tokens_total
//   octo_time_to_first_token_seconds            histogram: queue + prompt, per generation
//   octo_inter_token_latency_seconds            histogram: decode time per gap between tokens
//   octo_jobs{state}                            running, waiting (no pass yet)
//   octo_sessions, octo_kv_cache_bytes{kind}    used, budget
//   octo_passes_total, octo_uptime_seconds, octo_tokens_per_second
//   octo_model_info{model,architecture,backend} 1 while a model is loaded; then, for it:
//   octo_layer_bytes{tier}                      resident (VRAM or host RAM), streamed
//   octo_loader_read_bytes_total, octo_loader_read_gigabytes_per_second,
//   octo_loader_restarts_total, octo_copy_compute_overlap_ratio
//   octo_expert_cache_total{result}             hit, miss (selective MoE experts)
//   octo_draft_tokens_total{kind}               proposed, accepted (speculative decoding)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "daemon/core/runtime.h"
#include "daemon/http/http_server.h"

namespace octo {

// Requests answered, by route pattern and HTTP status; HttpConnection counts
// each exchange here.
class HttpRequestCounts {
 public:
  void Count(const std::string& route, int status);
  std::map<std::pair<std::string, int>, uint64_t> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// The exposition text of `report` and `requests`.
std::string MetricsText(const RuntimeReport& report, const HttpRequestCounts& requests);

// GET /metrics over `runtime` (which outlives the router) and `requests`.
void AddMetricsRoute(HttpRouter& router, Runtime& runtime, std::shared_ptr<const HttpRequestCounts> requests);

}  // namespace octo
