// cuda::Gelu against cpu::Gelu on the same inputs, aliasing included.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

// Both round x to fp16, evaluate the same float expression and round the
// result to fp16; only tanhf differs (the device's within 2 ulp). That moves
// g by a few float ulps, which changes its fp16 rounding only when g lies
// that close to an fp16 midpoint: then the two are adjacent fp16 values.
// So each output is the CPU's bits or one fp16 step from it (a step of the
// fp16 value, 2^-10 relative; the test counts such outputs). The executor
// calls the host's tanhf, the CPU's own: there every output is the same.

// Every fp16 value in (-10, 10), the cut-offs and what lies past them,
// random floats over [-12, 12), signed zeros, infinities.
std::vector<float> Inputs(size_t n_random, uint32_t seed) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float h = Fp16ToFp32(static_cast<uint16_t>(bits));
    if (std::abs(h) < 10.0f) x.push_back(h);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {-10.0f, 10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f), -1e30f, 1e30f, -inf, inf,
                  0.0f, -0.0f}) {
    x.push_back(f);
  }
  const std::vector<float> random = RandomVector(n_random, -12.0f, 12.0f, seed);
  x.insert(x.end(), random.begin(), random.end());
  return x;
}

// Each output is the CPU's bits, or (returned count) an fp16 step from it.
size_t ExpectWithinOneFp16Step(const std::vector<float>& got, const std::vector<float>& want,
                               const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  size_t steps = 0, misses = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    const int gap = std::abs(static_cast<int>(Fp32ToFp16(got[i])) - static_cast<int>(Fp32ToFp16(want[i])));
    const bool fp16_values = Fp16ToFp32(Fp32ToFp16(got[i])) == got[i];
    if (fp16_values && gap == 1) {
      ++steps;
    } else if (misses++ == 0) {
      ADD_FAILURE() << what << ": index " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(misses, 0u) << what;
  return steps;
}

class GeluCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<float> Want(const std::vector<float>& x) {
    std::vector<float> want(x.size());
    EXPECT_TRUE(cpu::Gelu(x.data(), want.data(), static_cast<int64_t>(x.size())).ok());
    return want;
  }
};

// n: the sweep (over 65536 values: past the grid's 65536 threads, so
// threads stride), and short calls (1, under a warp, around a block).
TEST_F(GeluCudaTest, MatchesCpu) {
  size_t steps = 0, total = 0;
  uint32_t seed = 1;
  for (size_t n_random : {size_t{100003}, size_t{0}}) {
    const std::vector<float> x = Inputs(n_random, seed++);
    auto d_x = Upload(x);
    auto d_out = Output<float>(x.size());
    ASSERT_TRUE(cuda::Gelu(d_x.get(), d_out.get(), static_cast<int64_t>(x.size()), stream()).ok());
    steps += ExpectWithinOneFp16Step(d_out.Download(stream()), Want(x), absl::StrFormat("n=%d", x.size()));
    total += x.size();
  }
  for (int64_t n : {1, 7, 255, 257}) {
    const std::vector<float> x = RandomVector(n, -12.0f, 12.0f, seed++);
    auto d_x = Upload(x);
    auto d_out = Output<float>(n);
    ASSERT_TRUE(cuda::Gelu(d_x.get(), d_out.get(), n, stream()).ok());
    steps += ExpectWithinOneFp16Step(d_out.Download(stream()), Want(x), absl::StrFormat("n=%d", n));
    total += n;
  }
  std::printf("%zu of %zu outputs one fp16 step from the CPU's, the rest bit for bit\n", steps, total);
}

TEST_F(GeluCudaTest, NanStaysNan) {
  auto d_x = Upload(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
  auto d_out = Upload(std::vector<float>{0.0f});  // not the NaN Output() fills with
  ASSERT_TRUE(cuda::Gelu(d_x.get(), d_out.get(), 1, stream()).ok());
  EXPECT_TRUE(std::isnan(d_out.Download(stream())[0]));
}

// out may be x (the forward pass writes over the FFN's hidden row).
TEST_F(GeluCudaTest, InPlaceMatchesCpu) {
  const std::vector<float> x = RandomVector(3072 * 5, -12.0f, 12.0f, 50);
  auto d_x = Upload(x);
  ASSERT_TRUE(cuda::Gelu(d_x.get(), d_x.get(), static_cast<int64_t>(x.size()), stream()).ok());
  ExpectWithinOneFp16Step(d_x.Download(stream()), Want(x), "out == x");
}

TEST_F(GeluCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto x = Upload(std::vector<float>{1, 2, 3, 4});
  auto out = Output<float>(4);
  struct Case {
    const float* x;
    float* out;
    int64_t n;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, out.get(), 4, "x is null"}, Case{x.get(), nullptr, 4, "out is null"},
                        Case{x.get(), out.get(), 0, "n (0)"}, Case{x.get(), out.get(), -1, "n (-1)"}}) {
    testing::ExpectInvalidArgument(cuda::Gelu(c.x, c.out, c.n, stream()), "Gelu", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
