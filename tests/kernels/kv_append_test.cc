// cpu::KvAppend: new rows land, rounded to fp16 or encoded as Q8_0, Q4_0 or
// Q4_1 blocks, at first_pos; the rest of the cache is untouched.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/half.h"
#include "kernels/kv_blocks.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

TEST(KvAppendCpuTest, StoresRoundedRowsAtFirstPos) {
  const int kv_dim = 24, n_tokens = 3, first_pos = 5, rows = 10;
  const std::vector<float> k = testing::RandomVector(n_tokens * kv_dim, -70000, 70000, 1);  // some overflow fp16
  const std::vector<float> v = testing::RandomVector(n_tokens * kv_dim, -2, 2, 2);
  std::vector<uint16_t> k_cache(rows * kv_dim, 0xABCD), v_cache(rows * kv_dim, 0xABCD);
  ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, k_cache.data(), v_cache.data(), first_pos, {}).ok());
  for (int row = 0; row < rows; ++row) {
    for (int i = 0; i < kv_dim; ++i) {
      const size_t c = static_cast<size_t>(row) * kv_dim + i;
      if (row >= first_pos && row < first_pos + n_tokens) {
        const size_t s = static_cast<size_t>(row - first_pos) * kv_dim + i;
        EXPECT_EQ(k_cache[c], Fp32ToFp16(k[s])) << row << " " << i;
        EXPECT_EQ(v_cache[c], Fp32ToFp16(v[s])) << row << " " << i;
      } else {
        EXPECT_EQ(k_cache[c], 0xABCD) << "row " << row << " was not to be written";
        EXPECT_EQ(v_cache[c], 0xABCD) << "row " << row << " was not to be written";
      }
    }
  }
}

TEST(KvAppendCpuTest, AFirstRowReadWhenTheOpRunsIsTheOnePassed) {
  const int kv_dim = 32, n_tokens = 2, rows = 8;
  const std::vector<float> k = testing::RandomVector(n_tokens * kv_dim, -2, 2, 3), v = testing::RandomVector(n_tokens * kv_dim, -2, 2, 4);
  std::vector<uint8_t> want_k(rows * RowBytes(GgmlType::kQ8_0, kv_dim), 0xAB), want_v(rows * kv_dim * 2, 0xAB);
  std::vector<uint8_t> got_k = want_k, got_v = want_v;
  const KvCacheTypes types{GgmlType::kQ8_0, GgmlType::kF16};
  ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, want_k.data(), want_v.data(), 5, types).ok());
  const int32_t position = 5;
  ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, got_k.data(), got_v.data(), 0, types, &position).ok());
  EXPECT_EQ(got_k, want_k);
  EXPECT_EQ(got_v, want_v);
}

TEST(KvAppendCpuTest, RejectsBadArguments) {
  float k[4] = {}, v[4] = {};
  uint16_t kc[4] = {}, vc[4] = {};
  struct Case {
    const float* k;
    const float* v;
    uint16_t* kc;
    uint16_t* vc;
    int n_tokens, kv_dim, first_pos;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, v, kc, vc, 1, 4, 0, "k is null"}, Case{k, nullptr, kc, vc, 1, 4, 0, "v is null"},
                        Case{k, v, nullptr, vc, 1, 4, 0, "k_cache is null"},
                        Case{k, v, kc, nullptr, 1, 4, 0, "v_cache is null"},
                        Case{k, v, kc, vc, 0, 4, 0, "n_tokens (0)"}, Case{k, v, kc, vc, 1, -1, 0, "n_tokens (1) and kv_dim (-1)"},
                        Case{k, v, kc, vc, 1, 4, -2, "first_pos (-2)"}}) {
    const absl::Status status = cpu::KvAppend(c.k, c.v, c.n_tokens, c.kv_dim, c.kc, c.vc, c.first_pos, {});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(status.message().find("KvAppend: " + c.needle), std::string::npos) << status;
  }
}

