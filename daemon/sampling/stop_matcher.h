// StopMatcher: finds stop strings in streamed output text.
//
// Generated text arrives a token piece at a time and a stop string can span
// pieces ("\n\nUs" + "er:"). The matcher holds back the end of the text that
// could still become a stop string and releases it once it cannot:
//
//   StopMatcher stops({"\nUser:"});
//   for each generated piece:
//     StopMatcher::Output out = stops.Feed(piece);
//     stream(out.text);
//     if (out.stopped) break;           // the stop string is not in out.text
//   stream(stops.Flush());              // generation ended without a stop
//
// Guarantees, for valid UTF-8 input:
// - the concatenation of everything returned is the generated text up to the
//   first occurrence of any stop string (earliest start wins), or all of it
//   when none occurs and Flush is called;
// - text is released as early as possible: only a suffix that is a proper
//   prefix of some stop string is held back, plus an unfinished UTF-8
//   character at the very end (a piece may end mid-character);
// - the text returned by Feed never ends inside a UTF-8 character.
// Matching is byte-exact (no case folding or normalisation).
//
// One matcher per generation; not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace octo {

class StopMatcher {
 public:
  // `stops`: the stop strings (ValidateSamplingParams checks a request's);
  // empty strings are ignored. No stops: text passes straight through,
  // held back only at an unfinished UTF-8 character.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; text ends where it began
  };

  // Feeds the next piece. Once stopped, returns {"", true} and ignores input.
  Output Feed(absl::string_view piece);

  // Releases what is held back (generation ended without a stop). Empty once
  // stopped.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched; empty until stopped.
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of a stop.
  size_t LongestPartialStop() const;

  std::vector<std::string> stops_;
  std::string pending_;  // fed but not yet returned
  bool stopped_ = false;
  std::string matched_stop_;
};

}  // namespace octo
