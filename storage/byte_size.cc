#include "storage/byte_size.h"

#include <array>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace octo {
namespace {

// Strips a unit suffix ("G", "GB", "GiB", "g", ...) off `text` and returns
// its multiplier; 1 when there is none, 0 for an unknown one.
uint64_t TakeUnit(absl::string_view& text) {
  size_t end = text.size();
  while (end > 0 && std::isalpha(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string unit = absl::AsciiStrToLower(text.substr(end));
  text = text.substr(0, end);
  if (unit.empty() || unit == "b") return 1;
  if (unit.size() > 1 && unit.back() == 'b') unit.pop_back();            // "gb", "gib"
  if (unit.size() == 2 && unit.back() == 'i') unit.pop_back();           // "gi"
  if (unit.size() != 1) return 0;
  switch (unit[0]) {
    case 'k': return 1ull << 10;
    case 'm': return 1ull << 20;
    case 'g': return 1ull << 30;
    case 't': return 1ull << 40;
    default: return 0;
  }
}

}  // namespace

std::optional<uint64_t> ParseByteSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const uint64_t unit = TakeUnit(text);
  if (unit == 0 || text.empty()) return std::nullopt;
  const size_t dot = text.find('.');
  const absl::string_view whole = text.substr(0, dot);
  const absl::string_view fraction = dot == absl::string_view::npos ? absl::string_view() : text.substr(dot + 1);
  for (absl::string_view part : {whole, fraction}) {
    for (char c : part) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
  }
  uint64_t value = 0;
  if (whole.empty() || !absl::SimpleAtoi(whole, &value)) return std::nullopt;
  if (value > UINT64_MAX / unit) return std::nullopt;
  value *= unit;
  if (dot != absl::string_view::npos) {
    if (unit == 1 || fraction.empty() || fraction.size() > 9) return std::nullopt;
    uint64_t digits = 0;
    if (!absl::SimpleAtoi(fraction, &digits)) return std::nullopt;
    uint64_t scale = 1;
    for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
    // unit <= 2^40 and digits < 10^9 < 2^30: up to 70 bits, so multiply in 128.
    const uint64_t extra = static_cast<uint64_t>((static_cast<unsigned __int128>(digits) * unit) / scale);
    if (value > UINT64_MAX - extra) return std::nullopt;
    value += extra;
  }
  return value;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrFormat("%u B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  // Two decimals below 10, one above; the format is a literal each way (clang checks it).
  return value < 10 ? absl::StrFormat("%.2f %s", value, kUnits[unit]) : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string ParameterSizeLabel(uint64_t parameters) {
  static constexpr std::array<std::pair<double, const char*>, 3> kUnits = {{{1e9, "B"}, {1e6, "M"}, {1e3, "K"}}};
  for (const auto& [scale, suffix] : kUnits) {
    if (static_cast<double>(parameters) >= scale) {
      return absl::StrFormat("%.1f%s", static_cast<double>(parameters) / scale, suffix);
    }
  }
  return absl::StrCat(parameters);
}

}  // namespace octo
