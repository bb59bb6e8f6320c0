#include "daemon/http/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace octo {
namespace {

// A label value as the format wants it: \ " and newline escaped.
std::string Label(absl::string_view value) {
  return absl::StrReplaceAll(value, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string Number(double value) { return absl::StrFormat("%.17g", value); }

class Exposition {
 public:
  // # HELP and # TYPE, once per family.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Sample(absl::string_view name, absl::string_view labels, double value) {
    absl::StrAppend(&text_, name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ", Number(value), "\n");
  }
  void One(absl::string_view name, absl::string_view type, absl::string_view help, double value) {
    Family(name, type, help);
    Sample(name, "", value);
  }
  void Histo(absl::string_view name, absl::string_view help, const Histogram& h) {
    Family(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      Sample(absl::StrCat(name, "_bucket"), absl::StrCat("le=\"", Number(h.bounds[i]), "\""),
             static_cast<double>(cumulative));
    }
    Sample(absl::StrCat(name, "_bucket"), "le=\"+Inf\"", static_cast<double>(h.count));
    Sample(absl::StrCat(name, "_sum"), "", h.sum);
    Sample(absl::StrCat(name, "_count"), "", static_cast<double>(h.count));
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

void ModelMetrics(const RuntimeReport& r, Exposition& out) {
  out.Family("octo_model_info", "gauge", "The loaded model (1), its architecture and backend.");
  out.Sample("octo_model_info",
             absl::StrCat("model=\"", Label(r.model->path), "\",architecture=\"", Label(r.model->architecture),
                          "\",backend=\"", Label(r.backend), "\""),
             1);
  uint64_t resident = 0, streamed = 0;
  for (const LayerReport& layer : r.layers) (layer.resident ? resident : streamed) += layer.bytes;
  out.Family("octo_layer_bytes", "gauge", "The loaded model's layer bytes: kept resident (VRAM or RAM), streamed.");
  out.Sample("octo_layer_bytes", "tier=\"resident\"", static_cast<double>(resident));
  out.Sample("octo_layer_bytes", "tier=\"streamed\"", static_cast<double>(streamed));
  out.One("octo_loader_read_bytes_total", "counter", "Bytes octo-loader read from disk.",
          static_cast<double>(r.loader.bytes_read));
  out.One("octo_loader_read_gigabytes_per_second", "gauge", "octo-loader's recent read rate.", r.loader.read_gbps);
  out.One("octo_loader_restarts_total", "counter", "octo-loader restarts (dead or hung).",
          static_cast<double>(r.loader.restarts));
  out.One("octo_copy_compute_overlap_ratio", "gauge", "Share of the loader's time hidden behind compute.", r.overlap);
  const ExpertReport& e = r.residency.experts;
  out.Family("octo_expert_cache_total", "counter", "Selective MoE expert lookups in the expert cache.");
  out.Sample("octo_expert_cache_total", "result=\"hit\"", static_cast<double>(e.cache_hits));
  out.Sample("octo_expert_cache_total", "result=\"miss\"", static_cast<double>(e.cache_misses));
  out.Family("octo_draft_tokens_total", "counter", "Speculative decoding: draft tokens proposed and accepted.");
  out.Sample("octo_draft_tokens_total", "kind=\"proposed\"", static_cast<double>(r.speculation.proposed));
  out.Sample("octo_draft_tokens_total", "kind=\"accepted\"", static_cast<double>(r.speculation.accepted));
}

}  // namespace

void HttpRequestCounts::Count(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[{route, status}];
}

std::map<std::pair<std::string, int>, uint64_t> HttpRequestCounts::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::string MetricsText(const RuntimeReport& r, const HttpRequestCounts& requests) {
  Exposition out;
  out.Family("octo_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
  for (const auto& [key, count] : requests.Snapshot()) {
    out.Sample("octo_http_requests_total", absl::StrCat("route=\"", Label(key.first), "\",code=\"", key.second, "\""),
               static_cast<double>(count));
  }
  const JobTotals& j = r.jobs;
  out.Family("octo_requests_total", "counter", "Generations ended (HTTP and gRPC), by outcome.");
  out.Sample("octo_requests_total", "outcome=\"ok\"", static_cast<double>(j.ok));
  out.Sample("octo_requests_total", "outcome=\"error\"", static_cast<double>(j.failed));
  out.One("octo_prompt_tokens_total", "counter", "Prompt tokens of ended generations.",
          static_cast<double>(j.prompt_tokens));
  out.One("octo_prompt_tokens_cached_total", "counter", "... of which a session's cache already held.",
          static_cast<double>(j.cached_tokens));
  out.One("octo_generated_tokens_total", "counter", "Tokens generated by ended generations.",
          static_cast<double>(j.generated_tokens));
  out.Histo("octo_time_to_first_token_seconds", "Queue and prompt time before a generation's first token.",
            j.time_to_first_token);
  out.Histo("octo_inter_token_latency_seconds", "Decode time between a generation's tokens.", j.inter_token);
  out.Family("octo_jobs", "gauge", "Generations in the scheduler: running, waiting for their first pass.");
  out.Sample("octo_jobs", "state=\"running\"", r.jobs_running);
  out.Sample("octo_jobs", "state=\"waiting\"", r.jobs_waiting);
  out.One("octo_sessions", "gauge", "Open sessions.", static_cast<double>(r.sessions.size()));
  out.Family("octo_kv_cache_bytes", "gauge", "KV cache bytes held by every sequence, and the budget.");
  out.Sample("octo_kv_cache_bytes", "kind=\"used\"", static_cast<double>(r.kv_used_bytes));
  out.Sample("octo_kv_cache_bytes", "kind=\"budget\"", static_cast<double>(r.kv_budget_bytes));
  out.One("octo_passes_total", "counter", "Forward passes run.", static_cast<double>(r.passes));
  out.One("octo_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", r.tokens_per_second);
  out.One("octo_uptime_seconds", "gauge", "Seconds since octod started.", r.uptime_seconds);
  if (r.model.has_value()) ModelMetrics(r, out);
  return out.Take();
}

void AddMetricsRoute(HttpRouter& router, Runtime& runtime, std::shared_ptr<const HttpRequestCounts> requests) {
  router.Add("GET", "/metrics", [&runtime, requests](const HttpRequest&, HttpExchange& exchange) {
    exchange.ReplyText(200, "text/plain; version=0.0.4; charset=utf-8", MetricsText(runtime.Report(), *requests));
  });
}

}  // namespace octo
