#include "kernels/cuda/sim/async_copy.h"

#include <cstring>

namespace octo::cuda_sim {

void AsyncCopies::Copy(void* dst, const void* src, size_t bytes, size_t zero_fill) {
  pending_.push_back(Pending{dst, src, bytes, zero_fill, committed_});
}

void AsyncCopies::Commit() { ++committed_; }

void AsyncCopies::Wait(size_t prior) {
  if (committed_ - done_ <= prior) return;
  done_ = committed_ - prior;
  size_t n = 0;
  while (n < pending_.size() && pending_[n].group < done_) Perform(pending_[n++]);
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
}

void AsyncCopies::Finish() {
  for (const Pending& p : pending_) Perform(p);
  pending_.clear();
  done_ = committed_;
}

void AsyncCopies::Perform(const Pending& p) {
  const size_t copied = p.bytes - p.zero_fill;
  std::memcpy(p.dst, p.src, copied);
  std::memset(static_cast<unsigned char*>(p.dst) + copied, 0, p.zero_fill);
}

}  // namespace octo::cuda_sim
