// One GPU thread's async copies (cp.async: cuda_pipeline_primitives.h's
// __pipeline_memcpy_async, __pipeline_commit and __pipeline_wait_prior,
// which device_api.h supplies through these). A copy waits in the thread's
// open group until a commit closes the group; a wait performs every
// committed group but the newest `prior`. So a kernel that reads a copy's
// destination before its wait -- or before the lanes that copied it have
// waited and synced -- reads the poison or an older copy there, as it may
// on a GPU, and its test fails.
#pragma once

#include <cstddef>
#include <vector>

namespace octo::cuda_sim {

class AsyncCopies {
 public:
  // Queues copying `bytes` from src to dst into the open group; the last
  // `zero_fill` of them are zeros instead (cp.async's src-size below its size).
  void Copy(void* dst, const void* src, size_t bytes, size_t zero_fill);
  void Commit();
  void Wait(size_t prior);
  // The thread's end: what it left queued lands (the copies were issued).
  void Finish();

 private:
  struct Pending {
    void* dst;
    const void* src;
    size_t bytes;
    size_t zero_fill;
    size_t group;  // committed groups before it: its group's number
  };
  static void Perform(const Pending& p);

  std::vector<Pending> pending_;  // oldest first
  size_t committed_ = 0;          // groups committed so far
  size_t done_ = 0;               // groups performed so far
};

}  // namespace octo::cuda_sim
