#include "kernels/cuda/sim/async_copy.h"

#include <cstring>
#include <utility>

namespace octo::cuda_sim {

void AsyncCopies::Copy(void* dst, const void* src, size_t bytes, size_t zero_fill) {
  open_.push_back(Pending{dst, src, bytes, zero_fill});
}

void AsyncCopies::Commit() {
  committed_.push_back(std::move(open_));
  open_.clear();
}

void AsyncCopies::Wait(size_t prior) {
  if (committed_.size() <= prior) return;
  const size_t done = committed_.size() - prior;
  for (size_t g = 0; g < done; ++g) Perform(committed_[g]);
  committed_.erase(committed_.begin(), committed_.begin() + static_cast<std::ptrdiff_t>(done));
}

void AsyncCopies::Finish() {
  Wait(0);
  Perform(open_);
  open_.clear();
}

void AsyncCopies::Perform(const std::vector<Pending>& group) {
  for (const Pending& p : group) {
    const size_t copied = p.bytes - p.zero_fill;
    std::memcpy(p.dst, p.src, copied);
    std::memset(static_cast<unsigned char*>(p.dst) + copied, 0, p.zero_fill);
  }
}

}  // namespace octo::cuda_sim
