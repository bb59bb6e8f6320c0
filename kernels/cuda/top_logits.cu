// A logits row's best candidates and log-sum-exp on CUDA. Semantics and
// preconditions: kernels/ops.h; the CPU twin is kernels/cpu/top_logits.cc.
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"
#include "kernels/sum_exp.h"

namespace octo::cuda {
namespace {

// One block per row reads it all: as many threads as a block holds, one
// per lane of the sum's order (kernels/sum_exp.h).
constexpr int kThreads = kSumExpMaxLanes;
static_assert(kThreads <= kMaxBlockSize && kSumExpWarp == kWarpSize, "sum_exp.h's lanes are a block's threads");
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kDigitBits = 8;  // the radix select takes the 32-bit key a byte per pass
constexpr int kBins = 1 << kDigitBits;

// A key whose unsigned order is the logits' order, -0 ranking as +0 (the
// sampler's order compares floats: they are equal). NaN never reaches a
// ranking (its row is refused).
__device__ __forceinline__ uint32_t OrderKey(float x) {
  const uint32_t bits = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// `v` combined over the block by `op` (associative and commutative; for a
// double sum the order is fixed by the block size), returned to every
// thread. warp_values: shared, kWarps entries. Every thread calls it.
template <typename T, typename Op>
__device__ __forceinline__ T BlockReduce(T v, Op op, T identity, T* warp_values) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // a previous call may still be reading warp_values
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarpSize) ? warp_values[lane] : identity;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The radix select's step, by thread 0: among the keys matching *prefix in
// the bits above `shift` (counted by digit in hist), the digit holding the
// *need-th largest joins *prefix, and *need becomes its rank among the keys
// with that digit.
__device__ __forceinline__ void SelectDigit(const int* hist, int shift, uint32_t* prefix, int* need) {
  int above = 0;
  for (int digit = kBins - 1; digit >= 0; --digit) {
    if (above + hist[digit] >= *need) {
      *prefix |= static_cast<uint32_t>(digit) << shift;
      *need -= above;
      return;
    }
    above += hist[digit];
  }
}

// --- Kernels -----------------------------------------------------------------

// One block per row. Pass 1: the checks, the count of finite logits, the
// max, and the histogram of the keys' top byte. Pass 2: the sum of exps
// (each thread its strided share in id order, then BlockReduce's
// butterflies: sum_exp.h's order), and the next byte's histogram among the
// keys that still may rank; passes 3 and 4 the last bytes. Then T is the
// n-th largest key, and `need` of the keys equal to it rank (the lowest
// ids). Pass 5 collects, in chunks of the block in id order, every key
// above T and the first `need` equal to it; a rank sort of those n puts
// them in the sampler's order.
// Launch: gridDim.x == n_rows, blockDim.x == SumExpLanes(vocab) (the sum's
// order is the block's).
__global__ void TopLogitsKernel(const float* logits,  // (n_rows, vocab)
                                int vocab,
                                TopLogitsRow* rows) {  // (n_rows)
  GridStart();
  __shared__ int hist[kBins];
  __shared__ float warp_floats[kWarps];
  __shared__ int warp_ints[kWarps];
  __shared__ double warp_doubles[kWarps];
  __shared__ uint32_t select_prefix;
  __shared__ int select_need, taken_above, taken_equal;
  __shared__ bool done;
  __shared__ TopLogit picked[kTopLogits];
  __shared__ uint32_t picked_keys[kTopLogits];

  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  TopLogitsRow& out = rows[blockIdx.x];
  const int n = vocab < kTopLogits ? vocab : kTopLogits;
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;

  // Pass 1.
  for (int b = tid; b < kBins; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  float max_logit = -INFINITY;
  int finite = 0, bad = INT_MAX;
  for (int i = tid; i < vocab; i += blockDim.x) {
    const float x = row[i];
    if (x != x || x == INFINITY) {
      bad = bad < i ? bad : i;
      continue;
    }
    finite += x != -INFINITY;
    max_logit = x > max_logit ? x : max_logit;
    atomicAdd(&hist[OrderKey(x) >> 24], 1);
  }
  max_logit = BlockReduce(max_logit, [](float a, float b) { return a > b ? a : b; }, -INFINITY, warp_floats);
  finite = BlockReduce(finite, [](int a, int b) { return a + b; }, 0, warp_ints);
  bad = BlockReduce(bad, [](int a, int b) { return a < b ? a : b; }, INT_MAX, warp_ints);
  if (bad != INT_MAX) {  // the whole block: bad is the block's
    if (tid == 0) {
      out.sum_exp = 0;
      out.max_logit = 0;
      out.n_finite = finite;
      out.bad_id = bad;
      out.bad_logit = row[bad];
    }
    return;
  }
  uint32_t prefix = 0, mask = 0;
  int need = n;
  // Passes 2 to 4 (pass 2 also sums).
  double sum = 0;
  for (int shift = 24; shift >= 0; shift -= kDigitBits) {
    if (tid == 0) {
      select_prefix = prefix;
      select_need = need;
      SelectDigit(hist, shift, &select_prefix, &select_need);
    }
    __syncthreads();
    prefix = select_prefix;
    need = select_need;
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
    if (shift == 0) break;
    __syncthreads();  // everyone has read the selection before hist is cleared
    for (int b = tid; b < kBins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const int next = shift - kDigitBits;
    for (int i = tid; i < vocab; i += blockDim.x) {
      const float x = row[i];
      if (shift == 24 && max_logit != -INFINITY) sum += exp(static_cast<double>(x) - static_cast<double>(max_logit));
      const uint32_t key = OrderKey(x);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> next) & (kBins - 1)], 1);
    }
    if (shift == 24) sum = BlockReduce(sum, [](double a, double b) { return a + b; }, 0.0, warp_doubles);
    __syncthreads();  // hist is complete
  }

