#include "daemon/server/proto_convert.h"

#include "storage/utf8.h"

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

absl::Status CheckSessionId(const std::string& id) {
  if (id.size() > kMaxSessionIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("session_id has ", id.size(), " bytes; at most ", kMaxSessionIdBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckStopCount(const v1::SamplingParams& sampling) {
  if (static_cast<size_t>(sampling.stop_size()) > kMaxStopStrings) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.stop has ", sampling.stop_size(), " strings; at most ", kMaxStopStrings));
  }
  return absl::OkStatus();
}

}  // namespace

SamplingParams SamplingFromProto(const v1::SamplingParams& proto) {
  SamplingParams params;
  if (proto.has_temperature()) params.temperature = proto.temperature();
  if (proto.has_top_k()) params.top_k = proto.top_k();
  if (proto.has_top_p()) params.top_p = proto.top_p();
  if (proto.has_min_p()) params.min_p = proto.min_p();
  if (proto.has_repeat_last_n()) params.repeat_last_n = proto.repeat_last_n();
  if (proto.has_repeat_penalty()) params.repeat_penalty = proto.repeat_penalty();
  if (proto.has_frequency_penalty()) params.frequency_penalty = proto.frequency_penalty();
  if (proto.has_presence_penalty()) params.presence_penalty = proto.presence_penalty();
  if (proto.has_seed()) params.seed = proto.seed();
  if (proto.has_max_tokens()) params.max_tokens = proto.max_tokens();
  params.stop.assign(proto.stop().begin(), proto.stop().end());
  params.top_logprobs = proto.top_logprobs();
  return params;
}

namespace {

// The request's speculation (ValidateJob checks the values).
void DraftFromProto(const v1::DraftParams& draft, GenerateJob& job) {
  if (!draft.draft_model().empty()) job.draft_model = draft.draft_model();
  if (draft.has_draft_max()) job.draft_max = draft.draft_max();
}

}  // namespace

absl::StatusOr<GenerateJob> JobFromProto(const v1::GenerateRequest& request) {
  OCTO_RETURN_IF_ERROR(CheckSessionId(request.session_id()));
  OCTO_RETURN_IF_ERROR(CheckStopCount(request.sampling()));
  if (request.prompt().size() > kMaxPromptBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt has ", request.prompt().size(), " bytes; at most ", kMaxPromptBytes));
  }
  GenerateJob job;
  job.session_id = request.session_id();
  job.prompt = request.prompt();
  job.prompt_tokens.assign(request.prompt_tokens().begin(), request.prompt_tokens().end());
  job.add_bos = request.has_add_bos() ? request.add_bos() : true;
  job.parse_special = request.parse_special();
  job.model = request.model();
  job.grammar = request.grammar();
  job.origin = "gRPC Generate";
  job.sampling = SamplingFromProto(request.sampling());
  DraftFromProto(request.draft(), job);
  return job;
}

absl::StatusOr<GenerateJob> JobFromProto(const v1::ChatRequest& request) {
  OCTO_RETURN_IF_ERROR(CheckSessionId(request.session_id()));
  OCTO_RETURN_IF_ERROR(CheckStopCount(request.sampling()));
  if (static_cast<size_t>(request.messages_size()) > kMaxChatMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("messages has ", request.messages_size(), " entries; at most ", kMaxChatMessages));
  }
  GenerateJob job;
  job.session_id = request.session_id();
  job.chat = true;
  job.chat_template = request.chat_template();
  job.model = request.model();
  job.grammar = request.grammar();
  job.origin = "gRPC Chat";
  job.messages.reserve(request.messages_size());
  for (int i = 0; i < request.messages_size(); ++i) {
    const v1::ChatMessage& message = request.messages(i);
    if (message.content().size() > kMaxPromptBytes) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].content has ", message.content().size(),
                                                     " bytes; at most ", kMaxPromptBytes));
    }
    job.messages.push_back({message.role(), message.content()});
  }
  job.sampling = SamplingFromProto(request.sampling());
  DraftFromProto(request.draft(), job);
  return job;
}

