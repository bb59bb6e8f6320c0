// Tokens per second over a sliding window (what `octo-ctl status` shows).
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>

namespace octo {

class Throughput {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{10};

  void Add(int tokens, Clock::time_point now = Clock::now()) {
    events_.emplace_back(now, tokens);
    Trim(now);
  }
  // Tokens in the last kWindow, per second of the window (or of the time
  // since the first event, when that is shorter).
  double Rate(Clock::time_point now = Clock::now()) {
    Trim(now);
    if (events_.empty()) return 0;
    long total = 0;
    for (const auto& [t, n] : events_) total += n;
    const double span = std::chrono::duration<double>(now - events_.front().first).count();
    const double window = std::chrono::duration<double>(kWindow).count();
    return total / std::max(std::min(span, window), 1.0);
  }

 private:
  void Trim(Clock::time_point now) {
    while (!events_.empty() && now - events_.front().first > kWindow) events_.pop_front();
  }
  std::deque<std::pair<Clock::time_point, int>> events_;
};

}  // namespace octo
