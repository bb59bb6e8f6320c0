// cuda::SiluMul against cpu::SiluMul on the same inputs, aliasing included.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::RandomVector;
using testing::Tolerance;

// The two compute the same expression, g / (1 + expf(-g)) * up, in float;
// only expf differs: the GPU's is within 2 ulp (CUDA's documented bound), a
// relative 2 * 2^-23 = 2^-22. Through 1 + e that is at most 2^-22 relative,
// plus one rounding of 1 + e that may go the other way (2^-23); the division
// and the product may each round the other way once more (2^-23 each):
// 2^-22 + 3 * 2^-23 = 5 * 2^-23 = 6.0e-7 relative. 1e-6 bounds it. The
// absolute part covers g just below -88.7, where expf(-g) is within 2 ulp of
// FLT_MAX and the GPU's may overflow: silu is -0 on one side and ~-5e-37 on
// the other. The executor calls the host's expf, the CPU's own, so there the
// two are equal (measured worst: 0).
constexpr Tolerance kCudaVsCpu = {1e-6, 1e-36};

// gate in [-20, 20) (silu's curved part and both tails), up in [-4, 4),
// with expf's corners in the gate: exp(-g) overflowing (g < -88.7) or
// vanishing, -inf (silu(-inf) is NaN on both sides), zeros, a subnormal.
// (Not +inf: ExpectClose counts inf against inf as a miss, inf - inf being
// NaN.)
std::vector<float> Gate(size_t n, uint32_t seed) {
  std::vector<float> g = RandomVector(n, -20.0f, 20.0f, seed);
  const float specials[] = {-88.5f, -88.75f, -89.0f, -100.0f, 100.0f, 0.0f, -0.0f, 1e-40f,
                            -std::numeric_limits<float>::infinity()};
  for (size_t i = seed % 11; i < n; i += 11) g[i] = specials[(i / 11) % std::size(specials)];
  return g;
}

class SiluMulCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<float> Want(const std::vector<float>& gate, const std::vector<float>& up) {
    std::vector<float> want(gate.size());
    EXPECT_TRUE(cpu::SiluMul(gate.data(), up.data(), want.data(), static_cast<int64_t>(gate.size())).ok());
    return want;
  }
};

// n: 1, under a warp, around one 256-thread block, an FFN row (hidden_dim
// 11008, 14336), 9 tokens of 4096, and past the grid's 65536 threads.
TEST_F(SiluMulCudaTest, MatchesCpu) {
  uint32_t seed = 1;
  for (int64_t n : {1, 7, 255, 257, 1000, 11008, 14336, 9 * 4096, 200003}) {
    const std::vector<float> gate = Gate(n, seed++);
    const std::vector<float> up = RandomVector(n, -4.0f, 4.0f, seed++);
    auto d_gate = Upload(gate);
    auto d_up = Upload(up);
    auto d_out = Output<float>(n);
    ASSERT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), d_out.get(), n, stream()).ok());
    ExpectClose(d_out.Download(stream()), Want(gate, up), static_cast<int>(n), kCudaVsCpu,
                absl::StrFormat("n=%d", n));
  }
}

// out may be gate or up (the forward pass writes over gate).
TEST_F(SiluMulCudaTest, InPlaceMatchesCpu) {
  const int64_t n = 14336;
  const std::vector<float> gate = Gate(n, 50);
  const std::vector<float> up = RandomVector(n, -4.0f, 4.0f, 51);
  const std::vector<float> want = Want(gate, up);

  auto d_gate = Upload(gate);
  auto d_up = Upload(up);
  ASSERT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), d_gate.get(), n, stream()).ok());
  ExpectClose(d_gate.Download(stream()), want, static_cast<int>(n), kCudaVsCpu, "out == gate");

  d_gate = Upload(gate);
  ASSERT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), d_up.get(), n, stream()).ok());
  ExpectClose(d_up.Download(stream()), want, static_cast<int>(n), kCudaVsCpu, "out == up");
}

TEST_F(SiluMulCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto gate = Upload(std::vector<float>{1, 2, 3, 4});
  auto up = Upload(std::vector<float>{5, 6, 7, 8});
  auto out = Output<float>(4);
  struct Case {
    const float* gate;
    const float* up;
    float* out;
    int64_t n;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, up.get(), out.get(), 4, "gate is null"},
                        Case{gate.get(), nullptr, out.get(), 4, "up is null"},
                        Case{gate.get(), up.get(), nullptr, 4, "out is null"},
                        Case{gate.get(), up.get(), out.get(), 0, "n (0)"},
                        Case{gate.get(), up.get(), out.get(), -1, "n (-1)"}}) {
    testing::ExpectInvalidArgument(cuda::SiluMul(c.gate, c.up, c.out, c.n, stream()), "SiluMul", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
