// Little-endian encode/decode helpers: the one place where on-disk integers
// (GGUF, layer-file headers) are turned into values and back. Octo's formats
// are little-endian; the build refuses big-endian hosts.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

static_assert(std::endian::native == std::endian::little, "Octo reads little-endian formats in place");

namespace octo {

template <typename T>
inline T LoadLE(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void StoreLE(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Rounds `n` up to a multiple of `alignment` (a power of two). Returns false
// on overflow.
inline bool AlignUp(uint64_t n, uint64_t alignment, uint64_t* out) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(n, alignment - 1, &sum)) return false;
  *out = sum & ~(alignment - 1);
  return true;
}

}  // namespace octo
