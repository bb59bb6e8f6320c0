// cuda::DequantizeRows against cpu::DequantizeRows: the same bits
// (tolerance 0) for every weight type, any row range.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "storage/ggml_type.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::ExpectSameBits;

class DequantizeRowsCudaTest : public testing::CudaOpTest {
 protected:
  // Rows [first_row, first_row + n_rows) of w, from the CPU and from CUDA
  // (w_device: the same bytes in device memory), compared bit for bit.
  void ExpectSameAsCpu(const WeightMatrix& w, const WeightMatrix& w_device, int64_t first_row, int64_t n_rows) {
    const size_t n = static_cast<size_t>(n_rows * w.cols);
    std::vector<float> want(n);
    ASSERT_TRUE(cpu::DequantizeRows(w, first_row, n_rows, want.data()).ok());
    auto out = Output<float>(n);
    const absl::Status launched = cuda::DequantizeRows(w_device, first_row, n_rows, out.get(), stream());
    ASSERT_TRUE(launched.ok()) << launched;
    ExpectSameBits(out.Download(stream()), want,
                   absl::StrFormat("%s %dx%d rows [%d, +%d)", GgmlTypeName(w.type), w.rows, w.cols, first_row,
                                   n_rows));
  }
};

// Every type (random block bytes, finite scales: quant_test_util.h), 37 rows
// of 768 (3 super-blocks of 256, 24 blocks of 32): one row (the decode's
// embedding lookup), 9 rows from the middle, the last row, all rows; and 20
// rows of 4096, past the grid's 65536 threads, so threads stride.
TEST_F(DequantizeRowsCudaTest, MatchesCpuBitForBitForEveryType) {
  uint32_t seed = 1;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    SCOPED_TRACE(std::string(info.name));
    const std::vector<uint8_t> bytes = testing::RandomWeights(info.type, 37, 768, seed++);
    auto d_bytes = Upload(bytes);
    const WeightMatrix w{info.type, bytes.data(), 37, 768};
    const WeightMatrix w_device{info.type, d_bytes.get(), 37, 768};
    ExpectSameAsCpu(w, w_device, 0, 1);
    ExpectSameAsCpu(w, w_device, 5, 9);
    ExpectSameAsCpu(w, w_device, 36, 1);
    ExpectSameAsCpu(w, w_device, 0, 37);

    const std::vector<uint8_t> wide = testing::RandomWeights(info.type, 21, 4096, seed++);
    auto d_wide = Upload(wide);
    ExpectSameAsCpu(WeightMatrix{info.type, wide.data(), 21, 4096}, WeightMatrix{info.type, d_wide.get(), 21, 4096},
                    1, 20);
  }
}

// GetRows (the decoders' embedding lookup from device token ids): every
// type, the CPU's bits for ids in any order with repeats; an id outside the
// rows gives a row of zeros (the host code cannot read device ids).
TEST_F(DequantizeRowsCudaTest, GetRowsMatchesCpuAndZeroesABadId) {
  uint32_t seed = 100;
  const std::vector<int32_t> ids = {36, 0, 5, 5, 17, 1};
  auto d_ids = Upload(ids);
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    SCOPED_TRACE(std::string(info.name));
    const std::vector<uint8_t> bytes = testing::RandomWeights(info.type, 37, 768, seed++);
    auto d_bytes = Upload(bytes);
    std::vector<float> want(ids.size() * 768);
    ASSERT_TRUE(cpu::GetRows(WeightMatrix{info.type, bytes.data(), 37, 768}, ids.data(), 6, want.data()).ok());
    auto out = Output<float>(want.size());
    ASSERT_TRUE(cuda::GetRows(WeightMatrix{info.type, d_bytes.get(), 37, 768}, d_ids.get(), 6, out.get(), stream()).ok());
    ExpectSameBits(out.Download(stream()), want, "GetRows");
  }
  const std::vector<uint8_t> bytes = testing::RandomWeights(GgmlType::kQ4_K, 4, 256, 7);
  auto d_bytes = Upload(bytes);
  const std::vector<int32_t> bad = {1, 4, -1};
  auto d_bad = Upload(bad);
  auto out = Output<float>(3 * 256);
  ASSERT_TRUE(cuda::GetRows(WeightMatrix{GgmlType::kQ4_K, d_bytes.get(), 4, 256}, d_bad.get(), 3, out.get(), stream()).ok());
  const std::vector<float> got = out.Download(stream());
  std::vector<float> row1(256);
  ASSERT_TRUE(cpu::DequantizeRows(WeightMatrix{GgmlType::kQ4_K, bytes.data(), 4, 256}, 1, 1, row1.data()).ok());
  ExpectSameBits(std::vector<float>(got.begin(), got.begin() + 256), row1, "the good id");
  for (size_t i = 256; i < got.size(); ++i) ASSERT_EQ(got[i], 0.0f) << i;
  testing::ExpectInvalidArgument(
      cuda::GetRows(WeightMatrix{GgmlType::kQ4_K, d_bytes.get(), 4, 256}, nullptr, 1, out.get(), stream()), "GetRows",
      "ids is null");
}

// Each bad argument is refused by both backends with INVALID_ARGUMENT naming
// DequantizeRows and the argument; CUDA leaves out as it was.
TEST_F(DequantizeRowsCudaTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<uint8_t> bytes = testing::RandomWeights(GgmlType::kQ4_K, 4, 256, 7);
  auto d_bytes = Upload(bytes);
  auto out = Output<float>(4 * 256);
  std::vector<float> host_out(4 * 256);
  struct Case {
    GgmlType type;
    bool null_data;
    int64_t rows, cols;
    int64_t first_row, n_rows;
    bool null_out;
    std::string needle;
  };
  const GgmlType q4_k = GgmlType::kQ4_K;
  for (const Case& c : {Case{static_cast<GgmlType>(99), false, 4, 256, 0, 1, false, "w.type 99"},
                        Case{q4_k, true, 4, 256, 0, 1, false, "w.data is null"},
                        Case{q4_k, false, 0, 256, 0, 1, false, "w.rows (0)"},
                        Case{q4_k, false, 4, 100, 0, 1, false, "w.cols (100)"},
                        Case{q4_k, false, 4, 0, 0, 1, false, "w.cols (0)"},
                        Case{q4_k, false, 4, 256, 0, 1, true, "out is null"},
                        Case{q4_k, false, 4, 256, -1, 1, false, "first_row -1"},
                        Case{q4_k, false, 4, 256, 0, 0, false, "n_rows 0"},
                        Case{q4_k, false, 4, 256, 2, 3, false, "n_rows 3"},
                        Case{q4_k, false, 4, 256, 4, 1, false, "first_row 4"}}) {
    const WeightMatrix w_host{c.type, c.null_data ? nullptr : bytes.data(), c.rows, c.cols};
    const WeightMatrix w_device{c.type, c.null_data ? nullptr : d_bytes.get(), c.rows, c.cols};
    testing::ExpectInvalidArgument(
        cpu::DequantizeRows(w_host, c.first_row, c.n_rows, c.null_out ? nullptr : host_out.data()), "DequantizeRows",
        c.needle);
    testing::ExpectInvalidArgument(
        cuda::DequantizeRows(w_device, c.first_row, c.n_rows, c.null_out ? nullptr : out.get(), stream()),
        "DequantizeRows", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
