// octo-ctl's views of octod's replies: text for people, JSON for scripts.
#pragma once

#include <string>

#include "google/protobuf/message.h"
#include "octo.pb.h"

namespace octo {

// One character per layer, in order: P pinned (always resident), R resident,
// S streamed through the ring.
std::string ResidencyMap(const v1::GetStatusResponse& status);

// The whole status: model, residency map, memory against budgets (and the
// VRAM tier with a device, the expert cache with selective experts), loader,
// throughput and overlap, sessions, and a per-layer table of tiers and times
// (copy times too with a device).
std::string FormatStatus(const v1::GetStatusResponse& status);

// The residency plan in two lines, "residency ..." and "memory ...", and
// with a CUDA device its VRAM tier: "device ...", "vram ...", "h2d copies ...";
// with a MoE model "experts ..." (the cache, its hit rates and bytes read;
// per generated token only in FormatStatus). octo-ctl residency prints it
// after a change.
std::string FormatResidency(const v1::ResidencyStatus& residency);

// One row per model directory, the loaded one marked.
std::string FormatModels(const v1::ListModelsResponse& models);

// octo-ctl sessions: the caller's sessions (every one for an admin) and a
// count of the others.
std::string FormatSessions(const v1::GetStatusResponse& status);

// `message` as proto3 JSON on one line, field names as in octo.proto, every
// scalar field present (zeros included); an unset message field (no model
// loaded) is absent. 64-bit integers are strings, as proto3 JSON has them.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace octo
