// What the CUDA kernels ask L2 for (kernels/cuda/device.h:
// WeightPrefetchBytes; common.cuh: GridStartAfter, PrefetchL2): a dense
// decode MatMul asks for the first bytes of every row it reads, before its
// start, and an expert launch for none; a norm for its weights; a decode
// step's attention asks for
// the key and value rows of each block's positions, a prefill's for none.
// The results are the same bits with it on and off. The executor records
// each prefetch, so which rows and how many bytes is checked here without a
// GPU; on a GPU the bits are.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fused.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quant_test_util.h"
#if defined(OCTO_CUDA_SIM)
#include "kernels/cuda/sim/thread_context.h"
#endif

namespace octo {
namespace {

using testing::DeviceVector;
using testing::RandomActivations;
using testing::RandomWeights;

// (address, bytes, before the start) of one prefetch.
using Asked = std::tuple<const void*, size_t, bool>;

// WeightPrefetchBytes for a scope, then back to what it was.
class ScopedPrefetch {
 public:
  explicit ScopedPrefetch(int bytes) : was_(cuda::WeightPrefetchBytes()) {
    EXPECT_TRUE(cuda::SetWeightPrefetchBytes(bytes)) << bytes;
  }
  ~ScopedPrefetch() { cuda::SetWeightPrefetchBytes(was_); }

 private:
  int was_;
};

class PrefetchCudaTest : public testing::CudaOpTest {
 protected:
  void SetUp() override {
    testing::CudaOpTest::SetUp();
#if defined(OCTO_CUDA_SIM)
    cuda_sim::RecordPrefetches(true);
    cuda_sim::TakePrefetches();
#endif
  }
  void TearDown() override {
#if defined(OCTO_CUDA_SIM)
    cuda_sim::RecordPrefetches(false);
#endif
  }

  // The prefetches made since the last call (waiting for the stream first);
  // nullopt where nothing records them (a GPU).
  std::optional<std::multiset<Asked>> Prefetched() {
    Sync();
#if defined(OCTO_CUDA_SIM)
    std::multiset<Asked> asked;
    for (const cuda_sim::Prefetch& p : cuda_sim::TakePrefetches()) asked.emplace(p.p, p.bytes, p.before_start);
    return asked;
#else
    return std::nullopt;
#endif
  }

