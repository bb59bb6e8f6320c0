#include "storage/xxhash64.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "storage/byte_order.h"

namespace octo {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t MergeRound(uint64_t acc, uint64_t v) {
  acc ^= Round(0, v);
  return acc * kP1 + kP4;
}

// Consumes whole 32-byte stripes from p; returns the bytes consumed.
inline size_t Stripes(uint64_t v[4], const uint8_t* p, size_t n) {
  size_t done = 0;
  for (; done + 32 <= n; done += 32) {
    v[0] = Round(v[0], LoadLE<uint64_t>(p + done));
    v[1] = Round(v[1], LoadLE<uint64_t>(p + done + 8));
    v[2] = Round(v[2], LoadLE<uint64_t>(p + done + 16));
    v[3] = Round(v[3], LoadLE<uint64_t>(p + done + 24));
  }
  return done;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed) {
  v_[0] = seed + kP1 + kP2;
  v_[1] = seed + kP2;
  v_[2] = seed;
  v_[3] = seed - kP1;
}

void Xxh64::Update(std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  total_ += n;
  if (buffered_ > 0) {
    const size_t take = std::min<size_t>(32 - buffered_, n);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < 32) return;
    Stripes(v_, buf_, 32);
    buffered_ = 0;
  }
  const size_t done = Stripes(v_, p, n);
  buffered_ = static_cast<uint32_t>(n - done);
  if (buffered_ > 0) std::memcpy(buf_, p + done, buffered_);
}

uint64_t Xxh64::Digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = std::rotl(v_[0], 1) + std::rotl(v_[1], 7) + std::rotl(v_[2], 12) + std::rotl(v_[3], 18);
    for (uint64_t v : v_) h = MergeRound(h, v);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const uint8_t* p = buf_;
  uint32_t n = buffered_;
  for (; n >= 8; n -= 8, p += 8) {
    h ^= Round(0, LoadLE<uint64_t>(p));
    h = std::rotl(h, 27) * kP1 + kP4;
  }
  if (n >= 4) {
    h ^= static_cast<uint64_t>(LoadLE<uint32_t>(p)) * kP1;
    h = std::rotl(h, 23) * kP2 + kP3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; --n, ++p) {
    h ^= *p * kP5;
    h = std::rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t Xxh64Hash(std::span<const uint8_t> data, uint64_t seed) {
  Xxh64 hasher(seed);
  hasher.Update(data);
  return hasher.Digest();
}

std::string FormatChecksum(uint64_t digest) { return absl::StrFormat("xxh64:%016x", digest); }

}  // namespace octo