// A quantized row decodes to within half a quantization step of each value:
// d / 2 for Q8_0 (d = fp16(amax / 127)), and for Q4_0 and Q4_1 half a step
// plus what rounding d (and m) to fp16 moved the ends of the range (2^-11
// of them, relative, times the 15 or 16 steps). Keys and values may differ
// in type; bytes outside the new rows stay as they were.
TEST(KvAppendCpuTest, QuantizedRowsDecodeWithinHalfAStep) {
  const int kv_dim = 96, n_tokens = 4, first_pos = 3, rows = 9;
  const std::vector<float> k = testing::RandomVector(n_tokens * kv_dim, -3, 5, 7);
  const std::vector<float> v = testing::RandomVector(n_tokens * kv_dim, -0.01f, 0.02f, 8);
  for (GgmlType kt : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kF16}) {
    for (GgmlType vt : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
      const size_t k_row = RowBytes(kt, kv_dim), v_row = RowBytes(vt, kv_dim);
      std::vector<uint8_t> k_cache(rows * k_row, 0xAB), v_cache(rows * v_row, 0xAB);
      ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, k_cache.data(), v_cache.data(), first_pos,
                                {kt, vt})
                      .ok());
      for (int kind = 0; kind < 2; ++kind) {
        const GgmlType type = kind == 0 ? kt : vt;
        const std::vector<float>& x = kind == 0 ? k : v;
        const std::vector<uint8_t>& cache = kind == 0 ? k_cache : v_cache;
        const size_t row_bytes = kind == 0 ? k_row : v_row;
        std::vector<float> decoded(static_cast<size_t>(n_tokens) * kv_dim);
        ASSERT_TRUE(cpu::DequantizeRows(WeightMatrix{type, cache.data() + first_pos * row_bytes, n_tokens, kv_dim}, 0, n_tokens,
                                        decoded.data()).ok());
        for (int t = 0; t < n_tokens; ++t) {
          for (int b = 0; b < kv_dim / 32; ++b) {
            const float* xb = x.data() + t * kv_dim + b * 32;
            float lo = xb[0], hi = xb[0], amax = 0;
            for (int j = 0; j < 32; ++j) {
              lo = std::min(lo, xb[j]);
              hi = std::max(hi, xb[j]);
              amax = std::max(amax, std::fabs(xb[j]));
            }
            const float step = type == GgmlType::kQ8_0 ? amax / 127 : type == GgmlType::kQ4_0 ? amax / 8 : (hi - lo) / 15;
            const float bound = type == GgmlType::kF16 ? amax * 0x1p-11f : step / 2 * 1.001f + 16 * amax * 0x1p-11f;
            for (int j = 0; j < 32; ++j) {
              const size_t i = static_cast<size_t>(t) * kv_dim + b * 32 + j;
              EXPECT_LE(std::fabs(decoded[i] - x[i]), bound)
                  << GgmlTypeName(type) << " token " << t << " value " << b * 32 + j;
            }
          }
        }
        for (size_t i = 0; i < cache.size(); ++i) {
          const bool written = i >= first_pos * row_bytes && i < (first_pos + n_tokens) * row_bytes;
          if (!written) {
            ASSERT_EQ(cache[i], 0xAB) << GgmlTypeName(type) << " byte " << i << " was not to be written";
          }
        }
      }
    }
  }
}

