// The host executor (kernels/cuda/sim) on its own: kernels broken on purpose
// fail with the error named (the kernel, block and thread, and what), never
// a hang; streams, events, copies and memory behave as the runtime API says.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/sim/config.h"
#include "kernels/cuda/sim/thread_context.h"
#include "tests/kernels/cuda/sim/test_kernels.h"

namespace octo {
namespace {

using ::testing::HasSubstr;

// Device memory holding `host`, freed at scope exit.
template <typename T>
struct Device {
  explicit Device(const std::vector<T>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(p); }
  std::vector<T> Get() const {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  T* get() const { return static_cast<T*>(p); }
  void* p = nullptr;
  size_t n;
};

// A launch of a kernel that is to fail: queued (cudaSuccess), or, when the
// kernel ran and failed before cudaGetLastError() was asked, already the
// sticky error, as on a GPU.
void ExpectQueued(cudaError_t launched) {
  EXPECT_TRUE(launched == cudaSuccess || launched == cudaErrorLaunchFailure) << cudaGetErrorName(launched);
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamDestroy(stream_);
    cudaDeviceReset();  // a failed kernel's error is sticky until then
  }
  // Waits for the stream; the error and cudaGetErrorString's text for it.
  std::pair<cudaError_t, std::string> Wait() {
    const cudaError_t error = cudaStreamSynchronize(stream_);
    return {error, cudaGetErrorString(error)};
  }
  cudaStream_t stream_ = nullptr;
};

// --- Kernels broken on purpose ---------------------------------------------

TEST_F(ExecutorTest, AReductionMissingASyncthreadsReadsThePoison) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  float want = 0;
  for (float v : x) want += v;
  Device<float> d_x(x), d_out(std::vector<float>(1, 0.0f));
  ASSERT_EQ(sim_test::BlockSum(d_x.get(), d_out.get(), 256, /*skip_sync=*/false, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d_out.Get()[0], want);
  // Without the barrier, thread 0 adds partials the upper threads have not
  // written yet: shared memory starts every block as NaN, and the NaN shows.
  ASSERT_EQ(sim_test::BlockSum(d_x.get(), d_out.get(), 256, /*skip_sync=*/true, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_TRUE(std::isnan(d_out.Get()[0])) << "read of unwritten shared memory went unseen: " << d_out.Get()[0];
}

TEST_F(ExecutorTest, ThreadsAtDifferentBarriersAreAnErrorNamingBoth) {
  ExpectQueued(sim_test::DivergentBarrier(64, 10, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel DivergentBarrierKernel, block (0,0,0), thread (10,0,0)"));
  EXPECT_THAT(text, HasSubstr("different barriers"));
  EXPECT_THAT(text, HasSubstr("test_kernels.cu"));
  // Sticky, as on a GPU: later work is refused until cudaDeviceReset.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);  // allocation still works
  EXPECT_EQ(cudaMemsetAsync(p, 0, 64, stream_), cudaErrorLaunchFailure);
  cudaDeviceReset();
  EXPECT_EQ(cudaMemsetAsync(p, 0, 64, stream_), cudaSuccess);
  EXPECT_EQ(Wait().first, cudaSuccess);
  cudaFree(p);
}

TEST_F(ExecutorTest, ABarrierSomeThreadsNeverReachIsAnError) {
  ExpectQueued(sim_test::EarlyExitBeforeBarrier(64, 40, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel EarlyExitKernel, block (0,0,0), thread (40,0,0)"));
  EXPECT_THAT(text, HasSubstr("every thread of a block must reach every barrier"));
}

// Under programmatic launches (common.cuh) a kernel may start while the one
// before it runs; only GridStart() orders it after that one, so nothing may
// come before it.
TEST_F(ExecutorTest, AKernelReadingItsIndexBeforeGridStartIsAnError) {
  Device<int> d_out(std::vector<int>(32, -1));
  ExpectQueued(sim_test::WithoutGridStartFirst(d_out.get(), 32, sim_test::GridStartMistake::kLate, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel LateGridStartKernel, block (0,0,0), thread (0,0,0) reads threadIdx, blockIdx, "
                              "blockDim or gridDim before GridStart()"));
}

TEST_F(ExecutorTest, AKernelWithoutGridStartIsAnError) {
  Device<int> d_out(std::vector<int>(32, -1));
  ExpectQueued(sim_test::WithoutGridStartFirst(d_out.get(), 32, sim_test::GridStartMistake::kMissing, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel NoGridStartKernel, block (0,0,0), thread (0,0,0) ended without calling "
                              "GridStart()"));
}

// Before GridStart() a kernel may ask L2 for what its predecessor cannot be
// writing (GridStartAfter), and nothing else.
TEST_F(ExecutorTest, PrefetchesAreRecordedWithWhetherTheyCameBeforeTheStart) {
  constexpr int kN = 256;
  Device<float> d_x(std::vector<float>(kN, 1.0f));
  Device<int> d_out(std::vector<int>(32, -1));
  cuda_sim::RecordPrefetches(true);
  for (const auto c : {sim_test::PrefetchCase::kBeforeStart, sim_test::PrefetchCase::kAfterStart}) {
    ASSERT_EQ(sim_test::PrefetchSlices(d_x.get(), kN, d_out.get(), c, stream_), cudaSuccess);
    ASSERT_EQ(Wait().first, cudaSuccess);
    std::vector<cuda_sim::Prefetch> seen = cuda_sim::TakePrefetches();
    ASSERT_EQ(seen.size(), 32u);
    std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.p < b.p; });
    for (int t = 0; t < 32; ++t) {
      EXPECT_EQ(seen[t].p, d_x.get() + t * kN / 32);
      EXPECT_EQ(seen[t].bytes, kN / 32 * sizeof(float));
      EXPECT_EQ(seen[t].before_start, c == sim_test::PrefetchCase::kBeforeStart);
    }
    EXPECT_EQ(d_out.Get()[31], 31);
  }
  cuda_sim::RecordPrefetches(false);
  ASSERT_EQ(sim_test::PrefetchSlices(d_x.get(), kN, d_out.get(), sim_test::PrefetchCase::kBeforeStart, stream_),
            cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_TRUE(cuda_sim::TakePrefetches().empty());
}

// PrefetchSlices over 256 floats in a case that is to fail: the error's text.
std::string FailedPrefetchSlices(sim_test::PrefetchCase c, cudaStream_t stream) {
  constexpr int kN = 256;
  Device<float> d_x(std::vector<float>(kN, 1.0f));
  Device<int> d_out(std::vector<int>(32, -1));
  ExpectQueued(sim_test::PrefetchSlices(d_x.get(), kN, d_out.get(), c, stream));
  const cudaError_t error = cudaStreamSynchronize(stream);
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  return cudaGetErrorString(error);
}

TEST_F(ExecutorTest, APrefetchOutsideItsAllocationIsAnError) {
  const std::string text = FailedPrefetchSlices(sim_test::PrefetchCase::kPastEnd, stream_);
  EXPECT_THAT(text, HasSubstr("kernel PrefetchSlicesKernel, block (0,0,0), thread (31,0,0): PrefetchL2 of 36 bytes"));
  EXPECT_THAT(text, HasSubstr("not inside one device allocation"));
}

TEST_F(ExecutorTest, ABarrierBeforeGridStartIsAnError) {
  const std::string text = FailedPrefetchSlices(sim_test::PrefetchCase::kSyncFirst, stream_);
  EXPECT_THAT(text, HasSubstr("kernel PrefetchSlicesKernel, block (0,0,0), thread (0,0,0): __syncthreads at "));
  EXPECT_THAT(text, HasSubstr("before GridStart(): before it a kernel only reads its index and prefetches"));
}

TEST_F(ExecutorTest, AFullMaskShuffleInAPartialWarpNamesTheAbsentLane) {
  Device<float> d_x(std::vector<float>(32, 1.0f)), d_out(std::vector<float>(1, 0.0f));
  ASSERT_EQ(sim_test::FullMaskWarpSum(d_x.get(), d_out.get(), 32, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d_out.Get()[0], 32.0f);
  ExpectQueued(sim_test::FullMaskWarpSum(d_x.get(), d_out.get(), 16, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel FullMaskWarpSumKernel, block (0,0,0), thread (0,0,0)"));
  EXPECT_THAT(text, HasSubstr("mask 0xffffffff, which names lane 16: absent"));
}

TEST_F(ExecutorTest, AShuffleFromALaneOutsideItsMaskIsAnError) {
  Device<float> d_out(std::vector<float>(32, 0.0f));
  ExpectQueued(sim_test::ShuffleOutsideMask(d_out.get(), stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("kernel ShuffleOutsideMaskKernel"));
  EXPECT_THAT(text, HasSubstr("reads lane 16, which is not in the mask 0x0000ffff"));
}

using ExecutorDeathTest = ExecutorTest;

// Copies 1000 floats shifted by `offset`: the last `offset` threads read past
// the end of the 4000-byte input.
void ReadPastTheEnd(int offset, cudaStream_t stream) {
  Device<float> d_x(std::vector<float>(1000, 1.0f)), d_out(std::vector<float>(1000, 0.0f));
  sim_test::CopyShifted(d_x.get(), d_out.get(), 1000, offset, stream);
  cudaStreamSynchronize(stream);
}

// Under AddressSanitizer the element just past the end is caught (the rest
// of its page is poisoned); without it, a read into the guard page after the
// allocation is, with the executor's own report.
TEST_F(ExecutorDeathTest, AnOutOfBoundsReadIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_DEATH(ReadPastTheEnd(1, stream_), "use-after-poison");
#else
  EXPECT_DEATH(ReadPastTheEnd(1024, stream_),
               "kernel CopyShiftedKernel, block \\([0-9]+,0,0\\), thread \\([0-9]+,0,0\\).*past the end of a "
               "4000-byte device allocation");
#endif
}

// Copies 16 KiB into a device buffer on one stream (held in flight for 2 s)
// and, 0.2 s later, reads it from a kernel on another stream with no event
// between them.
void ReadWhileTheCopyIsInFlight(cudaStream_t stream) {
  cuda_sim::Config config = cuda_sim::GetConfig();
  config.copy_delay = std::chrono::milliseconds(2000);
  (void)cuda_sim::SetConfig(config);
  cudaStream_t copy_stream;
  cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);
  void* pinned = nullptr;
  cudaMallocHost(&pinned, 4096 * sizeof(float));
  std::memset(pinned, 0, 4096 * sizeof(float));
  Device<float> d_x(std::vector<float>(4096, 0.0f)), d_out(std::vector<float>(4096, 0.0f));
  cudaMemcpyAsync(d_x.get(), pinned, 4096 * sizeof(float), cudaMemcpyHostToDevice, copy_stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the copy has taken off
  sim_test::CopyShifted(d_x.get(), d_out.get(), 4096, 0, stream);
  cudaStreamSynchronize(stream);
}

// A kernel that reads a buffer while the copy into it is still in flight
// (no event wait between the copy's stream and its own) faults, and the
// report names the kernel and the copy.
TEST_F(ExecutorDeathTest, AReadOfACopyStillInFlightIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ReadWhileTheCopyIsInFlight(stream_),
               "kernel CopyShiftedKernel.*is in flight: cudaMemcpyAsync \\(host to device, 16384 bytes\\)");
}

// --- What the executor must get right --------------------------------------

TEST_F(ExecutorTest, AnEventWaitOrdersACopyBeforeAKernelOnAnotherStream) {
  cuda_sim::Config config = cuda_sim::GetConfig();
  const cuda_sim::Config saved = config;
  // Long enough that a loaded machine's scheduling cannot land the copy
  // before the next lines of this thread run.
  config.copy_delay = std::chrono::milliseconds(400);
  ASSERT_TRUE(cuda_sim::SetConfig(config).ok());
  cudaStream_t copy_stream;
  cudaEvent_t copied;
  ASSERT_EQ(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), cudaSuccess);
  std::vector<float> host(4096);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), host.size() * sizeof(float)), cudaSuccess);
  std::memcpy(pinned, host.data(), host.size() * sizeof(float));
  Device<float> d_x(std::vector<float>(4096, 0.0f)), d_out(std::vector<float>(4096, 0.0f));
  ASSERT_EQ(cudaMemcpyAsync(d_x.get(), pinned, host.size() * sizeof(float), cudaMemcpyHostToDevice, copy_stream),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(copied, copy_stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(copied), cudaErrorNotReady);  // still in flight
  ASSERT_EQ(cudaStreamWaitEvent(stream_, copied, 0), cudaSuccess);
  ASSERT_EQ(sim_test::CopyShifted(d_x.get(), d_out.get(), 4096, 0, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d_out.Get(), host);
  EXPECT_EQ(cudaEventQuery(copied), cudaSuccess);
  cudaEventDestroy(copied);
  cudaStreamDestroy(copy_stream);
  cudaFreeHost(pinned);
  ASSERT_TRUE(cuda_sim::SetConfig(saved).ok());
}

TEST_F(ExecutorTest, TwoStreamsRunAtOnce) {
  // The first kernel spins until the second, on another stream, sets the
  // flag: it can see it only if the two streams really run concurrently.
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  Device<int> flag(std::vector<int>(1, 0)), seen(std::vector<int>(1, -1));
  ASSERT_EQ(sim_test::WaitForFlag(flag.get(), seen.get(), 2000000000LL, stream_), cudaSuccess);
  ASSERT_EQ(sim_test::SetFlag(flag.get(), other), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(seen.Get()[0], 1);
  cudaStreamDestroy(other);
}

TEST_F(ExecutorTest, StaticSharedMemoryStartsEveryBlockPoisoned) {
  const int blocks = 64;
  Device<float> out(std::vector<float>(blocks, 0.0f));
  ASSERT_EQ(sim_test::ReadStaticSharedFirst(out.get(), blocks, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  for (float v : out.Get()) EXPECT_TRUE(std::isnan(v)) << "a block saw " << v << " (an earlier block's value?)";
}

// A GPU starts a grid's blocks in no promised order; neither does the
// executor (so a kernel relying on one fails here too), but it starts each
// once, whatever the grid's size -- one the executor's strides divide too.
TEST_F(ExecutorTest, BlocksStartOutOfIndexOrderEachOnce) {
  for (const dim3 grid : {dim3(64, 3), dim3(2 * 7919, 1)}) {
    const unsigned n = grid.x * grid.y;
    Device<unsigned> counter(std::vector<unsigned>{0});
    Device<unsigned> order(std::vector<unsigned>(n, ~0u));
    ASSERT_EQ(sim_test::StartOrder(counter.get(), order.get(), grid, stream_), cudaSuccess);
    ASSERT_EQ(Wait().first, cudaSuccess);
    std::vector<unsigned> starts = order.Get();
    EXPECT_FALSE(std::is_sorted(starts.begin(), starts.end())) << grid.x << " x " << grid.y << ": in index order";
    if (grid.y > 1) {
      // Row 0's blocks do not all start before row 1's.
      EXPECT_LT(*std::min_element(starts.begin() + grid.x, starts.end()),
                *std::max_element(starts.begin(), starts.begin() + grid.x));
    }
    std::sort(starts.begin(), starts.end());
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(starts[i], i) << "a block started twice or never";
  }
}

TEST_F(ExecutorTest, AsyncCopiesLandAtTheWaitThatAsksForThem) {
  std::vector<float> x(260);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
  Device<float> d_x(x);
  auto stage = [&](sim_test::AsyncWait wait) {
    Device<float> out(std::vector<float>(256, 0.0f));
    EXPECT_EQ(sim_test::AsyncStage(d_x.get(), out.get(), 0, wait, stream_), cudaSuccess);
    EXPECT_EQ(Wait().first, cudaSuccess);
    return out.Get();
  };
  // Waited for: every float staged.
  const std::vector<float> all = stage(sim_test::AsyncWait::kAll);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(all[i], x[i]) << "float " << i;
  // All but the newest group: the first 128 landed, the second group's
  // shared floats are still the poison.
  const std::vector<float> first = stage(sim_test::AsyncWait::kAllButNewest);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(first[i], x[i]) << "float " << i;
  for (int i = 128; i < 256; ++i) ASSERT_TRUE(std::isnan(first[i])) << "float " << i << " landed before its wait";
  // No wait: a read of the staging reads the poison.
  for (float v : stage(sim_test::AsyncWait::kNone)) ASSERT_TRUE(std::isnan(v)) << "a copy landed before any wait";
}

TEST_F(ExecutorTest, AMisalignedAsyncCopyIsAnErrorNamingIt) {
  Device<float> d_x(std::vector<float>(260, 1.0f)), out(std::vector<float>(256, 0.0f));
  ExpectQueued(sim_test::AsyncStage(d_x.get(), out.get(), 1, sim_test::AsyncWait::kAll, stream_));
  const auto [error, text] = Wait();
  EXPECT_EQ(error, cudaErrorLaunchFailure);
  EXPECT_THAT(text, HasSubstr("AsyncStageKernel"));
  EXPECT_THAT(text, HasSubstr("__pipeline_memcpy_async of 16 bytes"));
  EXPECT_THAT(text, HasSubstr("aligned"));
}

TEST_F(ExecutorTest, WarpOperationsAndBarrierFormsComputeWhatCudaSays) {
  const int threads = 64;
  std::vector<int> x(threads);
  for (int t = 0; t < threads; ++t) x[t] = (t * 5 + 3) % 11;  // 1..10 and 0; one 7 at least
  Device<int> d_x(x), d_out(std::vector<int>(8 + 3 * threads, -1));
  ASSERT_EQ(sim_test::WarpAndBarrierOps(d_x.get(), d_out.get(), threads, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  const std::vector<int> out = d_out.Get();
  int odd = 0, positive = 1, seven = 0;
  for (int v : x) {
    odd += v % 2;
    positive &= v > 0;
    seven |= v == 7;
  }
  EXPECT_EQ(static_cast<unsigned>(out[0]), 0xaaaaaaaau);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 1);
  EXPECT_EQ(out[3], odd);
  EXPECT_EQ(out[4], positive);
  EXPECT_EQ(out[5], seven);
  for (int t = 0; t < threads; ++t) {
    const int warp = t / 32 * 32, lane = t % 32;
    EXPECT_EQ(out[8 + t], x[warp + (lane + 1) % 32]) << t;
    int prefix = 0;
    for (int l = 0; l <= lane; ++l) prefix += x[warp + l];
    EXPECT_EQ(out[8 + threads + t], prefix) << t;
    EXPECT_EQ(out[8 + 2 * threads + t], x[t ^ 1]) << t;
  }
}

TEST_F(ExecutorTest, ABadLaunchConfigurationIsTheLastErrorAndRunsNothing) {
  Device<float> d_out(std::vector<float>(1, 5.0f));
  Device<float> d_x(std::vector<float>(2048, 1.0f));
  EXPECT_EQ(sim_test::BlockSum(d_x.get(), d_out.get(), 2048, false, stream_), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, then cleared
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d_out.Get()[0], 5.0f);
}

TEST_F(ExecutorTest, DeviceMemoryIsCountedAgainstTheConfiguredSize) {
  const cuda_sim::Config saved = cuda_sim::GetConfig();
  cuda_sim::Config small = saved;
  small.device_memory_bytes = 1 << 20;
  ASSERT_TRUE(cuda_sim::SetConfig(small).ok());
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 20);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 600 << 10), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(free, total - (600 << 10));
  EXPECT_EQ(cudaMalloc(&b, 600 << 10), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  small.device_memory_bytes = 4096;
  EXPECT_FALSE(cuda_sim::SetConfig(small).ok()) << "shrunk below what is allocated";
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, 600 << 10), cudaSuccess);
  cudaFree(b);
  ASSERT_TRUE(cuda_sim::SetConfig(saved).ok());
}

TEST_F(ExecutorTest, ACopyFromPageableMemoryReadsItAtTheCallAndFromPinnedMemoryLater) {
  cuda_sim::Config config = cuda_sim::GetConfig();
  const cuda_sim::Config saved = config;
  // Long enough that a loaded machine's scheduling cannot land the copy
  // before the next lines of this thread run.
  config.copy_delay = std::chrono::milliseconds(400);
  ASSERT_TRUE(cuda_sim::SetConfig(config).ok());
  Device<int> d(std::vector<int>(1024, 0));
  std::vector<int> pageable(1024, 1);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), pageable.data(), 4096, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  pageable.assign(1024, 2);  // too late: the runtime has read it
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d.Get()[0], 1);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4096), cudaSuccess);
  std::fill(pinned, pinned + 1024, 3);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), pinned, 4096, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  std::fill(pinned, pinned + 1024, 4);  // in time: the copy has not happened yet
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(d.Get()[0], 4);
  cudaFreeHost(pinned);
  ASSERT_TRUE(cuda_sim::SetConfig(saved).ok());
}

TEST_F(ExecutorTest, EventsTimeWhatTheStreamDid) {
  cuda_sim::Config config = cuda_sim::GetConfig();
  const cuda_sim::Config saved = config;
  config.copy_delay = std::chrono::milliseconds(20);
  ASSERT_TRUE(cuda_sim::SetConfig(config).ok());
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  Device<int> d(std::vector<int>(16, 0));
  ASSERT_EQ(cudaEventRecord(start, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d.get(), 0, 64, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 19.0f);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  ASSERT_TRUE(cuda_sim::SetConfig(saved).ok());
}

TEST_F(ExecutorTest, CopiesCheckThatEachSideIsWhatTheKindSays) {
  Device<int> d(std::vector<int>(16, 0));
  std::vector<int> host(16, 1);
  EXPECT_EQ(cudaMemcpy(host.data(), d.get(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 128, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // past the end
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(d.Get(), host);
}

// A captured copy, kernel and fill run only when the graph is launched, and
// again at each launch, reading the pinned input as it is then; what a
// capture cannot hold (a wait, an event, a pageable copy) is refused and
// fails the capture.
TEST_F(ExecutorTest, AGraphReplaysWhatItsCaptureRecorded) {
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64 * sizeof(float)), cudaSuccess);
  std::fill(pinned, pinned + 64, 1.0f);
  Device<float> x(std::vector<float>(64, 0.0f)), sum(std::vector<float>(2, -1.0f));
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(x.get(), pinned, 64 * sizeof(float), cudaMemcpyHostToDevice, stream_), cudaSuccess);
  ASSERT_EQ(sim_test::BlockSum(x.get(), sum.get(), 64, false, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(sum.get() + 1, 0, sizeof(float), stream_), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(sum.Get(), (std::vector<float>{-1.0f, -1.0f})) << "a capture runs nothing";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(sum.Get(), (std::vector<float>{64.0f, 0.0f}));
  std::fill(pinned, pinned + 64, 2.0f);  // the next replay copies the input as it is now
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(Wait().first, cudaSuccess);
  EXPECT_EQ(sum.Get()[0], 128.0f);
  const cuda::ApiCounts counted = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(counted.graph_captures, 1u);
  EXPECT_EQ(counted.graph_launches, 2u);
  EXPECT_EQ(counted.launches, 1u) << "launched once, at the capture";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // Refused in a capture, and the capture then fails.
  std::vector<float> pageable(64, 1.0f);
  cudaEvent_t event;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  auto refused = [&](auto call) {
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &g), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(g, nullptr);
    cudaGetLastError();
  };
  refused([&] { return cudaStreamSynchronize(stream_); });
  refused([&] { return cudaEventRecord(event, stream_); });
  refused([&] { return cudaMemcpyAsync(x.get(), pageable.data(), 256, cudaMemcpyHostToDevice, stream_); });
  refused([&] { return cudaStreamQuery(stream_); });
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t none = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &none), cudaErrorIllegalState) << "not capturing";
  cudaGetLastError();
  cudaEventDestroy(event);
  cudaFreeHost(pinned);
}

}  // namespace
}  // namespace octo
