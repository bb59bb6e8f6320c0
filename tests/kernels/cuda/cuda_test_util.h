// What every CUDA op test shares: a fixture with a stream, a cuBLAS handle
// and scratch, and device copies of host vectors.
//
// In an nvcc build the tests need a GPU and skip cleanly without one; in an
// executor build (OCTO_CUDA_SIM) the executor is the device, so none skips.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "kernels/cuda/device.h"
#include "kernels/ops.h"

namespace octo::testing {

// A device copy of a host vector; Download() brings it back.
template <typename T>
class DeviceVector {
 public:
  DeviceVector() = default;
  explicit DeviceVector(const std::vector<T>& host, cudaStream_t stream) : size_(host.size()) {
    auto buffer = cuda::DeviceBuffer::Allocate(host.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return;
    buffer_ = std::move(*buffer);
    const absl::Status copied = buffer_.CopyFromHost(host.data(), host.size() * sizeof(T), stream);
    EXPECT_TRUE(copied.ok()) << copied;
  }
  // n elements, every byte 0xFF (NaN as floats): what a kernel leaves
  // unwritten shows.
  static DeviceVector Filled(size_t n, cudaStream_t stream) {
    return DeviceVector(std::vector<T>(n, Poison()), stream);
  }

  T* get() const { return buffer_.as<T>(); }
  size_t size() const { return size_; }

  // Waits for `stream`, then copies the values back.
  std::vector<T> Download(cudaStream_t stream) const {
    std::vector<T> host(size_);
    const absl::Status copied = buffer_.CopyToHost(host.data(), size_ * sizeof(T), stream);
    EXPECT_TRUE(copied.ok()) << copied;
    return host;
  }

 private:
  static T Poison() {
    T value;
    std::memset(&value, 0xFF, sizeof(T));
    return value;
  }
  cuda::DeviceBuffer buffer_;
  size_t size_ = 0;
};

// Fixture for the CUDA op tests: a stream, a cuBLAS handle and a scratch
// buffer grown on demand, all on the current device.
class CudaOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device (or no driver): this test runs on a machine with a GPU, or in an "
                      "OCTO_CUDA_SIM=ON build";
    }
    auto stream = cuda::CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
    auto blas = cuda::BlasContext::Create();
    ASSERT_TRUE(blas.ok()) << blas.status();
    blas_ = std::move(*blas);
  }

  cudaStream_t stream() const { return stream_.get(); }

  // A cuda::Exec on this test's stream with at least `scratch_bytes` of
  // scratch.
  cuda::Exec Exec(size_t scratch_bytes) {
    if (scratch_.size() < scratch_bytes) {
      auto buffer = cuda::DeviceBuffer::Allocate(scratch_bytes);
      EXPECT_TRUE(buffer.ok()) << buffer.status();
      if (buffer.ok()) scratch_ = std::move(*buffer);
    }
    return cuda::Exec{stream_.get(), scratch_.data(), scratch_.size(), blas_.get()};
  }

  template <typename T>
  DeviceVector<T> Upload(const std::vector<T>& host) {
    return DeviceVector<T>(host, stream_.get());
  }
  template <typename T>
  DeviceVector<T> Output(size_t n) {
    return DeviceVector<T>::Filled(n, stream_.get());
  }

  // Waits for everything queued; a kernel's fault is reported here.
  void Sync() {
    const absl::Status status = stream_.Synchronize();
    ASSERT_TRUE(status.ok()) << status;
  }

 private:
  cuda::CudaStream stream_;
  cuda::BlasContext blas_;
  cuda::DeviceBuffer scratch_;
};

// cuda::SetAttentionHeadsPerBlock(heads) for a scope, then back to the
// launch's own choice (0), even when an assertion leaves the scope early.
class ScopedAttentionHeads {
 public:
  explicit ScopedAttentionHeads(int heads) { EXPECT_TRUE(cuda::SetAttentionHeadsPerBlock(heads)) << heads; }
  ~ScopedAttentionHeads() { cuda::SetAttentionHeadsPerBlock(0); }
  ScopedAttentionHeads(const ScopedAttentionHeads&) = delete;
  ScopedAttentionHeads& operator=(const ScopedAttentionHeads&) = delete;
};

// Checks a bad-argument call of a CUDA op: INVALID_ARGUMENT naming the op
// and `needle`, and nothing launched (the stream stays idle and out keeps
// its bytes, which the caller checks).
inline void ExpectInvalidArgument(const absl::Status& status, const std::string& op, const std::string& needle) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << needle << ": " << status;
  EXPECT_NE(status.message().find(op), std::string::npos) << status;
  EXPECT_NE(status.message().find(needle), std::string::npos) << "wanted \"" << needle << "\" in: " << status;
}

// Whether a and b hold the same bytes: bit for bit, NaNs included.
template <typename T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace octo::testing
