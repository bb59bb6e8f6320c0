// MatVec, CUDA's decode matmul: first the block decoders it runs
// (kernels/block_decode.h), on the host, against the CPU backend's
// DequantizeRows for every type, bit for bit; then cuda::MatVec against fp64
// dot products of the same dequantized rows (skipped without a GPU).
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/block_decode.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

#if defined(OCTO_HAVE_CUDA)
#include "kernels/cuda/device.h"
#endif

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

// rows x cols of `type` dequantized by the CPU backend.
std::vector<float> Dequantized(GgmlType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  const absl::Status status = cpu::DequantizeRows(WeightMatrix{type, bytes.data(), rows, cols}, 0, rows, values.data());
  EXPECT_TRUE(status.ok()) << status;
  return values;
}

TEST(BlockDecodeTest, EveryTypeDecodesAsDequantizeRowsBitForBit) {
  constexpr int64_t kRows = 3, kCols = 512;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    const std::vector<uint8_t> bytes = RandomWeights(info.type, kRows, kCols, /*seed=*/7);
    const std::vector<float> want = Dequantized(info.type, bytes, kRows, kCols);
    const bool decoded = block_decode::WithDecoder(info.type, false, [&](auto decoder) {
      using D = decltype(decoder);
      EXPECT_EQ(static_cast<uint32_t>(D::kElements), info.block_size) << info.name;
      EXPECT_EQ(static_cast<uint32_t>(D::kBytes), info.type_size) << info.name;
      const int64_t row_bytes = kCols / D::kElements * D::kBytes;
      int mismatches = 0;
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t e = 0; e < kCols; ++e) {
          const float got = D::Element(bytes.data() + r * row_bytes + e / D::kElements * D::kBytes,
                                       static_cast<int>(e % D::kElements));
          const float expected = want[static_cast<size_t>(r * kCols + e)];
          if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(expected) && ++mismatches <= 3) {
            ADD_FAILURE() << info.name << " row " << r << " element " << e << ": " << got << " vs " << expected;
          }
        }
      }
      return true;
    });
    EXPECT_TRUE(decoded) << info.name << " has no decoder";
  }
}

TEST(BlockDecodeTest, AValueOutsideTheEnumHasNoDecoder) {
  EXPECT_FALSE(block_decode::WithDecoder(static_cast<GgmlType>(4), false, [](auto) { return true; }));
}

// --- CUDA --------------------------------------------------------------------
#if defined(OCTO_HAVE_CUDA)

#define SKIP_WITHOUT_CUDA_DEVICE()                                                                   \
  do {                                                                                               \
    if (cuda::CudaDeviceCount() == 0) {                                                              \
      GTEST_SKIP() << "no CUDA device (or no driver); this case runs on a machine with a GPU";       \
    }                                                                                                \
  } while (false)

// Checked before any CUDA call, so this runs without a GPU.
TEST(MatVecCudaTest, RejectsBadArguments) {
  const float x[256] = {};
  float out[4];
  const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ4_K, 1, 256, 1);
  struct Case {
    WeightMatrix w;
    const float* x;
    float* out;
    int n_tokens;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{GgmlType::kQ4_K, nullptr, 1, 256}, x, out, 1, "w.data is null"},
      {{GgmlType::kQ4_K, w.data(), 1, 256}, nullptr, out, 1, "x is null"},
      {{GgmlType::kQ4_K, w.data(), 1, 256}, x, nullptr, 1, "out is null"},
      {{GgmlType::kQ4_K, w.data(), 1, 128}, x, out, 1, "multiple of 256"},
      {{GgmlType::kQ4_K, w.data(), 0, 256}, x, out, 1, "rows > 0"},
      {{static_cast<GgmlType>(4), w.data(), 1, 256}, x, out, 1, "not a weight type"},
      {{GgmlType::kQ4_K, w.data(), 1, 256}, x, out, 0, "n_tokens is 0"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cuda::MatVec(c.w, c.x, c.out, c.n_tokens, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle << ": " << status;
    EXPECT_NE(status.message().find(c.needle), std::string::npos) << status;
  }
}

TEST(MatVecCudaTest, FailsWithStatusWithoutDevice) {
  if (cuda::CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ8_0, 2, 32, 1);
  const std::vector<float> x(32, 1.0f);
  float out[2];
  const absl::Status status = cuda::MatVec(WeightMatrix{GgmlType::kQ8_0, w.data(), 2, 32}, x.data(), out, 1, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

// Tolerance: each lane sums cols / 32 products in float, then a 5-level tree:
// the error is at most (cols / 32 + 5) * 2^-24 of sum |w_i * x_i|, under
// 8e-6 for cols 4096. 1e-5 of that sum, plus 1e-6 near zero.
TEST(MatVecCudaTest, MatchesFp64ForEveryTypeAndBatch) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto stream = cuda::CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  struct Shape {
    int64_t rows, cols;
    int n_tokens;
  };
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    for (const Shape& s : {Shape{1, 256, 1}, Shape{7, 512, 3}, Shape{33, 4096, 8}, Shape{70, 1024, 11}}) {
      const std::string what = absl::StrFormat("%s %dx%d, %d tokens", info.name, s.rows, s.cols, s.n_tokens);
      const std::vector<uint8_t> bytes = RandomWeights(info.type, s.rows, s.cols, 11);
      const std::vector<float> w = Dequantized(info.type, bytes, s.rows, s.cols);
      const std::vector<float> x = RandomActivations(s.n_tokens * s.cols, 12);
      auto d_w = cuda::DeviceBuffer::Allocate(bytes.size());
      auto d_x = cuda::DeviceBuffer::Allocate(x.size() * sizeof(float));
      auto d_out = cuda::DeviceBuffer::Allocate(static_cast<size_t>(s.n_tokens * s.rows) * sizeof(float));
      ASSERT_TRUE(d_w.ok() && d_x.ok() && d_out.ok()) << what;
      ASSERT_TRUE(d_w->CopyFromHost(bytes.data(), bytes.size(), stream->get()).ok());
      ASSERT_TRUE(d_x->CopyFromHost(x.data(), d_x->size(), stream->get()).ok());
      const absl::Status launched = cuda::MatVec(WeightMatrix{info.type, d_w->data(), s.rows, s.cols},
                                                 d_x->as<float>(), d_out->as<float>(), s.n_tokens, stream->get());
      ASSERT_TRUE(launched.ok()) << what << ": " << launched;
      ASSERT_TRUE(stream->Synchronize().ok()) << what;
      std::vector<float> got(static_cast<size_t>(s.n_tokens * s.rows));
      ASSERT_TRUE(d_out->CopyToHost(got.data(), d_out->size(), stream->get()).ok());
      for (int t = 0; t < s.n_tokens; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) {
          double want = 0, magnitude = 0;
          for (int64_t c = 0; c < s.cols; ++c) {
            const double product = static_cast<double>(w[r * s.cols + c]) * x[t * s.cols + c];
            want += product;
            magnitude += std::fabs(product);
          }
          EXPECT_NEAR(got[t * s.rows + r], want, 1e-5 * magnitude + 1e-6) << what << " token " << t << " row " << r;
        }
      }
    }
  }
}

#endif  // defined(OCTO_HAVE_CUDA)

}  // namespace
}  // namespace octo