ResidencyChange ResidencyChangeFromProto(const v1::SetResidencyRequest& request) {
  ResidencyChange change;
  change.reset = request.reset();
  change.model = request.model();
  if (request.has_pin_first()) change.pin_first = request.pin_first();
  if (request.has_pin_last()) change.pin_last = request.pin_last();
  if (request.has_budget_bytes()) change.budget_bytes = request.budget_bytes();
  if (request.has_auto_budget()) change.auto_budget = request.auto_budget();
  if (request.has_vram_budget_bytes()) change.vram_budget_bytes = request.vram_budget_bytes();
  if (request.has_vram_auto()) change.vram_auto = request.vram_auto();
  if (request.expert_cache_auto()) {
    change.expert_cache_bytes = kAutoExpertCache;
  } else if (request.has_expert_cache_bytes()) {
    change.expert_cache_bytes = request.expert_cache_bytes();
  }
  return change;
}

void ToProto(const GeneratedToken& token, bool with_logprobs, v1::GeneratedToken* proto) {
  proto->set_id(token.id);
  proto->set_text(token.text);
  if (!with_logprobs) return;
  proto->set_logprob(token.logprob);
  for (const TokenLogprob& alternative : token.top) {
    v1::TokenLogprob* top = proto->add_top();
    top->set_id(alternative.id);
    top->set_logprob(alternative.logprob);
    top->set_text(ReplaceInvalidUtf8(alternative.text));  // an alternative may be a lone byte token
  }
}

void ToProto(const JobStats& stats, v1::GenerateStats* proto) {
  proto->set_prompt_tokens(stats.prompt_tokens);
  proto->set_cached_tokens(stats.cached_tokens);
  proto->set_generated_tokens(stats.generated_tokens);
  proto->set_prefill_seconds(stats.prefill_seconds);
  proto->set_decode_seconds(stats.decode_seconds);
  proto->set_queue_seconds(stats.queue_seconds);
  proto->set_load_wait_seconds(stats.load_wait_seconds);
  proto->set_compute_seconds(stats.compute_seconds);
  proto->set_tokens_per_second(stats.decode_seconds > 0 ? stats.generated_tokens / stats.decode_seconds : 0);
  proto->set_seed(stats.seed);
  proto->set_batch_peak(stats.batch_peak);
  proto->set_target_passes(stats.target_passes);
  proto->set_draft_model(stats.draft_model);
  proto->set_draft_proposed(stats.draft_proposed);
  proto->set_draft_accepted(stats.draft_accepted);
}

void ToProto(const ModelSummary& model, v1::ModelInfo* proto) {
  proto->set_path(model.path);
  proto->set_architecture(model.architecture);
  proto->set_name(model.name);
  proto->set_n_layers(model.n_layers);
  proto->set_dim(model.dim);
  proto->set_vocab_size(model.vocab_size);
  proto->set_context_length(model.context_length);
  proto->set_n_experts(model.n_experts);
  proto->set_total_bytes(model.total_bytes);
  proto->set_loaded(model.loaded);
  proto->set_chat_template(model.chat_template);
  proto->set_n_params(model.n_params);
  proto->set_quantization(model.quantization);
  proto->set_draft_model(model.draft_model);
  proto->set_pooling(model.pooling);
}

void ToProto(const SpeculationReport& r, v1::SpeculationStatus* proto) {
  proto->set_present(r.present);
  proto->set_draft_model(r.draft_model);
  proto->set_draft_bytes(r.draft_bytes);
  proto->set_drafts_loaded(r.drafts_loaded);
  proto->set_draft_max(r.settings.draft_max);
  proto->set_draft_min(r.settings.draft_min);
  proto->set_tree_nodes(r.settings.tree_nodes);
  proto->set_tree_branches(r.settings.tree_branches);
  proto->set_rounds(r.rounds);
  proto->set_proposed(r.proposed);
  proto->set_accepted(r.accepted);
  proto->set_tokens(r.tokens);
  proto->set_acceptance(r.acceptance);
  proto->set_tokens_per_round(r.tokens_per_round);
  proto->set_errors(r.errors);
  proto->set_last_error(r.last_error);
}

