#include "daemon/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/utf8.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view value, absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling parameter ", field, " = ", value, " is out of range: ", allowed));
}

std::string Show(double value) { return absl::StrFormat("%g", value); }

// A double must be finite and lie in [low, high], the ends included or not.
absl::Status CheckRange(absl::string_view field, double value, double low, bool low_inclusive, double high,
                        bool high_inclusive, absl::string_view allowed) {
  const bool ok = std::isfinite(value) && (low_inclusive ? value >= low : value > low) &&
                  (high_inclusive ? value <= high : value < high);
  return ok ? absl::OkStatus() : Bad(field, Show(value), allowed);
}

absl::Status CheckStopStrings(const std::vector<std::string>& stop) {
  if (stop.size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(absl::StrCat("sampling parameter stop has ", stop.size(),
                                                   " strings; at most ", kMaxStopStrings,
                                                   " (kMaxStopStrings) are allowed"));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string& s = stop[i];
    if (s.empty() || s.size() > kMaxStopStringBytes) {
      return absl::InvalidArgumentError(absl::StrCat("sampling parameter stop[", i, "] is ", s.size(),
                                                     " bytes long; it must be 1 to ", kMaxStopStringBytes,
                                                     " bytes (kMaxStopStringBytes)"));
    }
    if (!IsValidUtf8(s)) {
      return absl::InvalidArgumentError(absl::StrCat("sampling parameter stop[", i, "] is not valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  constexpr double kInf = INFINITY;
  OCTO_RETURN_IF_ERROR(
      CheckRange("temperature", p.temperature, 0, true, kInf, false, "must be finite and >= 0 (0 = greedy)"));
  if (p.top_k < 0) return Bad("top_k", absl::StrCat(p.top_k), "must be >= 0 (0 = off)");
  OCTO_RETURN_IF_ERROR(CheckRange("top_p", p.top_p, 0, false, 1, true, "must be in (0, 1] (1 = off)"));
  OCTO_RETURN_IF_ERROR(CheckRange("min_p", p.min_p, 0, true, 1, true, "must be in [0, 1] (0 = off)"));
  if (p.repeat_last_n < -1) {
    return Bad("repeat_last_n", absl::StrCat(p.repeat_last_n), "must be >= -1 (-1 = whole history, 0 = off)");
  }
  OCTO_RETURN_IF_ERROR(CheckRange("repeat_penalty", p.repeat_penalty, 0, false, kInf, false,
                                  "must be finite and > 0 (1 = off)"));
  const std::string penalty_range =
      absl::StrFormat("must be in [-%g, %g] (0 = off)", kMaxAbsTokenPenalty, kMaxAbsTokenPenalty);
  OCTO_RETURN_IF_ERROR(CheckRange("frequency_penalty", p.frequency_penalty, -kMaxAbsTokenPenalty, true,
                                  kMaxAbsTokenPenalty, true, penalty_range));
  OCTO_RETURN_IF_ERROR(CheckRange("presence_penalty", p.presence_penalty, -kMaxAbsTokenPenalty, true,
                                  kMaxAbsTokenPenalty, true, penalty_range));
  if (p.max_tokens < -1) return Bad("max_tokens", absl::StrCat(p.max_tokens), "must be >= -1 (-1 = no limit)");
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs) {
    return Bad("top_logprobs", absl::StrCat(p.top_logprobs),
               absl::StrCat("must be in [0, ", kMaxTopLogprobs, "] (kMaxTopLogprobs)"));
  }
  return CheckStopStrings(p.stop);
}

}  // namespace octo