// The extremes of a block are stored exactly where the format allows it:
// Q8_0's amax is q = 127 (d = fp16(amax / 127)), Q4_0's largest magnitude is
// q = 0, Q4_1's least value is its m; an all-zero block decodes to zeros.
TEST(KvAppendCpuTest, BlockEndsAndZeros) {
  std::vector<float> x(64, 0.0f);
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * (j - 12);  // -3 .. 4.75; amax 4.75, lo -3
  std::vector<uint8_t> k_cache(RowBytes(GgmlType::kQ8_0, 64)), v_cache(RowBytes(GgmlType::kQ4_1, 64));
  ASSERT_TRUE(cpu::KvAppend(x.data(), x.data(), 1, 64, k_cache.data(), v_cache.data(), 0,
                            {GgmlType::kQ8_0, GgmlType::kQ4_1})
                  .ok());
  EXPECT_EQ(static_cast<int8_t>(k_cache[2 + 31]), 127);
  EXPECT_EQ(Fp16ToFp32(static_cast<uint16_t>(v_cache[2] | v_cache[3] << 8)), -3.0f) << "Q4_1's m is the least value";
  std::vector<float> decoded(64);
  ASSERT_TRUE(cpu::DequantizeRows(WeightMatrix{GgmlType::kQ4_1, v_cache.data(), 1, 64}, 0, 1, decoded.data()).ok());
  EXPECT_EQ(decoded[0], -3.0f);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(decoded[j], 0.0f) << j;

  std::vector<uint8_t> q4(RowBytes(GgmlType::kQ4_0, 64));
  ASSERT_TRUE(cpu::KvAppend(x.data(), x.data(), 1, 64, q4.data(), q4.data(), 0, {GgmlType::kQ4_0, GgmlType::kQ4_0}).ok());
  ASSERT_TRUE(cpu::DequantizeRows(WeightMatrix{GgmlType::kQ4_0, q4.data(), 1, 64}, 0, 1, decoded.data()).ok());
  EXPECT_FLOAT_EQ(decoded[31], 4.75f) << "Q4_0's largest magnitude decodes exactly (q 0 is -8 d)";
  for (int j = 32; j < 64; ++j) EXPECT_EQ(decoded[j], 0.0f) << j;
}

// The attention's block-at-a-time decoder gives Decoder<T>::Element's floats
// bit for bit, for every start and length within a block.
template <GgmlType T>
void ExpectSpansAreTheDecoders(uint32_t seed) {
  using D = block_decode::Decoder<T>;
  std::mt19937 rng(seed);
  std::vector<uint8_t> block(D::kBytes);
  for (int trial = 0; trial < 50; ++trial) {
    for (uint8_t& b : block) b = static_cast<uint8_t>(rng());
    // Finite scales (a random fp16 could be NaN, whose bits need not agree).
    block[1] &= 0x3F;
    if (T == GgmlType::kQ4_1) block[3] &= 0x3F;
    for (int j0 = 0; j0 < D::kElements; ++j0) {
      for (int n = 1; j0 + n <= D::kElements; n += 5) {
        float got[32];
        kv_blocks::DecodeBlockSpan<T>(block.data(), j0, n, got);
        for (int j = 0; j < n; ++j) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(D::Element(block.data(), j0 + j)))
              << GgmlTypeName(T) << " j0 " << j0 << " j " << j;
        }
      }
    }
  }
}

TEST(KvAppendCpuTest, BlockSpansDecodeAsTheDecoder) {
  ExpectSpansAreTheDecoders<GgmlType::kQ8_0>(1);
  ExpectSpansAreTheDecoders<GgmlType::kQ4_0>(2);
  ExpectSpansAreTheDecoders<GgmlType::kQ4_1>(3);
}

TEST(KvAppendCpuTest, RejectsTypesThatAreNotCacheTypesOrDoNotFitTheRow) {
  float x[64] = {};
  uint8_t cache[256] = {};
  absl::Status status = cpu::KvAppend(x, x, 1, 64, cache, cache, 0, {GgmlType::kQ4_K, GgmlType::kF16});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("types.k: Q4_K is not a KV cache type (f16, q8_0, q4_0, q4_1)"), std::string::npos)
      << status;
  status = cpu::KvAppend(x, x, 1, 48, cache, cache, 0, {GgmlType::kF16, GgmlType::kQ8_0});
  EXPECT_NE(status.message().find("types.v: a q8_0 cache needs rows of a multiple of 32 values; this model's are 48"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace octo
