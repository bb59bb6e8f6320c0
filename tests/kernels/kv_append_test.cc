// cpu::KvAppend: new rows land, rounded to fp16, at first_pos; the rest of
// the cache is untouched.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

TEST(KvAppendCpuTest, StoresRoundedRowsAtFirstPos) {
  const int kv_dim = 24, n_tokens = 3, first_pos = 5, rows = 10;
  const std::vector<float> k = testing::RandomVector(n_tokens * kv_dim, -70000, 70000, 1);  // some overflow fp16
  const std::vector<float> v = testing::RandomVector(n_tokens * kv_dim, -2, 2, 2);
  std::vector<uint16_t> k_cache(rows * kv_dim, 0xABCD), v_cache(rows * kv_dim, 0xABCD);
  ASSERT_TRUE(cpu::KvAppend(k.data(), v.data(), n_tokens, kv_dim, k_cache.data(), v_cache.data(), first_pos).ok());
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
    const absl::Status status = cpu::KvAppend(c.k, c.v, c.n_tokens, c.kv_dim, c.kc, c.vc, c.first_pos);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(status.message().find("KvAppend: " + c.needle), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace octo
