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

void ExpectSameRow(const TopLogitsRow& got, const TopLogitsRow& want, int vocab, const std::string& what) {
  EXPECT_EQ(got.n_finite, want.n_finite) << what;
  EXPECT_EQ(got.bad_id, want.bad_id) << what;
  EXPECT_EQ(std::bit_cast<uint32_t>(got.bad_logit), std::bit_cast<uint32_t>(want.bad_logit)) << what;
  if (want.bad_id >= 0) return;
  EXPECT_EQ(std::bit_cast<uint32_t>(got.max_logit), std::bit_cast<uint32_t>(want.max_logit)) << what;
#if defined(OCTO_CUDA_SIM)
  EXPECT_EQ(std::bit_cast<uint64_t>(got.sum_exp), std::bit_cast<uint64_t>(want.sum_exp)) << what;
#else
  EXPECT_NEAR(got.sum_exp, want.sum_exp, kSumTolerance * want.sum_exp) << what;
#endif
  for (int j = 0; j < std::min(vocab, kTopLogits); ++j) {
    EXPECT_EQ(got.top[j].id, want.top[j].id) << what << " rank " << j;
    EXPECT_EQ(std::bit_cast<uint32_t>(got.top[j].logit), std::bit_cast<uint32_t>(want.top[j].logit))
        << what << " rank " << j;
  }
}

// Rows with ties (at the cut too), -0 and +0, few or no finite logits, NaN
// and +inf, at widths below and past kTopLogits and a block.
TEST_F(TopLogitsCudaTest, MatchesCpuAndASortOfTheRow) {
  for (const testing::LogitRows& s : testing::TopLogitsTestRows()) {
    const std::vector<TopLogitsRow> got = Run(s.logits, s.rows(), s.vocab);
    std::vector<TopLogitsRow> cpu(s.rows());
    ASSERT_TRUE(cpu::TopLogits(s.logits.data(), s.rows(), s.vocab, cpu.data()).ok());
    for (int r = 0; r < s.rows(); ++r) {
      const std::string what = s.what + " row " + std::to_string(r);
      ExpectSameRow(got[r], cpu[r], s.vocab, what + " (cpu)");
      ExpectSameRow(got[r], testing::HostTopLogits(s.logits.data() + static_cast<size_t>(r) * s.vocab, s.vocab),
                    s.vocab, what + " (sort)");
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
    ExpectSameRow(alone, batch[r], s.vocab, "row " + std::to_string(r));
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
