// cuda::TopLogits against cpu::TopLogits and a sort of the whole row: the
// same candidates, max, count and bad entry bit for bit, and the sum of exps
// (one order on both, kernels/sum_exp.h) bit for bit in the executor, within
// 1e-12 relative on a GPU (its exp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/top_logits_test_util.h"

namespace octo {
namespace {

constexpr double kSumTolerance = 1e-12;  // relative, on a GPU: ops.h's promise for cuda::TopLogits

class TopLogitsCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<TopLogitsRow> Run(const std::vector<float>& logits, int n_rows, int vocab) {
    auto d_logits = Upload(logits);
    auto d_out = Output<TopLogitsRow>(n_rows);
    const absl::Status launched = cuda::TopLogits(d_logits.get(), n_rows, vocab, d_out.get(), stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return d_out.Download(stream());
  }
};

// In the executor the device's exp is the host's: the sum bit for bit.
#if defined(OCTO_CUDA_SIM)
constexpr double kSumCheck = 0;
#else
constexpr double kSumCheck = kSumTolerance;
#endif

// Rows with ties (at the cut too), -0 and +0, few or no finite logits, NaN
// and +inf, at widths below and past kTopLogits and a block.
TEST_F(TopLogitsCudaTest, MatchesCpuAndASortOfTheRow) {
  for (const testing::LogitRows& s : testing::TopLogitsTestRows()) {
    const std::vector<TopLogitsRow> got = Run(s.logits, s.rows(), s.vocab);
    std::vector<TopLogitsRow> cpu(s.rows());
    ASSERT_TRUE(cpu::TopLogits(s.logits.data(), s.rows(), s.vocab, cpu.data()).ok());
    for (int r = 0; r < s.rows(); ++r) {
      const std::string what = s.what + " row " + std::to_string(r);
      testing::ExpectSameRow(got[r], cpu[r], s.vocab, what + " (cpu)", kSumCheck);
      testing::ExpectSameRow(got[r],
                             testing::HostTopLogits(s.logits.data() + static_cast<size_t>(r) * s.vocab, s.vocab),
                             s.vocab, what + " (sort)", kSumCheck);
    }
  }
}

// A row's result does not depend on the other rows of the call.
TEST_F(TopLogitsCudaTest, RowsAreIndependent) {
  const testing::LogitRows s = testing::TopLogitsTestRows()[3];
  const std::vector<TopLogitsRow> batch = Run(s.logits, s.rows(), s.vocab);
  for (int r = 0; r < s.rows(); r += 2) {
    const std::vector<float> row(s.logits.begin() + static_cast<size_t>(r) * s.vocab,
                                 s.logits.begin() + static_cast<size_t>(r + 1) * s.vocab);
    const TopLogitsRow alone = Run(row, 1, s.vocab)[0];
    EXPECT_EQ(std::bit_cast<uint64_t>(alone.sum_exp), std::bit_cast<uint64_t>(batch[r].sum_exp)) << "row " << r;
    testing::ExpectSameRow(alone, batch[r], s.vocab, "row " + std::to_string(r));
  }
}

TEST_F(TopLogitsCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto logits = Upload(std::vector<float>(8, 1.0f));
  auto out = Output<TopLogitsRow>(1);
  testing::ExpectInvalidArgument(cuda::TopLogits(nullptr, 1, 8, out.get(), stream()), "TopLogits", "logits is null");
  testing::ExpectInvalidArgument(cuda::TopLogits(logits.get(), 1, 8, nullptr, stream()), "TopLogits", "out is null");
  testing::ExpectInvalidArgument(cuda::TopLogits(logits.get(), 0, 8, out.get(), stream()), "TopLogits", "n_rows (0)");
  testing::ExpectInvalidArgument(cuda::TopLogits(logits.get(), 1, 0, out.get(), stream()), "TopLogits", "vocab (0)");
  EXPECT_EQ(out.Download(stream())[0].n_finite, -1) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
