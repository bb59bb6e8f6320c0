// cuda::KvAppend against cpu::KvAppend: the same fp16 bits (tolerance 0) in
// the rows first_pos.., every other cache row untouched.
#include <cstddef>
#include <cstdint>
#include <iterator>
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

// What a cache row holds before it is written.
constexpr uint16_t kUnwritten = 0xABCD;

// "" when got == want, else the first few differing elements, in hex.
template <typename T>
std::string Differences(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return absl::StrFormat("%d elements, want %d", got.size(), want.size());
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 4; ++i) {
    if (got[i] == want[i]) continue;
    absl::StrAppendFormat(&out, " [%d] got 0x%x want 0x%x;", i, got[i], want[i]);
    ++shown;
  }
  return out;
}

// n values: most in [-4, 4), every 7th one of fp16's rounding corners: ties
// between two fp16 values (round to even), the largest finite fp16 and the
// first value that rounds to inf, infinities, signed zeros, fp16 subnormals
// and the tie below the smallest one, an fp32 subnormal. No NaN: see
// KeepsNanANan.
std::vector<float> Values(size_t n, uint32_t seed) {
  std::vector<float> v = RandomVector(n, -4.0f, 4.0f, seed);
  const float specials[] = {
      1.0f + 0x1p-11f,          // tie between 1 and 1 + 2^-10: to 1 (even)
      1.0f + 3 * 0x1p-11f,      // tie between 1 + 2^-10 and 1 + 2^-9: to 1 + 2^-9 (even)
      -(1.0f + 0x1p-11f),
      65504.0f,                 // the largest fp16
      65519.99f,                // still 65504
      65520.0f,                 // the tie above it: inf
      -70000.0f,                // -inf
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      0.0f,
      -0.0f,
      0x1p-24f,                 // the smallest fp16 subnormal
      0x1p-25f,                 // the tie below it: 0 (even)
      3 * 0x1p-25f,             // the tie between 2^-24 and 2^-23: 2^-23
      -1e-6f,                   // an fp16 subnormal, rounded
      6.1e-5f,                  // just under the smallest normal fp16
      1e-40f,                   // fp32 subnormal: 0
  };
  for (size_t i = seed % 7; i < n; i += 7) v[i] = specials[(i / 7) % std::size(specials)];
  return v;
}

class KvAppendCudaTest : public testing::CudaOpTest {};

// kv_dim: 1, odd, a head (128), GQA widths (1024 = 8 heads of 128), 4096;
// n_tokens: 1 (decode), 9, a prefill past the grid's 65536 threads; first_pos
// 0 and inside the cache.
TEST_F(KvAppendCudaTest, MatchesCpuBitForBit) {
  struct Shape {
    int n_tokens, kv_dim, first_pos, cache_rows;
  };
  uint32_t seed = 1;
  for (const Shape& s : {Shape{1, 1, 0, 2}, Shape{1, 128, 0, 1}, Shape{1, 128, 7, 9}, Shape{3, 257, 5, 10},
                         Shape{9, 1024, 17, 30}, Shape{9, 4096, 0, 9}, Shape{40, 2048, 3, 50}}) {
    const size_t n = static_cast<size_t>(s.n_tokens) * s.kv_dim;
    const std::vector<float> k = Values(n, seed++);
    const std::vector<float> v = Values(n, seed++);
    std::vector<uint16_t> want_k(static_cast<size_t>(s.cache_rows) * s.kv_dim, kUnwritten);
    std::vector<uint16_t> want_v = want_k;

    auto d_k = Upload(k);
    auto d_v = Upload(v);
    auto d_k_cache = Upload(want_k);
    auto d_v_cache = Upload(want_v);
    ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), s.n_tokens, s.kv_dim, want_k.data(), want_v.data(), s.first_pos, {})
                    .ok());
    ASSERT_TRUE(cuda::KvAppend(d_k.get(), d_v.get(), s.n_tokens, s.kv_dim, d_k_cache.get(), d_v_cache.get(),
                               s.first_pos, {}, stream())
                    .ok());
    // Whole caches: the rows written and the rows around them.
    const std::string what = absl::StrFormat("n_tokens=%d kv_dim=%d first_pos=%d", s.n_tokens, s.kv_dim, s.first_pos);
    EXPECT_EQ(Differences(d_k_cache.Download(stream()), want_k), "") << what << ": k_cache differs";
    EXPECT_EQ(Differences(d_v_cache.Download(stream()), want_v), "") << what << ": v_cache differs";
  }
}

