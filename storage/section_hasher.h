// One pass over a file, front to back, that yields the XXH64 of the whole
// file and of each of a list of byte ranges in it: a format-2 MoE layer
// file's dense part and expert blocks (ExpertChecksumRanges). Decompose
// feeds it what it writes, verify what it reads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "storage/manifest.h"
#include "storage/xxhash64.h"

namespace octo {

class SectionHasher {
 public:
  // `sections`: in increasing order, not overlapping (gaps are allowed).
  explicit SectionHasher(std::vector<ByteRange> sections);

  // Hashes `data` as the file's bytes [pos(), pos() + data.size()).
  void Update(std::span<const uint8_t> data);
  // Hashes zero bytes up to `end` (padding the file does not store); no-op
  // when pos() is already there.
  void UpdateZerosTo(uint64_t end);
  uint64_t pos() const { return pos_; }

  uint64_t Digest() const { return whole_.Digest(); }  // the whole file so far
  uint64_t SectionDigest(size_t i) const { return section_hashers_[i].Digest(); }
  size_t section_count() const { return sections_.size(); }

 private:
  Xxh64 whole_;
  std::vector<ByteRange> sections_;
  std::vector<Xxh64> section_hashers_;
  size_t current_ = 0;  // the first section that does not end at or before pos_
  uint64_t pos_ = 0;
};

}  // namespace octo
