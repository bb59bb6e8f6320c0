#include "client/progress.h"

#include "absl/strings/str_format.h"

namespace octo {
namespace {

constexpr auto kTtyRedraw = std::chrono::milliseconds(100);
constexpr auto kLineEvery = std::chrono::seconds(5);
constexpr int kBarWidth = 30;

}  // namespace

Progress::Progress(std::string label, std::FILE* out, bool is_tty)
    : label_(std::move(label)), out_(out), is_tty_(is_tty) {}

std::string Progress::FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.2f %s", bytes, kUnits[unit]);
}

std::string Progress::FormatDuration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%ld:%02ld", s / 60, s % 60);
}

void Progress::Update(uint64_t done, uint64_t total) {
  const Clock::time_point now = Clock::now();
  last_total_ = total;
  if (now - last_draw_ < (is_tty_ ? std::chrono::duration_cast<Clock::duration>(kTtyRedraw)
                                  : std::chrono::duration_cast<Clock::duration>(kLineEvery))) {
    return;
  }
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double fraction = total > 0 ? static_cast<double>(done) / total : 1.0;
  const std::string eta = rate > 0 ? FormatDuration((total - done) / rate) : "?";
  if (is_tty_) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    absl::FPrintF(out_, "\r%s [%s%s] %3.0f%%  %s / %s  %s/s  ETA %s\033[K", label_, std::string(filled, '#'),
                  std::string(kBarWidth - filled, ' '), fraction * 100, FormatBytes(done), FormatBytes(total),
                  FormatBytes(rate), eta);
  } else {
    absl::FPrintF(out_, "%s: %s / %s (%.0f%%), %s/s, ETA %s\n", label_, FormatBytes(done), FormatBytes(total),
                  fraction * 100, FormatBytes(rate), eta);
  }
  std::fflush(out_);
}

void Progress::Finish(uint64_t done) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  absl::FPrintF(out_, "%s%s: %s in %s (%s/s)\n", is_tty_ ? "\r\033[K" : "", label_, FormatBytes(done),
                FormatDuration(elapsed), FormatBytes(rate));
  std::fflush(out_);
}

}  // namespace octo
