#include "storage/closest_names.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace octo {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  // Optimal string alignment: three rows of the dynamic-programming table.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> ClosestNames(absl::string_view word, const std::vector<std::string>& candidates,
                                      size_t max) {
  const std::string lower_word = absl::AsciiStrToLower(word);
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string lower = absl::AsciiStrToLower(candidates[i]);
    const size_t distance = EditDistance(lower_word, lower);
    const size_t limit = std::max<size_t>(2, std::max(lower.size(), lower_word.size()) / 3);
    const bool contains = !lower_word.empty() && (absl::StrContains(lower, lower_word) ||
                                                  (lower.size() >= 3 && absl::StrContains(lower_word, lower)));
    if (distance <= limit || contains) scored.emplace_back(distance, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> names;
  for (const auto& [distance, index] : scored) {
    if (names.size() == max) break;
    names.push_back(candidates[index]);
  }
  return names;
}

std::string DidYouMean(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string text = "; did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) absl::StrAppend(&text, i + 1 == names.size() ? " or " : ", ");
    absl::StrAppend(&text, "'", names[i], "'");
  }
  return text + "?";
}

}  // namespace octo
