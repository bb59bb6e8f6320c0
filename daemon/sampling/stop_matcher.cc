#include "daemon/sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "storage/utf8.h"

namespace octo {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& stop : stops) {
    if (!stop.empty()) stops_.push_back(std::move(stop));
  }
}

size_t StopMatcher::LongestPartialStop() const {
  const absl::string_view text = pending_;
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    // Try the longest candidate first; a full match was already ruled out.
    for (size_t k = std::min(stop.size() - 1, text.size()); k > longest; --k) {
      if (absl::string_view(stop).substr(0, k) == text.substr(text.size() - k)) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}

StopMatcher::Output StopMatcher::Feed(absl::string_view piece) {
  Output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(piece.data(), piece.size());

  // Earliest occurrence of any stop string. Everything before pending_ was
  // released only because no stop could start there, so this is the
  // earliest in the whole output.
  size_t match_at = std::string::npos;
  const std::string* match = nullptr;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < match_at) {
      match_at = at;
      match = &stop;
    }
  }
  if (match != nullptr) {
    out.text = pending_.substr(0, match_at);
    out.stopped = true;
    stopped_ = true;
    matched_stop_ = *match;
    pending_.clear();
    return out;
  }

  // Release all but a possible stop-string start and an unfinished character.
  const size_t hold = std::max(LongestPartialStop(), IncompleteUtf8Tail(pending_));
  const size_t cut = Utf8CutBefore(pending_, pending_.size() - hold);
  out.text = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopMatcher::Flush() { return std::exchange(pending_, std::string()); }

}  // namespace octo
