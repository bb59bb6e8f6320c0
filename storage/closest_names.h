// "Did you mean": the candidates closest to a word someone mistyped (a model
// name, a flag, a subcommand), by edit distance. Shared by octod's model
// lookup and the clients' argument errors.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace octo {

// Levenshtein distance (insertions, deletions and substitutions cost 1; an
// adjacent swap costs 1 too, the commonest typo: "stauts").
size_t EditDistance(absl::string_view a, absl::string_view b);

// Up to `max` candidates close to `word`, closest first (ties in the
// candidates' order): within a third of the longer length's edits (at least
// 2), or containing `word` or contained in it, case ignored. Empty when
// nothing is close.
std::vector<std::string> ClosestNames(absl::string_view word, const std::vector<std::string>& candidates,
                                      size_t max = 3);

// "; did you mean 'a' or 'b'?" for ClosestNames' result, "" when empty.
std::string DidYouMean(const std::vector<std::string>& names);

}  // namespace octo
