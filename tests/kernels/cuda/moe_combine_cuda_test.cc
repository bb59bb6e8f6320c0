// cuda::MoeCombine against cpu::MoeCombine on the same inputs: the same float
// expression in the same order, so the same bits (tolerance 0) but for the
// device's expf in the shared expert's gate (tolerance below).
#include <algorithm>
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

using testing::ExpectSameBits;
using testing::RandomVector;

// With gate logits, only expf differs: the GPU's is within 2 ulp of the true
// value (CUDA's documented bound), the host's within 1, so the two are within
// 3 ulp, a relative 3 * 2^-23. 1 + e, the division and shared * gate may each
// round the other way once (2^-23 relative each): the products differ by at
// most 6 * 2^-23 * |shared * gate|; we allow 8. The sum acc + product starts
// from the same acc on both sides and may round the other way once more: one
// ulp of the result. So per element
//   |got - want| <= kGateRel * |shared * gate| + ulp(max(|got|, |want|)).
// Logits stay away from -88.7, where expf(-logit) nears FLT_MAX and one side
// may overflow (gate 0 against ~3e-39). The executor calls the host's expf,
// the CPU's own, so there the two are equal.
constexpr double kGateRel = 8.0 / (1 << 23);

// One MoeCombine call's inputs, shaped as kernels/ops.h says.
struct Inputs {
  int n_rows = 0, k = 0, dim = 0;
  std::vector<float> expert_out;          // (n_rows, k, dim)
  std::vector<float> weights;             // (n_rows, k)
  std::vector<float> shared;              // (n_rows, dim), or empty: no shared expert
  std::vector<float> shared_gate_logits;  // (n_rows), or empty: gate 1
};

// Expert outputs in [-4, 4), routing weights in [0, 1), a shared expert in
// [-4, 4), and logits in [-10, 10) with the gate's saturated tails (+-100:
// gate exactly 1 and 0 on both sides) and 0 (gate 1/2) sprinkled in.
Inputs MakeInputs(int n_rows, int k, int dim, bool with_shared, bool with_logits, uint32_t seed) {
  Inputs in;
  in.n_rows = n_rows;
  in.k = k;
  in.dim = dim;
  in.expert_out = RandomVector(static_cast<size_t>(n_rows) * k * dim, -4.0f, 4.0f, seed);
  in.weights = RandomVector(static_cast<size_t>(n_rows) * k, 0.0f, 1.0f, seed + 1);
  if (with_shared) in.shared = RandomVector(static_cast<size_t>(n_rows) * dim, -4.0f, 4.0f, seed + 2);
  if (with_logits) {
    in.shared_gate_logits = RandomVector(n_rows, -10.0f, 10.0f, seed + 3);
    const float specials[] = {100.0f, -100.0f, 0.0f};
    for (size_t r = seed % 5; r < in.shared_gate_logits.size(); r += 5) {
      in.shared_gate_logits[r] = specials[(r / 5) % std::size(specials)];
    }
  }
  return in;
}

class MoeCombineCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<float> Want(const Inputs& in) {
    std::vector<float> want(static_cast<size_t>(in.n_rows) * in.dim);
    MoeCombineParams p;
    p.expert_out = in.expert_out.data();
    p.weights = in.weights.data();
    p.shared = in.shared.empty() ? nullptr : in.shared.data();
    p.shared_gate_logits = in.shared_gate_logits.empty() ? nullptr : in.shared_gate_logits.data();
    p.out = want.data();
    p.n_rows = in.n_rows;
    p.k = in.k;
    p.dim = in.dim;
    EXPECT_TRUE(cpu::MoeCombine(p).ok());
    return want;
  }

  std::vector<float> Got(const Inputs& in) {
    auto d_expert_out = Upload(in.expert_out);
    auto d_weights = Upload(in.weights);
    testing::DeviceVector<float> d_shared, d_logits;
    if (!in.shared.empty()) d_shared = Upload(in.shared);
    if (!in.shared_gate_logits.empty()) d_logits = Upload(in.shared_gate_logits);
    auto d_out = Output<float>(static_cast<size_t>(in.n_rows) * in.dim);
    MoeCombineParams p;
    p.expert_out = d_expert_out.get();
    p.weights = d_weights.get();
    p.shared = in.shared.empty() ? nullptr : d_shared.get();
    p.shared_gate_logits = in.shared_gate_logits.empty() ? nullptr : d_logits.get();
    p.out = d_out.get();
    p.n_rows = in.n_rows;
    p.k = in.k;
    p.dim = in.dim;
    const absl::Status status = cuda::MoeCombine(p, stream());
    EXPECT_TRUE(status.ok()) << status;
    return d_out.Download(stream());
  }
};