  // Pass 5: the keys above prefix (n - need of them) anywhere in [0, n -
  // need), the first `need` equal to it after them, in id order.
  const int n_above = n - need;
  if (tid == 0) {
    taken_above = 0;
    taken_equal = 0;
  }
  __syncthreads();
  for (int base = 0; base < vocab; base += blockDim.x) {
    const int i = base + tid;
    const float x = i < vocab ? row[i] : 0.0f;
    const uint32_t key = i < vocab ? OrderKey(x) : 0;
    const bool equal = i < vocab && key == prefix;
    if (i < vocab && key > prefix) {
      const int slot = atomicAdd(&taken_above, 1);
      picked[slot] = TopLogit{i, x};
      picked_keys[slot] = key;
    }
    // The rank of an equal key among this chunk's, in id order.
    const unsigned ballot = __ballot_sync(0xffffffffu, equal);
    if (lane == 0) warp_ints[warp] = __popc(ballot);
    __syncthreads();
    int before = taken_equal, chunk_equal = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) {
      if (w < warp) before += warp_ints[w];
      chunk_equal += warp_ints[w];
    }
    const int rank = before + __popc(ballot & ((1u << lane) - 1u));
    if (equal && rank < need) {
      picked[n_above + rank] = TopLogit{i, x};
      picked_keys[n_above + rank] = key;
    }
    __syncthreads();  // taken_equal and warp_ints are read, taken_above complete
    if (tid == 0) {
      taken_equal += chunk_equal;
      done = taken_above == n_above && taken_equal >= need;
    }
    __syncthreads();
    if (done) break;  // every thread reads it before thread 0 writes it again
  }
  __syncthreads();  // picked is complete

  // The rank sort, and the summary.
  if (tid < n) {
    const uint32_t key = picked_keys[tid];
    const int id = picked[tid].id;
    int rank = 0;
    for (int j = 0; j < n; ++j) {
      rank += picked_keys[j] > key || (picked_keys[j] == key && picked[j].id < id);
    }
    out.top[rank] = picked[tid];
    if (rank == 0) out.max_logit = picked[tid].logit;  // the first of the max's ids, as the CPU's max
  }
  if (tid == 0) {
    out.sum_exp = sum;
    out.n_finite = finite;
    out.bad_id = -1;
    out.bad_logit = 0;
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out, StreamHandle stream) {
  absl::Status args = CheckTopLogitsArgs(logits, n_rows, vocab, out);
  if (!args.ok()) return args;
  // Grid: one block per row, a thread per lane of the sum's order (a narrow
  // row gets the warps it fills).
  const int threads = SumExpLanes(static_cast<size_t>(vocab));
  OCTO_LAUNCH(TopLogitsKernel, n_rows, threads, 0, stream, logits, vocab, out);
  return absl::OkStatus();
}

}  // namespace octo::cuda