void ToProto(const DeviceReport& device, v1::DeviceStatus* proto) {
  proto->set_present(device.present);
  proto->set_name(device.name);
  proto->set_index(device.index);
  proto->set_total_bytes(device.total_bytes);
  proto->set_free_bytes(device.free_bytes);
  proto->set_auto_budget(device.auto_budget);
  proto->set_budget_bytes(device.budget_bytes);
  proto->set_held_bytes(device.held_bytes);
  proto->set_peak_bytes(device.peak_bytes);
  proto->set_device_layers(device.device_layers);
  proto->set_staging_buffers(device.staging_buffers);
  proto->set_staging_bytes(device.staging_bytes);
  proto->set_global_bytes(device.global_bytes);
  proto->set_workspace_bytes(device.workspace_bytes);
  proto->set_kv_bytes(device.kv_bytes);
  proto->set_copied_bytes(device.copied_bytes);
  proto->set_copy_seconds(device.copy_seconds);
  proto->set_h2d_gbps(device.h2d_gbps);
  proto->set_overlap(device.overlap);
  proto->set_timing_every(device.timing_every);
  proto->set_unpinned_bytes(device.unpinned_bytes);
  proto->set_pin_error(device.pin_error);
  proto->set_graph_captures(device.graph_captures);
  proto->set_graph_replays(device.graph_replays);
  proto->set_eager_stretches(device.eager_stretches);
  proto->set_programmatic_launches(device.programmatic_launches);
  proto->set_weight_prefetch_bytes(device.weight_prefetch_bytes);
}

void ToProto(const ExpertReport& experts, v1::ExpertStatus* proto) {
  proto->set_present(experts.present);
  proto->set_not_selective(experts.not_selective);
  proto->set_two_phase_layers(experts.two_phase_layers);
  proto->set_cache_capacity_bytes(experts.cache_capacity_bytes);
  proto->set_cache_held_bytes(experts.cache_held_bytes);
  proto->set_cache_entries(experts.cache_entries);
  proto->set_cache_hits(experts.cache_hits);
  proto->set_cache_misses(experts.cache_misses);
  proto->set_cache_evictions(experts.cache_evictions);
  proto->set_routed_from_disk(experts.routed_from_disk);
  proto->set_predicted(experts.predicted);
  proto->set_whole_layer_reads(experts.whole_layer_reads);
  proto->set_dense_bytes_read(experts.dense_bytes_read);
  proto->set_expert_bytes_read(experts.expert_bytes_read);
}

void ToProto(const ResidencyReport& residency, v1::ResidencyStatus* proto) {
  proto->set_pin_first(residency.pin_first);
  proto->set_pin_last(residency.pin_last);
  proto->set_auto_budget(residency.auto_budget);
  proto->set_budget_bytes(residency.budget_bytes);
  proto->set_held_bytes(residency.held_bytes);
  proto->set_peak_bytes(residency.peak_bytes);
  proto->set_ring_slots(residency.ring_slots);
  proto->set_slot_bytes(residency.slot_bytes);
  proto->set_resident_layers(residency.resident_layers);
  proto->set_streamed_layers(residency.streamed_layers);
  proto->set_global_bytes(residency.global_bytes);
  // The CPU backend leaves the device message unset (absent from JSON).
  if (residency.device.present) ToProto(residency.device, proto->mutable_device());
  // A dense model leaves the experts message unset too.
  if (residency.experts.present || !residency.experts.not_selective.empty()) {
    ToProto(residency.experts, proto->mutable_experts());
  }
}

