#include "client/status_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"
#include "storage/byte_size.h"

namespace octo {
namespace {

// Layers per line of the residency map.
constexpr size_t kMapWidth = 64;

std::string Duration(double seconds) {
  const uint64_t total = static_cast<uint64_t>(seconds);
  if (total < 60) return absl::StrFormat("%.0fs", seconds);
  if (total < 3600) return absl::StrFormat("%um %02us", total / 60, total % 60);
  return absl::StrFormat("%uh %02um", total / 3600, (total / 60) % 60);
}

// Milliseconds, or "-" when never measured.
std::string Millis(double seconds) { return seconds > 0 ? absl::StrFormat("%.2f", seconds * 1e3) : "-"; }

std::string ModelLine(const v1::ModelInfo& model) {
  return absl::StrFormat("%s (%s): %s, %u layers, dim %u, vocab %u, context %u%s, %s%s", model.name(), model.path(),
                         model.architecture(), model.n_layers(), model.dim(), model.vocab_size(),
                         model.context_length(),
                         model.n_experts() > 0 ? absl::StrFormat(", %u experts", model.n_experts()) : "",
                         FormatByteSize(model.total_bytes()),
                         model.chat_template().empty() ? "" : absl::StrCat(", chat ", model.chat_template()));
}

// The per-layer table. With a device (CUDA) each row also has the layer's
// host-to-device copy time and how long the compute stream waited for it.
void AppendLayerTable(const v1::GetStatusResponse& status, std::string& out) {
  const bool device = status.residency().device().present();
  absl::StrAppend(&out, "layers\n");
  absl::StrAppendFormat(&out, "  %5s  %-5s  %-4s  %10s  %7s  %8s  %8s  %10s", "LAYER", "STATE", "TIER", "BYTES",
                        "LOADS", "LOAD ms", "WAIT ms", "COMPUTE ms");
  absl::StrAppend(&out, device ? absl::StrFormat("  %8s  %12s", "COPY ms", "COPY WAIT ms") : "", "\n");
  for (const v1::LayerStatus& layer : status.layers()) {
    const char* state = layer.pinned() ? "P" : layer.resident() ? "R" : "S";
    absl::StrAppendFormat(&out, "  %5u  %-5s  %-4s  %10s  %7u  %8s  %8s  %10s", layer.layer(), state,
                          layer.tier().empty() ? "-" : layer.tier(), FormatByteSize(layer.bytes()), layer.loads(),
                          Millis(layer.load_seconds()), Millis(layer.load_wait_seconds()),
                          Millis(layer.compute_seconds()));
    absl::StrAppend(&out,
                    device ? absl::StrFormat("  %8s  %12s", Millis(layer.copy_seconds()),
                                             Millis(layer.copy_wait_seconds()))
                           : "",
                    "\n");
  }
}

// The VRAM tier in three lines: the device, what octod holds on it, and the
// host-to-device layer copies.
std::string FormatDevice(const v1::DeviceStatus& d) {
  return absl::StrFormat(
      "device      cuda:%d %s; VRAM %s total, %s free\n"
      "vram        %u layers; held %s, peak %s, budget %s%s; staging %u x %s\n"
      "            globals %s, kv cache %s, workspaces %s\n"
      "h2d copies  %s at %.1f GB/s, overlap %.0f%%%s\n"
      "graphs      %u stretches replayed as a CUDA graph, %u captured, %u launch by launch; %s\n",
      d.index(), d.name().empty() ? "(unnamed)" : d.name(), FormatByteSize(d.total_bytes()),
      FormatByteSize(d.free_bytes()), d.device_layers(), FormatByteSize(d.held_bytes()),
      FormatByteSize(d.peak_bytes()), FormatByteSize(d.budget_bytes()), d.auto_budget() ? " (auto)" : "",
      d.staging_buffers(), FormatByteSize(d.staging_bytes()), FormatByteSize(d.global_bytes()),
      FormatByteSize(d.kv_bytes()), FormatByteSize(d.workspace_bytes()), FormatByteSize(d.copied_bytes()),
      d.h2d_gbps(), d.overlap() * 100,
      d.timing_every() > 1 ? absl::StrCat("; times from one pass in ", d.timing_every()) : "", d.graph_replays(),
      d.graph_captures(), d.eager_stretches(),
      absl::StrCat(d.programmatic_launches() ? "kernels start behind their predecessor (programmatic launch)"
                                             : "kernels start after their predecessor",
                   d.weight_prefetch_bytes() > 0
                       ? absl::StrCat(", asking L2 for ", FormatByteSize(d.weight_prefetch_bytes()),
                                      " of each weight row first")
                       : "")) +
         (d.unpinned_bytes() > 0 ? absl::StrFormat("not pinned  %s of host layers copied as pageable memory (slower; "
                                                   "cudaHostRegister: %s; raise the memlock limit, ulimit -l)\n",
                                                   FormatByteSize(d.unpinned_bytes()), d.pin_error())
                                 : "");
}

// `part` of `whole` as a percentage, or "-" when there is no whole yet.
std::string Percent(uint64_t part, uint64_t whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

// Speculative decoding in two lines: the draft and how it drafts, then
// how it pays.
std::string FormatSpeculation(const v1::SpeculationStatus& s) {
  std::string out = absl::StrFormat(
      "speculative draft %s (%s), up to %d tokens per pass (min %d)%s; %u drafts loaded\n",
      s.draft_model().empty() ? "per request" : s.draft_model(), FormatByteSize(s.draft_bytes()), s.draft_max(),
      s.draft_min(),
      s.tree_nodes() > 0 ? absl::StrFormat(", greedy trees of %d tokens, %d branches", s.tree_nodes(),
                                           s.tree_branches())
                         : "",
      s.drafts_loaded());
  absl::StrAppendFormat(&out,
                        "            %u rounds: proposed %u, accepted %u (%.2f), %.2f tokens per round%s\n",
                        s.rounds(), s.proposed(), s.accepted(), s.acceptance(), s.tokens_per_round(),
                        s.errors() > 0 ? absl::StrFormat("; %u failed draft passes, last: %s", s.errors(),
                                                         s.last_error())
                                       : "");
  return out;
}

// Selective expert streaming in three lines: the two-phase layers and the
// expert cache, how well the cache and the prediction do, and what was read
// from disk (per generated token when there are any). One line when a MoE
// model streams whole layers.
std::string FormatExperts(const v1::ExpertStatus& e, uint64_t generated_tokens) {
  if (!e.present()) return absl::StrCat("experts     whole layers (", e.not_selective(), ")\n");
  const uint64_t bytes_read = e.dense_bytes_read() + e.expert_bytes_read();
  return absl::StrFormat(
      "experts     %u two-phase layers; cache %s held of %s, %u entries\n"
      "            %u hits, %u misses (%s hit), %u evictions; prefetch hit %s (%u of %u disk reads predicted)\n"
      "            read dense %s, experts %s, %u whole-layer reads%s\n",
      e.two_phase_layers(), FormatByteSize(e.cache_held_bytes()), FormatByteSize(e.cache_capacity_bytes()),
      e.cache_entries(), e.cache_hits(), e.cache_misses(), Percent(e.cache_hits(), e.cache_hits() + e.cache_misses()),
      e.cache_evictions(), Percent(e.predicted(), e.routed_from_disk()), e.predicted(), e.routed_from_disk(),
      FormatByteSize(e.dense_bytes_read()), FormatByteSize(e.expert_bytes_read()), e.whole_layer_reads(),
      generated_tokens > 0 ? absl::StrCat("; ", FormatByteSize(bytes_read / generated_tokens), " per token") : "");
}

// FormatResidency, and the bytes read per token when generated_tokens > 0.
std::string ResidencyLines(const v1::ResidencyStatus& r, uint64_t generated_tokens) {
  std::string out = absl::StrFormat(
      "residency   %u resident, %u streamed; pinned first %u, last %u\n"
      "memory      layers %s held, peak %s, budget %s%s; ring %u x %s; globals %s\n",
      r.resident_layers(), r.streamed_layers(), r.pin_first(), r.pin_last(), FormatByteSize(r.held_bytes()),
      FormatByteSize(r.peak_bytes()), FormatByteSize(r.budget_bytes()), r.auto_budget() ? " (auto)" : "",
      r.ring_slots(), FormatByteSize(r.slot_bytes()), FormatByteSize(r.global_bytes()));
  if (r.device().present()) absl::StrAppend(&out, FormatDevice(r.device()));
  if (r.experts().present() || !r.experts().not_selective().empty()) {
    absl::StrAppend(&out, FormatExperts(r.experts(), generated_tokens));
  }
  return out;
}

// Every loaded model: its use, memory and keep_alive ("*": the default).
void AppendModels(const v1::GetStatusResponse& status, std::string& out) {
  absl::StrAppendFormat(&out, "loaded      %d model%s\n", status.models_size(), status.models_size() == 1 ? "" : "s");
  absl::StrAppendFormat(&out, "  %-28s  %4s  %8s  %10s  %10s  %10s  %8s  %s\n", "NAME", "JOBS", "SESSIONS", "RAM",
                        "VRAM", "KV", "IDLE", "UNLOADS");
  for (const v1::LoadedModelStatus& m : status.models()) {
    const v1::ResidencyStatus& r = m.residency();
    absl::StrAppendFormat(
        &out, "%s %-28s  %4u  %8u  %10s  %10s  %10s  %8s  %s\n", m.is_default() ? "*" : " ", m.model().path(), m.jobs(),
        m.sessions(), FormatByteSize(r.held_bytes() + r.global_bytes()),
        r.has_device() ? FormatByteSize(r.device().held_bytes() + r.device().global_bytes()) : "-",
        FormatByteSize(m.kv_bytes()), m.jobs() > 0 ? "in use" : Duration(m.idle_seconds()),
        m.has_expires_in_seconds() ? absl::StrCat("in ", Duration(m.expires_in_seconds())) : "when room is needed");
  }
}

void AppendSessions(const v1::GetStatusResponse& status, std::string& out) {
  absl::StrAppendFormat(&out, "sessions    %d%s\n", status.sessions_size(),
                        status.other_sessions() > 0 ? absl::StrCat(" (and ", status.other_sessions(),
                                                                   " of other credentials)")
                                                    : "");
  if (status.sessions_size() == 0) return;
  absl::StrAppendFormat(&out, "  %-33s  %-8s  %-20s  %17s  %10s  %-6s  %8s\n", "ID", "OWNER", "MODEL", "POSITIONS",
                        "KV", "STATE", "IDLE");
  for (const v1::SessionStatus& session : status.sessions()) {
    absl::StrAppendFormat(&out, "  %-33s  %-8s  %-20s  %17s  %10s  %-6s  %8s\n", session.session_id(), session.owner(),
                          session.model(), absl::StrCat(session.positions(), "/", session.context_length()),
                          FormatByteSize(session.kv_bytes()), session.active() ? "active" : "idle",
                          Duration(session.idle_seconds()));
  }
}

}  // namespace

std::string ResidencyMap(const v1::GetStatusResponse& status) {
  std::string map;
  map.reserve(status.layers_size());
  for (const v1::LayerStatus& layer : status.layers()) map += layer.pinned() ? 'P' : layer.resident() ? 'R' : 'S';
  return map;
}

std::string FormatSessions(const v1::GetStatusResponse& status) {
  std::string out;
  AppendSessions(status, out);
  return out;
}

std::string FormatResidency(const v1::ResidencyStatus& r) { return ResidencyLines(r, /*generated_tokens=*/0); }

std::string FormatStatus(const v1::GetStatusResponse& status) {
  std::string out = absl::StrFormat("octod %s, up %s, backend %s\n", status.version(),
                                    Duration(status.uptime_seconds()), status.backend());
  if (!status.has_model()) {
    absl::StrAppend(&out, "model       none loaded (octo-ctl load NAME)\n");
  } else {
    absl::StrAppend(&out, "model       ", ModelLine(status.model()), "\n");
    absl::StrAppend(&out, ResidencyLines(status.residency(), status.generated_tokens()));
    const std::string map = ResidencyMap(status);
    for (size_t start = 0; start < map.size(); start += kMapWidth) {
      absl::StrAppend(&out, start == 0 ? "layer map   " : "            ", map.substr(start, kMapWidth),
                      start + kMapWidth >= map.size() ? "   (P pinned, R resident, S streamed)" : "", "\n");
    }
  }
  if (status.has_loading()) {
    const v1::LoadProgress& l = status.loading();
    absl::StrAppendFormat(&out, "loading     %s: %s", l.model(), l.stage());
    if (l.bytes_total() > 0) {
      absl::StrAppendFormat(&out, ", %s of %s (%.0f%%)", FormatByteSize(l.bytes_done()),
                            FormatByteSize(l.bytes_total()), 100.0 * l.bytes_done() / l.bytes_total());
    }
    absl::StrAppendFormat(&out, ", %s so far\n", Duration(l.seconds()));
  }
  if (status.models_size() > 0) AppendModels(status, out);
  absl::StrAppendFormat(&out, "kv cache    %s used of %s\n", FormatByteSize(status.kv_used_bytes()),
                        FormatByteSize(status.kv_budget_bytes()));
  // Per loaded model: its cache types, what a position costs, and so how
  // long a context the budget holds.
  for (const v1::LoadedModelStatus& m : status.models()) {
    if (m.kv_bytes_per_position() == 0) continue;  // an older octod, or no attention layers
    absl::StrAppendFormat(&out, "  %-28s  k %s, v %s, %s per position: the budget holds %u positions\n",
                          m.model().path(), m.kv_cache_type_k(), m.kv_cache_type_v(),
                          FormatByteSize(m.kv_bytes_per_position()), m.kv_budget_positions());
  }
  const v1::LoaderStatus& loader = status.loader();
  if (loader.running()) {
    absl::StrAppendFormat(&out, "loader      pid %d, %u restarts (%u hung), %s read at %.2f GB/s, %s, %u checksum failures\n",
                          loader.pid(), loader.restarts(), loader.stalls(), FormatByteSize(loader.bytes_read()), loader.read_gbps(),
                          loader.io_mode().empty() ? "-" : loader.io_mode(), loader.checksum_failures());
  } else {
    absl::StrAppendFormat(&out, "loader      not running (%u restarts)\n", loader.restarts());
  }
  absl::StrAppendFormat(&out, "throughput  %.1f tokens/s (last 10 s), %u tokens, %u passes, overlap %.0f%%\n",
                        status.tokens_per_second(), status.generated_tokens(), status.passes(),
                        status.overlap() * 100);
  if (status.speculation().present()) absl::StrAppend(&out, FormatSpeculation(status.speculation()));
  AppendSessions(status, out);
  if (status.layers_size() > 0) AppendLayerTable(status, out);
  return out;
}

std::string FormatModels(const v1::ListModelsResponse& models) {
  if (models.models_size() == 0) return "no model directories under the models root\n";
  std::string out = absl::StrFormat("  %-32s  %-10s  %6s  %8s  %-7s  %10s  %s\n", "PATH", "ARCH", "LAYERS", "PARAMS",
                                    "QUANT", "SIZE", "NAME");
  for (const v1::ModelInfo& model : models.models()) {
    absl::StrAppendFormat(&out, "%s %-32s  %-10s  %6u  %8s  %-7s  %10s  %s\n", model.loaded() ? "*" : " ", model.path(),
                          model.architecture(), model.n_layers(), ParameterSizeLabel(model.n_params()),
                          model.quantization(), FormatByteSize(model.total_bytes()), model.name());
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Only fails for messages with Any fields whose type is unknown: none here.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace octo
