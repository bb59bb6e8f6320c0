// RMSNorm: the CPU version against a double-precision reference, and the CUDA
// version against the CPU version on the same inputs (skipped without a GPU).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

#if defined(OCTO_HAVE_CUDA)
#include "kernels/cuda/device.h"
#endif

namespace octo {
namespace {

using testing::RandomVector;

// Tolerance, per element: |got - want| <= abs_tol + rel_tol * |want|.
//
// CPU vs double: the CPU version sums the squares in double, so what is left
// is a handful of float roundings of 2^-24 (6e-8) each: the square, the mean,
// mean + eps, sqrt, the division, two products; at most ~7 * 6e-8 = 4.2e-7.
// Measured on inputs like these (200 seeds): 2.1e-7 at worst. 1e-6 leaves
// room and still catches a float sum (SumsSquaresInDouble: off by 3e-5).
//
// CUDA vs CPU: the CUDA version sums dim squares in float (a tree). That sum's
// rounding error grows like sqrt(dim) * 2^-24 for inputs like these (the
// bound is dim * 2^-24), the scale, a square root, carries half of it, and the
// rest is a few roundings of 2^-24 each. Measured with the float-summing CPU
// version this replaced (200 seeds, dim 8192): 2.3e-6 at worst vs double, and
// a host emulation of the CUDA summation order 2.5e-6. 1e-5 leaves 4x room and
// still catches a wrong formula, a skipped element or a wrong eps. The
// absolute part matters near 0.
struct Tolerance {
  double rel;
  double abs;
};
constexpr Tolerance kCpuVsDouble = {1e-6, 1e-7};
constexpr Tolerance kCudaVsCpu = {1e-5, 1e-6};
constexpr float kEps = 1e-5f;

struct Shape {
  int n_rows;
  int dim;
};

// dim: 1, not multiples of 32 (7, 33, 100, 1000), one warp, under and over
// one 1024-thread block, model sizes (4096, 8192).
constexpr Shape kShapes[] = {{1, 1},   {1, 7},    {3, 31},   {4, 32},    {4, 33},
                             {2, 100}, {64, 128}, {5, 1000}, {3, 1025},  {2, 4096},
                             {3, 8192}};

// The formula of ops.h in double throughout.
std::vector<double> ReferenceRmsNorm(const std::vector<float>& x, const std::vector<float>& weight,
                                     int n_rows, int dim, float eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < n_rows; ++r) {
    const size_t base = static_cast<size_t>(r) * dim;
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[base + i]) * x[base + i];
    const double scale = 1.0 / std::sqrt(ss / dim + static_cast<double>(eps));
    for (int i = 0; i < dim; ++i) out[base + i] = x[base + i] * scale * weight[i];
  }
  return out;
}

// Checks every element against the tolerance above and reports the first
// miss (row, index, values) rather than thousands of lines.
template <typename Want>
void ExpectClose(const std::vector<float>& got, const std::vector<Want>& want, int dim,
                 const Tolerance& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t misses = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    const double w = static_cast<double>(want[k]);
    const double diff = std::abs(static_cast<double>(got[k]) - w);
    if (!(diff <= tol.abs + tol.rel * std::abs(w))) {
      if (misses == 0) {
        ADD_FAILURE() << what << ": row " << k / dim << " index " << k % dim << ": got "
                      << got[k] << ", want " << w << " (diff " << diff << ")";
      }
      ++misses;
    }
  }
  EXPECT_EQ(misses, 0u) << what << ": elements outside the tolerance";
}

std::string Describe(const Shape& s) {
  return absl::StrFormat("n_rows=%d dim=%d", s.n_rows, s.dim);
}

// --- CPU ---------------------------------------------------------------------

TEST(RmsNormCpuTest, MatchesDoublePrecisionReference) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
    const std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
    const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
    std::vector<float> out(n);
    ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), s.n_rows, s.dim, kEps).ok());
    ExpectClose(out, ReferenceRmsNorm(x, weight, s.n_rows, s.dim, kEps), s.dim, kCpuVsDouble,
                Describe(s));
  }
}