void ToProto(const SessionReport& session, v1::SessionStatus* proto) {
  proto->set_session_id(session.id);
  proto->set_positions(session.positions);
  proto->set_context_length(session.context_length);
  proto->set_kv_bytes(session.kv_bytes);
  proto->set_active(session.active);
  proto->set_idle_seconds(session.idle_seconds);
  proto->set_owner(session.owner);
  proto->set_model(session.model);
}

namespace {

void ToProto(const LoaderReport& loader, v1::LoaderStatus* proto) {
  proto->set_running(loader.running);
  proto->set_pid(loader.pid);
  proto->set_restarts(loader.restarts);
  proto->set_stalls(loader.stalls);
  proto->set_bytes_read(loader.bytes_read);
  proto->set_read_gbps(loader.read_gbps);
  proto->set_io_mode(loader.io_mode);
  proto->set_checksum_failures(loader.checksum_failures);
}

void ToProto(const LoadedModelReport& model, v1::LoadedModelStatus* proto) {
  ToProto(model.summary, proto->mutable_model());
  ToProto(model.residency, proto->mutable_residency());
  ToProto(model.loader, proto->mutable_loader());
  proto->set_backend(model.backend);
  proto->set_is_default(model.is_default);
  proto->set_jobs(model.jobs);
  proto->set_sessions(model.sessions);
  proto->set_kv_bytes(model.kv_bytes);
  proto->set_idle_seconds(model.idle_seconds);
  if (model.expires_in_seconds.has_value()) proto->set_expires_in_seconds(*model.expires_in_seconds);
  proto->set_kv_cache_type_k(std::string(KvCacheTypeName(model.kv_types.k)));
  proto->set_kv_cache_type_v(std::string(KvCacheTypeName(model.kv_types.v)));
  proto->set_kv_bytes_per_position(model.kv_bytes_per_position);
  proto->set_kv_budget_positions(model.kv_budget_positions);
}

}  // namespace

void ToProto(const RuntimeReport& report, v1::GetStatusResponse* proto) {
  if (report.model.has_value()) ToProto(*report.model, proto->mutable_model());
  ToProto(report.residency, proto->mutable_residency());
  ToProto(report.speculation, proto->mutable_speculation());
  ToProto(report.loader, proto->mutable_loader());
  for (const LoadedModelReport& model : report.models) ToProto(model, proto->add_models());
  for (size_t i = 0; i < report.layers.size(); ++i) {
    const LayerReport& layer = report.layers[i];
    v1::LayerStatus* status = proto->add_layers();
    status->set_layer(static_cast<uint32_t>(i));
    status->set_resident(layer.resident);
    status->set_pinned(layer.pinned);
    status->set_bytes(layer.bytes);
    status->set_loads(layer.loads);
    status->set_load_seconds(layer.load_seconds);
    status->set_load_wait_seconds(layer.load_wait_seconds);
    status->set_compute_seconds(layer.compute_seconds);
    status->set_tier(LayerTierName(layer.tier));
    status->set_copies(layer.copies);
    status->set_copy_seconds(layer.copy_seconds);
    status->set_copy_wait_seconds(layer.copy_wait_seconds);
  }
  for (const SessionReport& session : report.sessions) ToProto(session, proto->add_sessions());
  proto->set_kv_budget_bytes(report.kv_budget_bytes);
  proto->set_kv_used_bytes(report.kv_used_bytes);
  proto->set_tokens_per_second(report.tokens_per_second);
  proto->set_overlap(report.overlap);
  proto->set_passes(report.passes);
  proto->set_uptime_seconds(report.uptime_seconds);
  if (report.loading.has_value()) {
    v1::LoadProgress* loading = proto->mutable_loading();
    loading->set_model(report.loading->model);
    loading->set_stage(report.loading->stage);
    loading->set_bytes_done(report.loading->bytes_done);
    loading->set_bytes_total(report.loading->bytes_total);
    loading->set_seconds(report.loading->seconds);
  }
  proto->set_backend(report.backend);
  proto->set_generated_tokens(report.generated_tokens);
}

}  // namespace octo
