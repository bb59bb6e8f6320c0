// AlignedBuffer: an owned, zero-initialised byte buffer whose start is
// aligned to kAlignment (4 KiB), so a layer file can be read into it with
// O_DIRECT and every tensor inside keeps the alignment the format gives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "storage/format.h"

namespace octo {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Aborts on allocation failure like operator new; callers that must
  // survive it check the size against their budget first.
  explicit AlignedBuffer(size_t size) : size_(size) {
    if (size == 0) return;
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    data_.reset(static_cast<uint8_t*>(p));
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

}  // namespace octo