TEST(RmsNormCpuTest, ConstantRowHasClosedForm) {
  // x == 3 everywhere: mean(x^2) == 9, so out == 3 / sqrt(9 + eps) * weight.
  const int dim = 10;
  const float eps = 0.5f;
  const std::vector<float> x(dim, 3.0f);
  const std::vector<float> weight = {1, 2, 3, 4, 5, -1, -2, 0, 0.5f, 10};
  std::vector<float> out(dim);
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), 1, dim, eps).ok());
  for (int i = 0; i < dim; ++i) {
    EXPECT_NEAR(out[i], 3.0 / std::sqrt(9.5) * weight[i], 1e-6) << "index " << i;
  }
}

// llama.cpp's CPU backend sums the squares in double; a float sum would drop
// every 1 added to 2^24 (the float spacing there is 2). Row: 4096 (square
// 2^24) then 1000 ones, so the exact sum is 2^24 + 1000, the float sum 2^24.
// The expected values follow ggml's steps: mean rounded to float, then
// 1.0f / sqrtf(mean + eps), then (x * scale) * weight, all in float.
TEST(RmsNormCpuTest, SumsSquaresInDouble) {
  const int dim = 1001;
  std::vector<float> x(dim, 1.0f);
  x[0] = 4096.0f;
  const std::vector<float> weight(dim, 0.75f);
  std::vector<float> out(dim);
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), 1, dim, kEps).ok());

  const float mean = static_cast<float>((16777216.0 + 1000.0) / dim);
  const float scale = 1.0f / std::sqrt(mean + kEps);
  EXPECT_EQ(out[0], (4096.0f * scale) * 0.75f);
  EXPECT_EQ(out[1], scale * 0.75f);
  EXPECT_EQ(out[dim - 1], scale * 0.75f);
}

TEST(RmsNormCpuTest, InPlaceGivesSameResult) {
  const int n_rows = 3, dim = 257;
  std::vector<float> x = RandomVector(n_rows * dim, -2.0f, 2.0f, 7);
  const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, 8);
  std::vector<float> out(x.size());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), n_rows, dim, kEps).ok());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), x.data(), n_rows, dim, kEps).ok());
  EXPECT_EQ(x, out);
}

// --- Preconditions, shared by both versions ------------------------------------

using RmsNormFn = std::function<absl::Status(const float* x, const float* weight, float* out,
                                             int n_rows, int dim, float eps)>;

// Every broken precondition gives INVALID_ARGUMENT and leaves out untouched.
void ExpectRejectsBadArguments(const RmsNormFn& rms_norm) {
  const float x[4] = {1, 2, 3, 4};
  const float weight[2] = {1, 1};
  float out[4] = {-7, -7, -7, -7};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    const float* x;
    const float* weight;
    float* out;
    int n_rows;
    int dim;
    float eps;
  };
  const Case cases[] = {
      {"null x", nullptr, weight, out, 2, 2, kEps},
      {"null weight", x, nullptr, out, 2, 2, kEps},
      {"null out", x, weight, nullptr, 2, 2, kEps},
      {"zero rows", x, weight, out, 0, 2, kEps},
      {"negative rows", x, weight, out, -1, 2, kEps},
      {"zero dim", x, weight, out, 2, 0, kEps},
      {"negative dim", x, weight, out, 2, -3, kEps},
      {"negative eps", x, weight, out, 2, 2, -1e-6f},
      {"NaN eps", x, weight, out, 2, 2, nan},
  };
  for (const Case& c : cases) {
    const absl::Status status = rms_norm(c.x, c.weight, c.out, c.n_rows, c.dim, c.eps);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << status;
    EXPECT_NE(status.message().find("RmsNorm"), std::string::npos) << c.name << ": " << status;
  }
  for (float f : out) EXPECT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

TEST(RmsNormCpuTest, RejectsBadArguments) { ExpectRejectsBadArguments(cpu::RmsNorm); }

TEST(RmsNormCpuTest, ZeroEpsIsAllowed) {
  const float x[2] = {3, 4};  // mean(x^2) == 12.5
  const float weight[2] = {1, 1};
  float out[2];
  ASSERT_TRUE(cpu::RmsNorm(x, weight, out, 1, 2, 0.0f).ok());
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(out[1], 4 / std::sqrt(12.5), 1e-6);
}