  // What a dense launch over w's rows should ask for: each row's first
  // min(row bytes, prefetch) bytes, before the start.
  static void ExpectRows(std::multiset<Asked>& want, const WeightMatrix& w, int prefetch) {
    const int64_t row_bytes = w.cols / GgmlTypeInfoOf(w.type).block_size * GgmlTypeInfoOf(w.type).type_size;
    for (int64_t r = 0; r < w.rows; ++r) {
      want.emplace(static_cast<const uint8_t*>(w.data) + r * row_bytes,
                   static_cast<size_t>(std::min<int64_t>(row_bytes, prefetch)), true);
    }
  }
};

TEST_F(PrefetchCudaTest, ADenseLaunchAsksForEachRowsFirstBytesBeforeItsStart) {
  constexpr int64_t kCols = 1024;  // Q4_K rows of 576 bytes, Q6_K of 840, F16 of 2048
  struct Case {
    GgmlType type;
    int64_t rows;
    int n_tokens;
    int prefetch;
  };
  for (const Case& c : {Case{GgmlType::kQ4_K, 37, 1, 256}, Case{GgmlType::kQ4_K, 37, 5, 4096},
                        Case{GgmlType::kQ6_K, 9, 1, 100}, Case{GgmlType::kF16, 6, 2, 1000},
                        Case{GgmlType::kQ8_0, 70, 1, 0}}) {
    SCOPED_TRACE(::testing::Message() << GgmlTypeInfoOf(c.type).name << " rows " << c.rows << " prefetch "
                                      << c.prefetch);
    auto d_w = Upload(RandomWeights(c.type, c.rows, kCols, 3));
    auto d_x = Upload(RandomActivations(c.n_tokens * kCols, 4));
    auto d_out = Output<float>(static_cast<size_t>(c.n_tokens * c.rows));
    const WeightMatrix w{c.type, d_w.get(), c.rows, kCols};
    std::vector<float> with, without;
    {
      ScopedPrefetch prefetch(c.prefetch);
      ASSERT_TRUE(cuda::MatMul(w, d_x.get(), d_out.get(), c.n_tokens, Exec(cuda::MatMulScratchBytes(w, c.n_tokens)))
                      .ok());
      with = d_out.Download(stream());
    }
    if (const auto asked = Prefetched()) {
      std::multiset<Asked> want;
      if (c.prefetch > 0) ExpectRows(want, w, c.prefetch);
      EXPECT_EQ(*asked, want);
    }
    {
      ScopedPrefetch off(0);
      ASSERT_TRUE(cuda::MatMul(w, d_x.get(), d_out.get(), c.n_tokens, Exec(cuda::MatMulScratchBytes(w, c.n_tokens)))
                      .ok());
      without = d_out.Download(stream());
    }
    if (const auto asked = Prefetched()) {
      EXPECT_TRUE(asked->empty());
    }
    EXPECT_EQ(with, without) << "the bits do not depend on the prefetch";
  }
}

TEST_F(PrefetchCudaTest, AGroupAsksForEachPartsRowsAndAGluForGateAndUp) {
  constexpr int64_t kCols = 512;
  constexpr int kPrefetch = 200;
  ScopedPrefetch prefetch(kPrefetch);
  // q, k and v of one type in one launch: each part's own rows.
  std::vector<DeviceVector<uint8_t>> weights;
  std::vector<DeviceVector<float>> outs;
  std::vector<WeightMatrix> ws;
  std::vector<float*> out_ptrs;
  for (const int64_t rows : {64, 32, 8}) {
    weights.push_back(Upload(RandomWeights(GgmlType::kQ4_K, rows, kCols, static_cast<uint32_t>(rows))));
    outs.push_back(Output<float>(static_cast<size_t>(rows)));
    ws.push_back(WeightMatrix{GgmlType::kQ4_K, weights.back().get(), rows, kCols});
    out_ptrs.push_back(outs.back().get());
  }
  auto d_x = Upload(RandomActivations(kCols, 9));
  ASSERT_TRUE(cuda::MatMulGroup(ws, d_x.get(), out_ptrs, 1, Exec(cuda::MatMulGroupScratchBytes(ws, 1))).ok());
  if (const auto asked = Prefetched()) {
    std::multiset<Asked> want;
    for (const WeightMatrix& w : ws) ExpectRows(want, w, kPrefetch);
    EXPECT_EQ(*asked, want);
  }
  // Gate and up: both matrices' rows.
  auto d_up = Upload(RandomWeights(GgmlType::kQ4_K, 64, kCols, 11));
  const WeightMatrix up{GgmlType::kQ4_K, d_up.get(), 64, kCols};
  auto d_out = Output<float>(64);
  ASSERT_TRUE(cuda::MatMulGlu(ws[0], up, d_x.get(), d_out.get(), 1, Exec(cuda::MatMulScratchBytes(ws[0], 1))).ok());
  if (const auto asked = Prefetched()) {
    std::multiset<Asked> want;
    ExpectRows(want, ws[0], kPrefetch);
    ExpectRows(want, up, kPrefetch);
    EXPECT_EQ(*asked, want);
  }
}

// An expert's matrix is known only from its predecessor's ids: nothing is
// asked for before the start.
TEST_F(PrefetchCudaTest, AnExpertLaunchAsksForNothing) {
  constexpr int64_t kCols = 256, kRows = 16;
  constexpr int kExperts = 4;
  auto d_w = Upload(RandomWeights(GgmlType::kQ4_K, kExperts * kRows, kCols, 5));
  auto d_x = Upload(RandomActivations(2 * kCols, 6));
  auto d_ids = Upload(std::vector<int32_t>{3, 1, 0, 2});
  auto d_out = Output<float>(4 * kRows);
  const WeightMatrix w{GgmlType::kQ4_K, d_w.get(), kExperts * kRows, kCols};
  const MatMulExpertsParams p{.n_experts = kExperts, .k = 2, .n_tokens = 2};
  ASSERT_TRUE(cuda::MatMulExperts(w, d_ids.get(), d_x.get(), d_out.get(), p, Exec(cuda::MatMulExpertsScratchBytes(w, p)))
                  .ok());
  if (const auto asked = Prefetched()) {
    EXPECT_TRUE(asked->empty());
  }
}

// A decode step at position 300 (two splits: a stats and a value pass) over
// fp16 keys and Q8_0 values, 4 heads of 64 over 2 kv heads: every block
// (one head, one split) asks for its split's key and value rows of its kv
// head in the stats pass, and for the value rows alone in the value pass
// (which weights the scores the stats pass stored: it loads no key); a
// 20-token prefill asks for none.
TEST_F(PrefetchCudaTest, ADecodeStepsAttentionAsksForItsPositionsKeysAndValues) {
  constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 64, kPos = 300;
  constexpr int64_t kRows = 320, kKvDim = kKvHeads * kHeadDim;
  constexpr int64_t kKRowBytes = kKvDim * 2, kVRowBytes = kKvDim / 32 * 34;  // fp16, Q8_0
  auto d_k = Upload(std::vector<uint8_t>(kRows * kKRowBytes, 0));
  auto d_v = Upload(std::vector<uint8_t>(kRows * kVRowBytes, 0));
  for (const int n_tokens : {1, 20}) {
    SCOPED_TRACE(n_tokens);
    AttentionParams p;
    p.n_tokens = n_tokens;
    p.first_pos = kPos + 1 - n_tokens;
    p.n_heads = kHeads;
    p.n_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.scale = 0.125f;
    p.types = KvCacheTypes{GgmlType::kF16, GgmlType::kQ8_0};
    auto d_q = Upload(RandomActivations(n_tokens * kHeads * kHeadDim, 7));
    auto d_out = Output<float>(static_cast<size_t>(n_tokens * kHeads * kHeadDim));
    std::vector<float> with, without;
    {
      ScopedPrefetch on(cuda::kDefaultWeightPrefetchBytes);
      ASSERT_TRUE(cuda::Attention(d_q.get(), d_k.get(), d_v.get(), d_out.get(), p,
                                  Exec(cuda::AttentionScratchBytes(p)))
                      .ok());
      with = d_out.Download(stream());
    }
    if (const auto asked = Prefetched()) {
      std::multiset<Asked> want;
      if (n_tokens == 1) {
        for (int pass = 0; pass < 2; ++pass) {
          for (int h = 0; h < kHeads; ++h) {
            const int kv = h / (kHeads / kKvHeads);
            for (int64_t pos = 0; pos <= kPos; ++pos) {
              if (pass == 0) want.emplace(d_k.get() + pos * kKRowBytes + kv * kHeadDim * 2, kHeadDim * 2, false);
              want.emplace(d_v.get() + pos * kVRowBytes + kv * kHeadDim / 32 * 34, kHeadDim / 32 * 34, false);
            }
          }
        }
      }
      EXPECT_EQ(*asked, want);
    }
    {
      ScopedPrefetch off(0);
      ASSERT_TRUE(cuda::Attention(d_q.get(), d_k.get(), d_v.get(), d_out.get(), p,
                                  Exec(cuda::AttentionScratchBytes(p)))
                      .ok());
      without = d_out.Download(stream());
    }
    if (const auto asked = Prefetched()) {
      EXPECT_TRUE(asked->empty());
    }
    EXPECT_EQ(with, without) << "the bits do not depend on the prefetch";
  }
}

// A norm's weights, once a launch (block 0), before the start.
TEST_F(PrefetchCudaTest, ANormAsksForItsWeightsOnceBeforeItsStart) {
  constexpr int kDim = 512, kRows = 3;
  auto d_x = Upload(RandomActivations(kRows * kDim, 1));
  auto d_delta = Upload(RandomActivations(kRows * kDim, 2));
  auto d_weight = Upload(RandomActivations(kDim, 3));
  auto d_out = Output<float>(kRows * kDim);
  for (const int prefetch : {cuda::kDefaultWeightPrefetchBytes, 0}) {
    SCOPED_TRACE(prefetch);
    ScopedPrefetch setting(prefetch);
    ASSERT_TRUE(cuda::RmsNorm(d_x.get(), d_weight.get(), d_out.get(), kRows, kDim, 1e-5f, stream()).ok());
    ASSERT_TRUE(
        cuda::AddRmsNorm(d_x.get(), d_delta.get(), d_weight.get(), d_out.get(), kRows, kDim, 1e-5f, stream()).ok());
    if (const auto asked = Prefetched()) {
      std::multiset<Asked> want;
      if (prefetch > 0) want = {{d_weight.get(), kDim * sizeof(float), true}, {d_weight.get(), kDim * sizeof(float), true}};
      EXPECT_EQ(*asked, want);
    }
  }
}

TEST(WeightPrefetchBytes, TheEnvironmentsTextIsAWholeNumberInRange) {
  EXPECT_EQ(cuda::ParseWeightPrefetchBytes("4096").value_or(-1), 4096);
  EXPECT_EQ(cuda::ParseWeightPrefetchBytes("0").value_or(-1), 0);
  EXPECT_EQ(cuda::ParseWeightPrefetchBytes("1048576").value_or(-1), cuda::kMaxWeightPrefetchBytes);
  for (const char* bad : {"", "-1", "1048577", "4k", "4096 ", "abc", "99999999999"}) {
    const absl::StatusOr<int> parsed = cuda::ParseWeightPrefetchBytes(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("OCTO_CUDA_PREFETCH=") + bad + " is not a number of bytes from 0 to 1048576");
  }
}

TEST(WeightPrefetchBytes, RefusesSettingsOutOfRange) {
  const int was = cuda::WeightPrefetchBytes();
  EXPECT_FALSE(cuda::SetWeightPrefetchBytes(-1));
  EXPECT_FALSE(cuda::SetWeightPrefetchBytes(cuda::kMaxWeightPrefetchBytes + 1));
  EXPECT_EQ(cuda::WeightPrefetchBytes(), was);
  EXPECT_TRUE(cuda::SetWeightPrefetchBytes(cuda::kMaxWeightPrefetchBytes));
  EXPECT_EQ(cuda::WeightPrefetchBytes(), cuda::kMaxWeightPrefetchBytes);
  EXPECT_TRUE(cuda::SetWeightPrefetchBytes(was));
}

}  // namespace
}  // namespace octo
