// Kernels the executor's tests launch: correct ones, and ones broken on
// purpose, each the way real kernels go wrong. Built as a shared library,
// as octo_kernels_cuda is, so their static __shared__ memory is poisoned
// like the real kernels'. Each function launches on `stream` and returns
// cudaGetLastError() after the launch; the kernel's own failure shows at the
// next call that waits on the stream.
#pragma once

#include <cuda_runtime_api.h>

namespace octo::sim_test {

// Block-wide sum of x (n <= 1024) into out[0], one block of n threads,
// dynamic shared memory for the partial sums. `skip_sync` leaves out the
// __syncthreads between writing the partials and reading them.
cudaError_t BlockSum(const float* x, float* out, int n, bool skip_sync, cudaStream_t stream);

// Threads below `split` wait at one __syncthreads, the others at another.
cudaError_t DivergentBarrier(int threads, int split, cudaStream_t stream);

// Threads at or past `live` return before a __syncthreads the others reach.
cudaError_t EarlyExitBeforeBarrier(int threads, int live, cudaStream_t stream);

// A warp-sum by __shfl_down_sync with the full mask, in a block of `threads`
// (< 32: the mask names absent lanes). out[0] = lane 0's sum.
cudaError_t FullMaskWarpSum(const float* x, float* out, int threads, cudaStream_t stream);

// out[i] = i for a block of `threads`, the index read before GridStart()
// (`late`), or with GridStart() left out (otherwise).
enum class GridStartMistake { kLate, kMissing };
cudaError_t WithoutGridStartFirst(int* out, int threads, GridStartMistake mistake, cudaStream_t stream);

// One block of 32 threads; thread t asks L2 (PrefetchL2) for floats
// [t * n / 32, (t + 1) * n / 32) of x (n a multiple of 32), then writes t
// to out[t]. kBeforeStart: in GridStartAfter's prefetch; kAfterStart: after
// GridStart(); kPastEnd: before the start, the last thread one float past
// x's n; kSyncFirst: before the start, after a __syncthreads.
enum class PrefetchCase { kBeforeStart, kAfterStart, kPastEnd, kSyncFirst };
cudaError_t PrefetchSlices(const float* x, int n, int* out, PrefetchCase c, cudaStream_t stream);

// Lanes 0..15 shuffle with mask 0x0000ffff but read lane + 16 (outside it).
cudaError_t ShuffleOutsideMask(float* out, cudaStream_t stream);

// out[i] = x[i + offset] for i < n: with offset > 0 the last threads read
// past x's end.
cudaError_t CopyShifted(const float* x, float* out, int n, int offset, cudaStream_t stream);

// out[b] = the value block b's thread 0 reads from a static __shared__
// float before anyone writes it; then it writes b there. `blocks` blocks of
// 32 threads.
cudaError_t ReadStaticSharedFirst(float* out, int blocks, cudaStream_t stream);

// order[y * grid.x + x] = the count of blocks that started before block
// (x, y) (thread 0 of each block takes a number from *counter).
cudaError_t StartOrder(unsigned* counter, unsigned* order, dim3 grid, cudaStream_t stream);

// Every warp operation and barrier form, each result to out (see the .cu).
cudaError_t WarpAndBarrierOps(const int* x, int* out, int threads, cudaStream_t stream);

// Spins until *flag is non-zero, at most `max_spins` times; out[0] = 1 if
// it saw the flag, 0 if it gave up.
cudaError_t WaitForFlag(const int* flag, int* out, long long max_spins, cudaStream_t stream);
// *flag = 1.
cudaError_t SetFlag(int* flag, cudaStream_t stream);

// One warp stages x (256 floats from x + src_offset) into shared memory by
// async copies, 16 bytes a lane in each of two committed groups (the first
// 128 floats, then the rest), waits as `wait` says -- kNone, kAllButNewest
// (__pipeline_wait_prior(1)) or kAll (0) -- syncs the warp, and copies the
// shared floats to out (256). A src_offset that is not a multiple of 4
// floats misaligns every copy.
enum class AsyncWait { kNone, kAllButNewest, kAll };
cudaError_t AsyncStage(const float* x, float* out, int src_offset, AsyncWait wait, cudaStream_t stream);

}  // namespace octo::sim_test