// --- CUDA --------------------------------------------------------------------
#if defined(OCTO_HAVE_CUDA)

#define SKIP_WITHOUT_CUDA_DEVICE()                                                       \
  do {                                                                                   \
    if (cuda::CudaDeviceCount() == 0) {                                                  \
      GTEST_SKIP() << "no CUDA device (or no driver): CudaDeviceCount() == 0; this case " \
                      "runs on a machine with a GPU";                                    \
    }                                                                                    \
  } while (false)

// Preconditions are checked before any CUDA call, so this runs without a GPU.
TEST(RmsNormCudaTest, RejectsBadArguments) {
  ExpectRejectsBadArguments([](const float* x, const float* weight, float* out, int n_rows,
                               int dim, float eps) {
    return cuda::RmsNorm(x, weight, out, n_rows, dim, eps, /*stream=*/nullptr);
  });
}

// Without a device the launch fails and comes back as a Status rather than a
// crash; this exercises OCTO_CUDA_RETURN_IF_ERROR where CI can run it.
TEST(RmsNormCudaTest, FailsWithStatusWithoutDevice) {
  if (cuda::CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  const float x[2] = {1, 2};
  const float weight[2] = {1, 1};
  float out[2];
  const absl::Status status = cuda::RmsNorm(x, weight, out, 1, 2, kEps, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("rmsnorm.cu"), std::string::npos) << status;
}

// Runs cuda::RmsNorm on a fresh stream; `in_place` passes the x buffer as out.
std::vector<float> RunCuda(const std::vector<float>& x, const std::vector<float>& weight,
                           int n_rows, int dim, bool in_place) {
  auto stream = cuda::CudaStream::Create();
  EXPECT_TRUE(stream.ok()) << stream.status();
  auto d_x = cuda::DeviceBuffer::Allocate(x.size() * sizeof(float));
  auto d_weight = cuda::DeviceBuffer::Allocate(weight.size() * sizeof(float));
  auto d_out = cuda::DeviceBuffer::Allocate(x.size() * sizeof(float));
  EXPECT_TRUE(d_x.ok() && d_weight.ok() && d_out.ok());
  if (!stream.ok() || !d_x.ok() || !d_weight.ok() || !d_out.ok()) return {};
  const cudaStream_t s = stream->get();

  EXPECT_TRUE(d_x->CopyFromHost(x.data(), d_x->size(), s).ok());
  EXPECT_TRUE(d_weight->CopyFromHost(weight.data(), d_weight->size(), s).ok());
  float* out = in_place ? d_x->as<float>() : d_out->as<float>();
  const absl::Status launched =
      cuda::RmsNorm(d_x->as<float>(), d_weight->as<float>(), out, n_rows, dim, kEps, s);
  EXPECT_TRUE(launched.ok()) << launched;
  // Wait for the kernel, so a fault in it is reported here, not by the copy.
  const absl::Status ran = stream->Synchronize();
  EXPECT_TRUE(ran.ok()) << ran;

  std::vector<float> result(x.size());
  const cuda::DeviceBuffer& d_result = in_place ? *d_x : *d_out;
  EXPECT_TRUE(d_result.CopyToHost(result.data(), d_result.size(), s).ok());
  return result;
}

TEST(RmsNormCudaTest, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
    const std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
    const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
    std::vector<float> want(n);
    ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), want.data(), s.n_rows, s.dim, kEps).ok());
    ExpectClose(RunCuda(x, weight, s.n_rows, s.dim, /*in_place=*/false), want, s.dim,
                kCudaVsCpu, Describe(s));
  }
}

TEST(RmsNormCudaTest, InPlaceMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Shape s = {5, 4096};
  const std::vector<float> x = RandomVector(s.n_rows * s.dim, -4.0f, 4.0f, 42);
  const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, 43);
  std::vector<float> want(x.size());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), want.data(), s.n_rows, s.dim, kEps).ok());
  ExpectClose(RunCuda(x, weight, s.n_rows, s.dim, /*in_place=*/true), want, s.dim, kCudaVsCpu,
              "in place " + Describe(s));
}

#endif  // defined(OCTO_HAVE_CUDA)

}  // namespace
}  // namespace octo
