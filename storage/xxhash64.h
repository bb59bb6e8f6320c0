// XXH64, the checksum of every file in a layer directory.
//
// Chosen because it runs at memory speed on one core (well above NVMe and
// PCIe rates), so the loader can check each layer as it streams it. This is
// an implementation of the published XXH64 algorithm (seed 0 unless given);
// results match the reference `xxh64sum`.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace octo {

// Incremental hasher: Update() any number of times, then Digest().
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void Update(std::span<const uint8_t> data);
  uint64_t Digest() const;

 private:
  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  uint8_t buf_[32];
  uint32_t buffered_ = 0;
};

// One-shot hash.
uint64_t Xxh64Hash(std::span<const uint8_t> data, uint64_t seed = 0);

// "xxh64:" + 16 lowercase hex digits, the manifest's checksum spelling.
std::string FormatChecksum(uint64_t digest);

}  // namespace octo
