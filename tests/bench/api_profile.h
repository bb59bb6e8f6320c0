// What one decode token asks of the CUDA runtime (kernels/cuda/api_counts.h),
// per model family, measured through the real CUDA backend -- on a GPU or on
// the host executor, where the counts are the same.
//
// Two models of one family that differ only in their layer count give the
// per-layer counts (their difference over the layers between them) and the
// per-token rest (embedding, lm_head, sampling's copies); the line scales
// them to the full-size model's layer count, so a tiny model run on the
// executor states what an 8B token costs in launches and host calls.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cuda/api_counts.h"

namespace octo::bench {

struct DecodeCalls {
  cuda::ApiCounts counted;  // over the measured steps
  uint32_t layers = 0;
  int batch = 1;
  int steps = 0;
  bool graphs = false;  // CUDA graphs on (the backend's step_graphs.h)
  bool candidates = false;  // each logits row came back reduced (forward.h), as a greedy request's does
  int context = 0;  // positions each cache held at the first counted step
};

// Opens `model_dir` on the CUDA backend with every layer in VRAM, prefills
// `batch` sequences of `prompt` tokens, takes six decode steps untimed, then
// counts `steps` more. A prompt past one attention split (kAttentionSplit
// positions, with the six) counts the steps that attention takes in two
// launches on CUDA, as a longer chat's do. graphs: CUDA graphs on (the
// untimed steps capture, the counted ones replay), else every launch as
// called. candidates: the steps take their
// logits rows reduced to their candidates (what the daemon does for greedy
// and top-k requests), else whole.
absl::StatusOr<DecodeCalls> MeasureDecodeCalls(const std::string& model_dir, int gpu, int batch, int steps,
                                               bool graphs = false, bool candidates = true, int prompt = 8);

// What a decode token of a streamed model asks: every layer copied in
// through the staging buffers (none in VRAM, the default staging depth),
// counted over `steps` decode tokens after a `prompt` and six untimed ones.
struct StreamedCalls {
  cuda::ApiCounts counted;
  uint32_t layers = 0;           // all streamed
  uint32_t staging_buffers = 0;
  int steps = 0;
  uint64_t acquires = 0, copies_ahead = 0;  // over the counted steps (DeviceTierStats)
  uint32_t min_copies_ahead = 0;
};
absl::StatusOr<StreamedCalls> MeasureStreamedCalls(const std::string& model_dir, int gpu, int steps, int prompt = 8);

// "profile-streamed: NAME layers=N staging=S pageable-h2d-bytes/token=…
// blocking-waits/streamed-layer=… copies-ahead/acquire=min … mean …":
// blocking waits per streamed layer are the streamed token's less the
// resident token's (`resident`: the same model, every layer in VRAM), over
// the streamed layers. Targets (issue 24): 0 pageable bytes, 0 waits per
// streamed layer, at least 2 copies ahead. INVALID_ARGUMENT when the two
// are not the same model.
absl::StatusOr<std::string> StreamedProfileLine(const std::string& name, const DecodeCalls& resident,
                                                const StreamedCalls& streamed);

// "profile: NAME batch=B launches/layer=… launches/token=… host-calls/token=…
// blocking-waits/token=… pageable-copies/token=… allocations/token=…
// graph=yes|no d2h-bytes/token=… context=…", from `fewer` and `more` (the same family, fewer and more
// layers, the same batch, graphs off), per token at `full_layers` layers.
// With `graphed` (`more` again, graphs on): the launches stay the eager
// runs' (a graph holds those kernels), the host calls, waits, pageable
// copies and allocations per token are the graphed run's (a replay's do not
// grow with the layers), and graph=yes when it launched graphs. The bytes
// copied back per token are `more`'s (the logits: whole or candidates);
// context is the positions the caches held when the counting began.
// INVALID_ARGUMENT when the two do not differ in layers, or differ in batch
// or context.
absl::StatusOr<std::string> ProfileLine(const std::string& name, const DecodeCalls& fewer, const DecodeCalls& more,
                                        uint32_t full_layers, const DecodeCalls* graphed = nullptr);

}  // namespace octo::bench
