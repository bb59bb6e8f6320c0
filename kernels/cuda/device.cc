// Built by the host compiler against libcudart; see device.h.
#include "kernels/cuda/device.h"

#include <utility>

#include <cublas_v2.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/common.cuh"

namespace octo::cuda {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver, driver too old, or no device. The runtime also records the
    // error as "last error"; clear it so the next cudaGetLastError() after a
    // kernel launch does not report it as the launch's failure.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

// --- DeviceBuffer ------------------------------------------------------------

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  OCTO_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, AllocationBytes(bytes)));
  return DeviceBuffer(data, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Reset(); }

void DeviceBuffer::Reset() {
  // A destructor cannot return the error; cudaFree fails only when an earlier
  // fault has already broken the context, and that fault is reported by
  // whichever call waits on the stream.
  if (data_ != nullptr) (void)cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes, cudaStream_t stream) {
  if (src == nullptr || bytes > size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DeviceBuffer::CopyFromHost: %d bytes from %p into a buffer of %d bytes", bytes, src,
        size_));
  }
  if (bytes == 0) return absl::OkStatus();
  OCTO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(data_, src, bytes, cudaMemcpyHostToDevice, stream));
  // Wait so the caller may reuse `src` and work on other streams sees the data.
  OCTO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyToHost(void* dst, size_t bytes, cudaStream_t stream) const {
  if (dst == nullptr || bytes > size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DeviceBuffer::CopyToHost: %d bytes to %p from a buffer of %d bytes", bytes, dst, size_));
  }
  if (bytes == 0) return absl::OkStatus();
  OCTO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, data_, bytes, cudaMemcpyDeviceToHost, stream));
  // Wait so the caller may read `dst` as soon as we return.
  OCTO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// --- CudaStream --------------------------------------------------------------

absl::StatusOr<CudaStream> CudaStream::Create() {
  cudaStream_t stream = nullptr;
  OCTO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStream(stream);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() { Reset(); }

void CudaStream::Reset() {
  // As for cudaFree above, there is no one to report a failure to.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

absl::Status CudaStream::Synchronize() const {
  // Callers ask for this wait explicitly (results to the host, timing, tests).
  OCTO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

// --- BlasContext -------------------------------------------------------------

static_assert(std::is_same_v<BlasHandle, cublasHandle_t>, "kernels/ops.h declares BlasHandle as cublasHandle_t's type");

absl::StatusOr<BlasContext> BlasContext::Create() {
  cublasHandle_t handle = nullptr;
  const cublasStatus_t status = cublasCreate(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrFormat("cublasCreate failed: cuBLAS status %d", static_cast<int>(status)));
  }
  return BlasContext(handle);
}

BlasContext::BlasContext(BlasContext&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

BlasContext& BlasContext::operator=(BlasContext&& other) noexcept {
  if (this != &other) {
    Reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

BlasContext::~BlasContext() { Reset(); }

void BlasContext::Reset() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
  handle_ = nullptr;
}

}  // namespace octo::cuda
