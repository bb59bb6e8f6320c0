// The CUDA call counters (kernels/cuda/api_counts.h): what a launch, a copy
// from pageable or registered memory, a blocking copy and an allocation
// count, the same through the executor as on a GPU.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/device.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace octo {
namespace {

class ApiCountsTest : public testing::CudaOpTest {};

TEST_F(ApiCountsTest, AnOpCountsItsLaunchAndItsHostCalls) {
  auto a = Upload(std::vector<float>(1000, 1.0f));
  auto b = Upload(std::vector<float>(1000, 2.0f));
  auto out = Output<float>(1000);
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  ASSERT_TRUE(cuda::Add(a.get(), b.get(), out.get(), 1000, stream()).ok());
  const cuda::ApiCounts add = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(add.launches, 1u);
  EXPECT_EQ(add.host_calls, 1u) << "the launch alone: launch errors are read once per pass (CudaBackend::Download)";
  EXPECT_EQ(add.blocking_waits, 0u) << "a queued op never waits";
  EXPECT_EQ(add.allocations, 0u);
  EXPECT_EQ(add.h2d_bytes + add.d2h_bytes, 0u);
  EXPECT_EQ(out.Download(stream()), std::vector<float>(1000, 3.0f));
}

TEST_F(ApiCountsTest, CopiesCountTheirBytesAndWhetherTheHostMemoryWasPinned) {
  constexpr size_t kBytes = 4096;
  auto device = cuda::DeviceBuffer::Allocate(kBytes);
  ASSERT_TRUE(device.ok());
  std::vector<uint8_t> pageable(kBytes, 7);
  std::vector<uint8_t> registered(3 * kBytes, 9);  // the first 2 * kBytes registered
  ASSERT_EQ(cudaHostRegister(registered.data(), 2 * kBytes, cudaHostRegisterDefault), cudaSuccess);

  cuda::ApiCounts before = cuda::CurrentApiCounts();
  ASSERT_EQ(cudaMemcpyAsync(device->data(), pageable.data(), kBytes, cudaMemcpyHostToDevice, stream()), cudaSuccess);
  cuda::ApiCounts counted = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(counted.h2d_bytes, kBytes);
  EXPECT_EQ(counted.pageable_copies, 1u);
  EXPECT_EQ(counted.pageable_bytes, kBytes);
  EXPECT_EQ(counted.host_calls, 1u);

  before = cuda::CurrentApiCounts();
  // From inside the registered range (not its start), and back out of it.
  ASSERT_EQ(cudaMemcpyAsync(device->data(), registered.data() + 100, kBytes, cudaMemcpyHostToDevice, stream()),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(registered.data() + kBytes, device->data(), kBytes, cudaMemcpyDeviceToHost, stream()),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  counted = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(counted.pageable_copies, 0u) << "registered memory is pinned";
  EXPECT_EQ(counted.h2d_bytes, kBytes);
  EXPECT_EQ(counted.d2h_bytes, kBytes);
  EXPECT_EQ(counted.blocking_waits, 1u) << "the stream sync";
  EXPECT_EQ(registered[kBytes + 5], 9);

  // Across the registered range's end: refused, as an H100 refuses it (the
  // executor too), and not an error that stays.
  EXPECT_EQ(cudaMemcpyAsync(device->data(), registered.data() + kBytes + 1, kBytes, cudaMemcpyHostToDevice, stream()),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);

  // A blocking helper: its copy and its wait.
  before = cuda::CurrentApiCounts();
  std::vector<uint8_t> back(kBytes);
  ASSERT_TRUE(device->CopyToHost(back.data(), kBytes, stream()).ok());
  counted = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(counted.d2h_bytes, kBytes);
  EXPECT_EQ(counted.pageable_copies, 1u);
  EXPECT_EQ(counted.blocking_waits, 1u);
  EXPECT_EQ(back[0], 9) << "the last copy in came from the registered buffer";
}

TEST_F(ApiCountsTest, AllocationsAndFreesAreCounted) {
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  {
    auto buffer = cuda::DeviceBuffer::Allocate(1 << 20);
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ((cuda::CurrentApiCounts() - before).allocations, 1u);
  }
  const cuda::ApiCounts counted = cuda::CurrentApiCounts() - before;
  EXPECT_EQ(counted.allocations, 1u);
  EXPECT_EQ(counted.frees, 1u);
  EXPECT_EQ(counted.launches, 0u);
  EXPECT_EQ(counted.graph_launches + counted.graph_captures, 0u);
}

}  // namespace
}  // namespace octo
