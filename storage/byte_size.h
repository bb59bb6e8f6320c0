// Byte sizes as people write them in flags and config files: "4GiB", "512M",
// "64k", "1.5G", "4096". Every suffix is a power of 1024 (K, M, G, T, each
// optionally followed by "i" and/or "B"; case-insensitive), as in
// llama.cpp's and most daemons' memory settings. Shared by octo-ctl's
// --budget and octod's configuration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace octo {

// `text` -> bytes; nullopt for anything else (empty, negative, unknown
// suffix, trailing junk, a value that overflows 64 bits). A fraction is
// allowed with a suffix ("1.5G") and rounded down to a whole byte.
std::optional<uint64_t> ParseByteSize(absl::string_view text);

// A short human form: "512 B", "64.0 KiB", "1.50 GiB".
std::string FormatByteSize(uint64_t bytes);

// A parameter count as model listings print it (powers of 1000): "8.0B",
// "124.4M", "292.1K", "512".
std::string ParameterSizeLabel(uint64_t parameters);

}  // namespace octo