// n_rows: 1 (decode), 3, 17 (a prefill chunk); k: 1, 2, 8 (qwen2moe's
// top-8); dim: 1, a warp pair, odd past a 256-thread block, a width. Without
// logits, with and without a shared expert: the same bits.
TEST_F(MoeCombineCudaTest, WithoutGateLogitsMatchesCpuBitForBit) {
  uint32_t seed = 1;
  for (int n_rows : {1, 3, 17}) {
    for (int k : {1, 2, 8}) {
      for (int dim : {1, 64, 257, 1000}) {
        for (bool with_shared : {false, true}) {
          const Inputs in = MakeInputs(n_rows, k, dim, with_shared, /*with_logits=*/false, seed);
          seed += 4;
          ExpectSameBits(Got(in), Want(in),
                         absl::StrFormat("n_rows=%d k=%d dim=%d shared=%d", n_rows, k, dim, with_shared));
        }
      }
    }
  }
}

// Logits without a shared expert are ignored: no expf, the same bits.
TEST_F(MoeCombineCudaTest, LogitsWithoutSharedMatchCpuBitForBit) {
  const Inputs in = MakeInputs(17, 8, 257, /*with_shared=*/false, /*with_logits=*/true, 300);
  ExpectSameBits(Got(in), Want(in), "logits, no shared");
}

// With gate logits: within kGateRel * |shared * gate| + one ulp of the result.
TEST_F(MoeCombineCudaTest, WithGateLogitsMatchesCpuWithinExpfTolerance) {
  uint32_t seed = 1000;
  for (int n_rows : {1, 3, 17}) {
    for (int k : {1, 2, 8}) {
      for (int dim : {1, 64, 257, 1000}) {
        const Inputs in = MakeInputs(n_rows, k, dim, /*with_shared=*/true, /*with_logits=*/true, seed);
        seed += 4;
        const std::vector<float> got = Got(in);
        const std::vector<float> want = Want(in);
        ASSERT_EQ(got.size(), want.size());
        size_t misses = 0;
        for (size_t e = 0; e < got.size(); ++e) {
          const size_t r = e / dim;
          const float gate = 1.0f / (1.0f + std::exp(-in.shared_gate_logits[r]));
          const float larger = std::max(std::abs(got[e]), std::abs(want[e]));
          const double ulp = std::nextafter(larger, std::numeric_limits<float>::infinity()) - larger;
          const double bound = kGateRel * std::abs(static_cast<double>(in.shared[e]) * gate) + ulp;
          if (!(std::abs(static_cast<double>(got[e]) - want[e]) <= bound)) {
            if (misses++ == 0) {
              ADD_FAILURE() << absl::StrFormat("n_rows=%d k=%d dim=%d: row %d index %d: got %.9g, want %.9g",
                                               n_rows, k, dim, r, e % dim, got[e], want[e]);
            }
          }
        }
        EXPECT_EQ(misses, 0u) << absl::StrFormat("n_rows=%d k=%d dim=%d: elements outside the tolerance", n_rows,
                                                 k, dim);
      }
    }
  }
}

TEST_F(MoeCombineCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto expert_out = Upload(std::vector<float>{1, 2, 3, 4});  // (1, 2, 2)
  auto weights = Upload(std::vector<float>{0.5f, 0.5f});     // (1, 2)
  auto out = Output<float>(2);                               // (1, 2)
  struct Case {
    const float* expert_out;
    const float* weights;
    float* out;
    int n_rows, k, dim;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, weights.get(), out.get(), 1, 2, 2, "expert_out is null"},
                        Case{expert_out.get(), nullptr, out.get(), 1, 2, 2, "weights is null"},
                        Case{expert_out.get(), weights.get(), nullptr, 1, 2, 2, "out is null"},
                        Case{expert_out.get(), weights.get(), out.get(), 0, 2, 2, "n_rows (0)"},
                        Case{expert_out.get(), weights.get(), out.get(), 1, -1, 2, "k (-1)"},
                        Case{expert_out.get(), weights.get(), out.get(), 1, 2, 0, "dim (0)"}}) {
    MoeCombineParams p;
    p.expert_out = c.expert_out;
    p.weights = c.weights;
    p.out = c.out;
    p.n_rows = c.n_rows;
    p.k = c.k;
    p.dim = c.dim;
    testing::ExpectInvalidArgument(cuda::MoeCombine(p, stream()), "MoeCombine", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
