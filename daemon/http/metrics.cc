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

// Each loaded model's figures, labelled model="NAME".
void ModelMetrics(const RuntimeReport& r, Exposition& out) {
  auto each = [&](absl::string_view name, absl::string_view type, absl::string_view help, absl::string_view labels,
                  auto value) {
    out.Family(name, type, help);
    for (const LoadedModelReport& m : r.models) {
      const std::string model = absl::StrCat("model=\"", Label(m.summary.path), "\"");
      out.Sample(name, labels.empty() ? model : absl::StrCat(model, ",", labels), static_cast<double>(value(m)));
    }
  };
  out.Family("octo_model_info", "gauge",
             "Each loaded model (1), its architecture and backend; default=\"true\" for the one requests naming "
             "none run on.");
  for (const LoadedModelReport& m : r.models) {
    out.Sample("octo_model_info",
               absl::StrCat("model=\"", Label(m.summary.path), "\",architecture=\"", Label(m.summary.architecture),
                            "\",backend=\"", Label(m.backend), "\",default=\"", m.is_default ? "true" : "false", "\""),
               1);
  }
  out.Family("octo_layer_bytes", "gauge", "Each loaded model's layer bytes: kept resident (VRAM or RAM), streamed.");
  for (const LoadedModelReport& m : r.models) {
    const std::string model = absl::StrCat("model=\"", Label(m.summary.path), "\"");
    out.Sample("octo_layer_bytes", absl::StrCat(model, ",tier=\"resident\""), static_cast<double>(m.resident_layer_bytes));
    out.Sample("octo_layer_bytes", absl::StrCat(model, ",tier=\"streamed\""), static_cast<double>(m.streamed_layer_bytes));
  }
  out.Family("octo_model_memory_bytes", "gauge", "What each loaded model holds: RAM (layers, ring, whole-model tensors), VRAM.");
  for (const LoadedModelReport& m : r.models) {
    const std::string model = absl::StrCat("model=\"", Label(m.summary.path), "\"");
    const DeviceReport& d = m.residency.device;
    out.Sample("octo_model_memory_bytes", absl::StrCat(model, ",memory=\"ram\""),
               static_cast<double>(m.residency.held_bytes + m.residency.global_bytes));
    out.Sample("octo_model_memory_bytes", absl::StrCat(model, ",memory=\"vram\""),
               static_cast<double>(d.present ? d.held_bytes + d.global_bytes : 0));
  }
  each("octo_model_jobs", "gauge", "Generations and embedding inputs running or waiting, by model.", "",
       [](const LoadedModelReport& m) { return m.jobs; });
  each("octo_loader_read_bytes_total", "counter", "Bytes each model's octo-loader read from disk.", "",
       [](const LoadedModelReport& m) { return m.loader.bytes_read; });
  each("octo_loader_read_gigabytes_per_second", "gauge", "Each model's loader's recent read rate.", "",
       [](const LoadedModelReport& m) { return m.loader.read_gbps; });
  each("octo_loader_restarts_total", "counter", "octo-loader restarts (dead or hung), by model.", "",
       [](const LoadedModelReport& m) { return m.loader.restarts; });
  each("octo_copy_compute_overlap_ratio", "gauge", "Share of each model's loader time hidden behind compute.", "",
       [](const LoadedModelReport& m) { return m.overlap; });
  out.Family("octo_expert_cache_total", "counter", "Selective MoE expert lookups in each model's expert cache.");
  for (const LoadedModelReport& m : r.models) {
    const std::string model = absl::StrCat("model=\"", Label(m.summary.path), "\"");
    const ExpertReport& e = m.residency.experts;
    out.Sample("octo_expert_cache_total", absl::StrCat(model, ",result=\"hit\""), static_cast<double>(e.cache_hits));
    out.Sample("octo_expert_cache_total", absl::StrCat(model, ",result=\"miss\""), static_cast<double>(e.cache_misses));
  }
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
  if (!r.models.empty()) ModelMetrics(r, out);
  return out.Take();
}

void AddMetricsRoute(HttpRouter& router, Runtime& runtime, std::shared_ptr<const HttpRequestCounts> requests) {
  router.Add("GET", "/metrics", [&runtime, requests](const HttpRequest&, HttpExchange& exchange) {
    exchange.ReplyText(200, "text/plain; version=0.0.4; charset=utf-8", MetricsText(runtime.Report(), *requests));
  });
}

}  // namespace octo
