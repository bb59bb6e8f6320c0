// Progress for long operations (decompose, verify): a redrawn bar with
// bytes, rate and ETA on a terminal, plain lines every few seconds otherwise
// (logs, CI). Call Update from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace octo {

class Progress {
 public:
  // `out` is usually stderr; `is_tty` picks the bar (true) or lines (false).
  Progress(std::string label, std::FILE* out, bool is_tty);
  // Bytes done of total; cheap to call often (redraws are rate-limited).
  void Update(uint64_t done, uint64_t total);
  // Final line with the average rate.
  void Finish(uint64_t done);

  // "1.50 GiB", "512.0 KiB", "37 B".
  static std::string FormatBytes(double bytes);
  // "1:02:03", "4:05".
  static std::string FormatDuration(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  std::FILE* out_;
  bool is_tty_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  uint64_t last_total_ = 0;
};

}  // namespace octo