// Quantized rows: the same bytes as the CPU's, for each pair of types.
TEST_F(KvAppendCudaTest, QuantizedRowsMatchCpuByteForByte) {
  const int n_tokens = 5, kv_dim = 256, first_pos = 2, rows = 9;
  const std::vector<float> k = RandomVector(static_cast<size_t>(n_tokens) * kv_dim, -4.0f, 4.0f, 11);
  const std::vector<float> v = RandomVector(static_cast<size_t>(n_tokens) * kv_dim, -0.5f, 0.25f, 12);
  auto d_k = Upload(k);
  auto d_v = Upload(v);
  for (GgmlType kt : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kF16}) {
    for (GgmlType vt : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
      std::vector<uint8_t> want_k(rows * RowBytes(kt, kv_dim), 0x5A), want_v(rows * RowBytes(vt, kv_dim), 0x5A);
      auto d_k_cache = Upload(want_k);
      auto d_v_cache = Upload(want_v);
      ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, want_k.data(), want_v.data(), first_pos, {kt, vt})
                      .ok());
      ASSERT_TRUE(cuda::KvAppend(d_k.get(), d_v.get(), n_tokens, kv_dim, d_k_cache.get(), d_v_cache.get(), first_pos,
                                 {kt, vt}, stream())
                      .ok());
      EXPECT_EQ(Differences(d_k_cache.Download(stream()), want_k), "") << GgmlTypeName(kt) << " keys differ";
      EXPECT_EQ(Differences(d_v_cache.Download(stream()), want_v), "") << GgmlTypeName(vt) << " values differ";
      // The first row read on the device (first_pos_at; first_pos unused).
      auto k_at = Upload(std::vector<uint8_t>(want_k.size(), 0x5A)), v_at = Upload(std::vector<uint8_t>(want_v.size(), 0x5A));
      auto position = Upload(std::vector<int32_t>{first_pos});
      ASSERT_TRUE(cuda::KvAppend(d_k.get(), d_v.get(), n_tokens, kv_dim, k_at.get(), v_at.get(), 0, {kt, vt}, stream(),
                                 position.get())
                      .ok());
      EXPECT_TRUE(k_at.Download(stream()) == want_k) << GgmlTypeName(kt) << " keys differ (first_pos_at)";
      EXPECT_TRUE(v_at.Download(stream()) == want_v) << GgmlTypeName(vt) << " values differ (first_pos_at)";
    }
  }
}

// A NaN is stored as an fp16 NaN on both sides, but not with the same bits:
// the CPU keeps the sign and sets the quiet bit (0x7E00 | sign, as F16C);
// __float2half_rn gives a canonical NaN (cuda_fp16's host path, which the
// executor runs, 0x7FFF whatever the sign; the GPU's cvt.rn.f16.f32 a
// canonical NaN too). ops.h promises the same bits; this is the one input
// where they are not, so only NaN-ness is checked here.
TEST_F(KvAppendCudaTest, KeepsNanANan) {
  const std::vector<float> k = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()};
  auto d_k = Upload(k);
  auto d_cache = Upload(std::vector<uint16_t>(2, kUnwritten));
  ASSERT_TRUE(cuda::KvAppend(d_k.get(), d_k.get(), 1, 2, d_cache.get(), d_cache.get(), 0, {}, stream()).ok());
  for (uint16_t h : d_cache.Download(stream())) {
    EXPECT_EQ(h & 0x7C00u, 0x7C00u) << std::hex << h;
    EXPECT_NE(h & 0x03FFu, 0u) << std::hex << h;
  }
}

TEST_F(KvAppendCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto k = Upload(std::vector<float>{1, 2, 3, 4});
  auto v = Upload(std::vector<float>{5, 6, 7, 8});
  auto k_cache = Upload(std::vector<uint16_t>(8, kUnwritten));
  auto v_cache = Upload(std::vector<uint16_t>(8, kUnwritten));
  struct Case {
    const float* k;
    const float* v;
    uint16_t* k_cache;
    uint16_t* v_cache;
    int n_tokens, kv_dim, first_pos;
    std::string needle;
  };
  float* const kp = k.get();
  float* const vp = v.get();
  uint16_t* const kc = k_cache.get();
  uint16_t* const vc = v_cache.get();
  for (const Case& c :
       {Case{nullptr, vp, kc, vc, 1, 4, 0, "k is null"}, Case{kp, nullptr, kc, vc, 1, 4, 0, "v is null"},
        Case{kp, vp, nullptr, vc, 1, 4, 0, "k_cache is null"}, Case{kp, vp, kc, nullptr, 1, 4, 0, "v_cache is null"},
        Case{kp, vp, kc, vc, 0, 4, 0, "n_tokens (0)"}, Case{kp, vp, kc, vc, 1, -1, 0, "kv_dim (-1)"},
        Case{kp, vp, kc, vc, 1, 4, -2, "first_pos (-2)"},
        Case{kp, vp, kc, vc, 2, 4, std::numeric_limits<int>::max(), "fit in an int"}}) {
    testing::ExpectInvalidArgument(
        cuda::KvAppend(c.k, c.v, c.n_tokens, c.kv_dim, c.k_cache, c.v_cache, c.first_pos, {}, stream()), "KvAppend",
        c.needle);
  }
  for (uint16_t h : k_cache.Download(stream())) EXPECT_EQ(h, kUnwritten) << "a rejected call wrote to k_cache";
  for (uint16_t h : v_cache.Download(stream())) EXPECT_EQ(h, kUnwritten) << "a rejected call wrote to v_cache";
}

}  // namespace
}  // namespace octo
