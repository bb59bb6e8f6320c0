// proto (octo.v1) <-> core (daemon/core/runtime.h) types.
//
// Requests: fields are copied as they are; ranges are the core's to check
// (ValidateSamplingParams and the Runtime name the bad field). The skin
// checks only what it would otherwise copy at any size before the core sees
// it: prompt bytes, chat message count and sizes, stop string count,
// session id length (INVALID_ARGUMENT naming the field and its limit).
// Unset optional fields take octo's defaults (SamplingParams' initializers,
// add_bos = true).
#pragma once

#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"
#include "octo.pb.h"

namespace octo {

SamplingParams SamplingFromProto(const v1::SamplingParams& proto);
absl::StatusOr<GenerateJob> JobFromProto(const v1::GenerateRequest& request);
absl::StatusOr<GenerateJob> JobFromProto(const v1::ChatRequest& request);
// expert_cache_auto true -> kAutoExpertCache, whatever expert_cache_bytes says.
ResidencyChange ResidencyChangeFromProto(const v1::SetResidencyRequest& request);

// with_logprobs: the request asked for top_logprobs > 0, so the token's own
// logprob is reported too.
void ToProto(const GeneratedToken& token, bool with_logprobs, v1::GeneratedToken* proto);
void ToProto(const JobStats& stats, v1::GenerateStats* proto);
void ToProto(const ModelSummary& model, v1::ModelInfo* proto);
void ToProto(const DeviceReport& device, v1::DeviceStatus* proto);
void ToProto(const ExpertReport& experts, v1::ExpertStatus* proto);
// residency.device only when present (the CPU backend leaves it unset);
// residency.experts only when present or not_selective says why not (a
// dense model leaves it unset).
void ToProto(const ResidencyReport& residency, v1::ResidencyStatus* proto);
void ToProto(const SessionReport& session, v1::SessionStatus* proto);
// Everything but the version (the service's to set).
void ToProto(const RuntimeReport& report, v1::GetStatusResponse* proto);

}  // namespace octo
