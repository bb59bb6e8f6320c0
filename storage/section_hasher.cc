#include "storage/section_hasher.h"

#include <algorithm>
#include <utility>

#include "storage/format.h"

namespace octo {

SectionHasher::SectionHasher(std::vector<ByteRange> sections)
    : sections_(std::move(sections)), section_hashers_(sections_.size()) {}

void SectionHasher::Update(std::span<const uint8_t> data) {
  whole_.Update(data);
  while (!data.empty()) {
    while (current_ < sections_.size() && sections_[current_].offset + sections_[current_].bytes <= pos_) ++current_;
    if (current_ == sections_.size()) {
      pos_ += data.size();
      return;
    }
    const ByteRange& s = sections_[current_];
    if (pos_ < s.offset) {  // a gap before the next section
      const uint64_t skip = std::min<uint64_t>(data.size(), s.offset - pos_);
      data = data.subspan(skip);
      pos_ += skip;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(data.size(), s.offset + s.bytes - pos_);
    section_hashers_[current_].Update(data.first(n));
    data = data.subspan(n);
    pos_ += n;
  }
}

void SectionHasher::UpdateZerosTo(uint64_t end) {
  static const std::vector<uint8_t> kZeros(kAlignment, 0);
  while (pos_ < end) Update(std::span(kZeros).first(std::min<uint64_t>(kZeros.size(), end - pos_)));
}

}  // namespace octo
