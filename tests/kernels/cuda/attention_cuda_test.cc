// cuda::Attention against cpu::Attention and against a double-precision
// reference of its own contract; the same bits alone and in a batch, in one
// round and in several; out == q; the argument and scratch checks. Tree
// attention: each query bit for bit the causal op's on its compacted cache,
// close to the CPU's tree attention, safe for any mask. Non-causal attention:
// each query bit for bit the causal op's at the last position, close to the
// CPU's, its scratch, a tree_mask refused.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace octo {
namespace {

// --- Tolerances ----------------------------------------------------------------
// Per query (token, head) seeing n positions in S = ceil(n / 256) splits,
// with u = 2^-24 and V = max |v| over its value rows (1 here: the caches
// hold values in [-1, 1]). Both sides compute the same float scores s_i (the
// dot in dimension order, then times scale: the test runs the CPU's portable
// path, the kernel has the same loop). Let y = sum_i p_i v_i be the exact
// attention of those scores, M = max_i s_i, and H = sum_i p_i (M - s_i),
// which is at most the entropy of p, so H <= ln n. To first order:
//
// CUDA vs y: each weight exp(s_i - M) is made of expf(s_i - m_s) and, in the
//   combine, expf(m_s - M): two subtractions (together (M - s_i) u) and two
//   expf (2 ulp <= 4u each, the device's documented bound; the executor's is
//   glibc's), so (8 + M - s_i) u relative. The numerator adds the products
//   (u), up to 256 of them in fewer than 256 additions in series (position
//   groups, then the groups: 255 u at most), times w_s (u), and S
//   splits in order ((S - 1) u); the denominator sums a split's exps in a
//   tree 8 additions deep (8 u), times w_s (u), S splits ((S - 1) u); then
//   one division (u). So
//     |cuda - y| <= V u (2 (8 + H) + (256 + S) + (8 + S) + 1)
//                 = V u (281 + 2 S + 2 H).
// CPU vs y: each expf(s_i - M) errs by (2 + M - s_i) u (glibc's expf is
//   within 1 ulp), their double sum by (2 + H) u, the reciprocal and the
//   product by u each: (6 + 2 H) u on average over p. Then each weight is
//   rounded to fp16: 2^-11 relative, or 2^-25 absolute below 2^-14 (fp16
//   subnormals), so at most 2^-11 + n 2^-25 in all. The products with v are
//   exact (11 by 11 bits) and their float sum in position order errs by
//   (n - 1) u. So
//     |cpu - y| <= V (2^-11 + n 2^-25 + (n - 1 + 6 + 2 H) u).
// Adding the two, with H <= ln n:
//     tol1 = V (2^-11 + n 2^-25 + (n + 286 + 2 S + 4 ln n) u),
// and the terms of second order (products of two of these relative errors)
// are at most tol1^2 / V: the tolerance is tol1 + tol1^2 (for V = 1).
// The CPU's fp16 weights dominate: 2^-11 = 4.9e-4 for any n, 8.9e-4 in all
// at n = 4096. Measured over these shapes: see kShapes.
double CudaVsCpuTolerance(int n) {
  const double u = 0x1p-24;
  const double splits = (n + kAttentionSplit - 1) / kAttentionSplit;
  const double tol1 = 0x1p-11 + n * 0x1p-25 + (n + 286 + 2 * splits + 4 * std::log(n)) * u;
  return tol1 + tol1 * tol1;
}

// Against the reference of the CUDA contract itself (the same float scores,
// then a double softmax, each weight rounded to fp16 from its float value, a
// double sum): the first bound above alone, u (281 + 2 S + 2 ln n) plus its
// square, 2e-5 at n = 4096, so unlike the CPU comparison it sees a missing
// or extra row (about 1 / n = 2.4e-4 there). Plus, per query, one fp16 ulp
// of every weight whose value lies within 64 u of an fp16 rounding midpoint
// (the kernel's float weight may round the other way there): Reference
// returns that allowance per element.
double CudaVsReferenceTolerance(int n) {
  const double u = 0x1p-24;
  const double splits = (n + kAttentionSplit - 1) / kAttentionSplit;
  const double tol1 = (281 + 2 * splits + 2 * std::log(n)) * u;
  return tol1 + tol1 * tol1;
}

using Shape = testing::AttentionShape;
using Inputs = testing::AttentionInputs;
using testing::Describe;
using testing::kFp16NaN;
using testing::ParamsFor;

size_t TokenSize(const Shape& s) { return static_cast<size_t>(s.n_heads) * s.head_dim; }
size_t RowSize(const Shape& s) { return static_cast<size_t>(s.n_kv_heads) * s.head_dim; }

Inputs RandomInputs(const Shape& s, uint32_t seed, int extra_rows = 0) {
  return testing::RandomAttentionInputs(s, seed, extra_rows);
}

// cpu::Attention on its portable path (the scores the tolerances assume).
std::vector<float> RunCpu(const Inputs& in, const Shape& s) {
  std::vector<float> out(in.q.size());
  const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), ParamsFor(s), {});
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The CUDA contract in double from the float scores: exact softmax, each
// weight rounded to fp16 (from float), exact value sum. Also returns each
// element's n and its rounding-flip allowance (above).
std::vector<double> Reference(const Inputs& in, const Shape& s, std::vector<int>* n_of, std::vector<double>* flip) {
  const AttentionParams p = ParamsFor(s);
  const int group = s.n_heads / s.n_kv_heads;
  std::vector<double> out(in.q.size());
  n_of->resize(in.q.size());
  flip->assign(in.q.size(), 0.0);
  for (int t = 0; t < s.n_tokens; ++t) {
    for (int h = 0; h < s.n_heads; ++h) {
      const size_t q_at = t * TokenSize(s) + static_cast<size_t>(h) * s.head_dim;
      const size_t kv_offset = static_cast<size_t>(h / group) * s.head_dim;
      const int n = s.first_pos + t + 1;
      std::vector<double> att(n);
      for (int pos = 0; pos < n; ++pos) {
        // cpu::Attention's portable score, in float.
        const uint16_t* k_row = &in.k[pos * RowSize(s) + kv_offset];
        float dot = 0.0f;
        for (int d = 0; d < s.head_dim; ++d) {
          dot += Fp16ToFp32(Fp32ToFp16(in.q[q_at + d])) * Fp16ToFp32(k_row[d]);
        }
        att[pos] = dot * p.scale;
      }
      const double max = *std::max_element(att.begin(), att.end());
      double sum = 0;
      for (double& a : att) sum += a = std::exp(a - max);
      double allowance = 0;
      for (double& a : att) {
        const double w = a / sum;
        a = Fp16ToFp32(Fp32ToFp16(static_cast<float>(w)));
        // The fp16 neighbour on the other side of w, and the midpoint between.
        const uint16_t bits = Fp32ToFp16(static_cast<float>(w));
        const double other = Fp16ToFp32(static_cast<uint16_t>(a < w ? bits + 1 : (bits == 0 ? 0 : bits - 1)));
        if (std::abs(w - (a + other) / 2) <= 64 * 0x1p-24 * w) allowance += std::abs(other - a);
      }
      for (int d = 0; d < s.head_dim; ++d) {
        double o = 0;
        for (int pos = 0; pos < n; ++pos) o += att[pos] * Fp16ToFp32(in.v[pos * RowSize(s) + kv_offset + d]);
        out[q_at + d] = o;
        (*n_of)[q_at + d] = n;
        (*flip)[q_at + d] = allowance;  // |v| <= 1
      }
    }
  }
  return out;
}

// The worst |got - want| / tolerance(n) over the elements; counts and
// reports (first one) the elements over 1.
template <typename Want>
double WorstRatio(const std::vector<float>& got, const std::vector<Want>& want, const std::vector<int>& n_of,
                  double (*tolerance_of)(int), const std::string& what, double* worst_diff,
                  const std::vector<double>* extra = nullptr) {
  auto tolerance = [&](size_t i) { return tolerance_of(n_of[i]) + (extra != nullptr ? (*extra)[i] : 0.0); };
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t misses = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double diff = std::abs(got[i] - static_cast<double>(want[i]));
    const double ratio = diff / tolerance(i);
    if (!(ratio <= 1) && misses++ == 0) {
      ADD_FAILURE() << what << ": element " << i << " (n " << n_of[i] << "): got " << got[i] << ", want " << want[i]
                    << ", diff " << diff << " > tolerance " << tolerance(i);
    }
    if (!(ratio <= worst)) {
      worst = ratio;
      *worst_diff = diff;
    }
  }
  EXPECT_EQ(misses, 0u) << what << ": elements outside the tolerance";
  return worst;
}

class AttentionCudaTest : public testing::CudaOpTest {
 protected:
  // The device's copies of one Inputs.
  struct DeviceInputs {
    testing::DeviceVector<float> q;
    testing::DeviceVector<uint16_t> k;
    testing::DeviceVector<uint16_t> v;
  };
  DeviceInputs UploadInputs(const Inputs& in) { return {Upload(in.q), Upload(in.k), Upload(in.v)}; }

  // cuda::Attention into a fresh buffer with `scratch_bytes` of scratch (the
  // full AttentionScratchBytes when 0).
  std::vector<float> Run(const DeviceInputs& d, const Shape& s, size_t scratch_bytes = 0) {
    return Run(d, ParamsFor(s), scratch_bytes);
  }
  std::vector<float> Run(const DeviceInputs& d, const AttentionParams& p, size_t scratch_bytes = 0) {
    cuda::Exec exec = Exec(cuda::AttentionScratchBytes(p));
    if (scratch_bytes != 0) exec.scratch_bytes = scratch_bytes;
    auto out = Output<float>(d.q.size());
    const absl::Status status = cuda::Attention(d.q.get(), d.k.get(), d.v.get(), out.get(), p, exec);
    EXPECT_TRUE(status.ok()) << status;
    return out.Download(stream());
  }
};

// head_dim 1, 8, 33, 40, 64, 72, 128 and the largest, 256; GQA ratios 1, 2,
// 3, 8; contexts of 1, under, exactly and just over one split (256, 257),
// across split edges inside a batch, and a 4096-row decode; n_tokens 1, 9
// and a 384-token prefill (256 queries of one split, 128 of two). The rows
// after the last query's are NaN: reading one shows.
// Measured (executor, 2026-11-27, before and after the value sums went to
// position groups alike), the element nearest its tolerance: |cuda - cpu|
// 1.5e-5, 0.03 of the tolerance; |cuda - reference| 3.0e-5, 0.63 of that
// tolerance (the worst case of every rounding, plus the element's fp16
// midpoint allowance).
constexpr Shape kShapes[] = {
    {1, 0, 1, 1, 8},     {9, 0, 4, 2, 64},   {1, 255, 8, 8, 128}, {1, 256, 8, 1, 128},  {9, 250, 4, 4, 72},
    {3, 1000, 2, 2, 40}, {2, 20, 4, 4, 1},   {2, 10, 2, 1, 256},  {5, 3, 3, 1, 33},     {1, 4095, 8, 1, 128},
    {384, 0, 8, 2, 64},
};

TEST_F(AttentionCudaTest, MatchesCpuAndReference) {
  uint32_t seed = 1;
  double worst_cpu = 0, worst_cpu_diff = 0, worst_ref = 0, worst_ref_diff = 0;
  for (const Shape& s : kShapes) {
    const Inputs in = RandomInputs(s, seed++, /*extra_rows=*/3);
    const std::vector<float> got = Run(UploadInputs(in), s);
    std::vector<int> n_of;
    std::vector<double> flip;
    const std::vector<double> reference = Reference(in, s, &n_of, &flip);
    double diff = 0;
    const double cpu_ratio = WorstRatio(got, RunCpu(in, s), n_of, CudaVsCpuTolerance, Describe(s) + " vs cpu", &diff);
    if (cpu_ratio >= worst_cpu) {
      worst_cpu = cpu_ratio;
      worst_cpu_diff = diff;
    }
    const double ref_ratio =
        WorstRatio(got, reference, n_of, CudaVsReferenceTolerance, Describe(s) + " vs reference", &diff, &flip);
    if (ref_ratio >= worst_ref) {
      worst_ref = ref_ratio;
      worst_ref_diff = diff;
    }
  }
  std::printf("worst |cuda - cpu| %.3g (%.2f of its tolerance), |cuda - reference| %.3g (%.2f of its tolerance)\n",
              worst_cpu_diff, worst_cpu, worst_ref_diff, worst_ref);
}

// Token t computed alone (n_tokens 1 at position first_pos + t, the rows
// after it NaN) gives bit for bit its row of the prefill: the splits depend
// only on the position.
TEST_F(AttentionCudaTest, TokenAloneMatchesItsRowOfThePrefillBitForBit) {
  for (const Shape& prefill : {Shape{300, 0, 4, 2, 64}, Shape{20, 250, 8, 1, 40}}) {
    const Inputs in = RandomInputs(prefill, 60 + prefill.first_pos);
    const std::vector<float> all = Run(UploadInputs(in), prefill);
    for (int t : {0, 1, 5, 6, 7, 100, 254, 255, 256, 257, 299}) {
      if (t >= prefill.n_tokens) continue;
      const Shape decode = {1, prefill.first_pos + t, prefill.n_heads, prefill.n_kv_heads, prefill.head_dim};
      Inputs one = in;
      one.q.assign(in.q.begin() + t * TokenSize(prefill), in.q.begin() + (t + 1) * TokenSize(prefill));
      const size_t visible = (decode.first_pos + 1) * RowSize(prefill);
      std::fill(one.k.begin() + visible, one.k.end(), kFp16NaN);
      std::fill(one.v.begin() + visible, one.v.end(), kFp16NaN);
      const std::vector<float> alone = Run(UploadInputs(one), decode);
      EXPECT_EQ(std::memcmp(alone.data(), all.data() + t * TokenSize(prefill), alone.size() * sizeof(float)), 0)
          << Describe(decode) << " vs its row of " << Describe(prefill);
    }
  }
}

// A scratch that holds only the last token's records (the least accepted:
// two tokens of one split, or one of two, per round), one byte more (still
// no third token), or a third of the full size runs the tokens in rounds:
// the same bits.
TEST_F(AttentionCudaTest, RoundsOfASmallScratchGiveTheSameBits) {
  const Shape s = {120, 200, 4, 2, 72};  // positions 200..319: one split, then two
  const Inputs in = RandomInputs(s, 9);
  const DeviceInputs d = UploadInputs(in);
  const std::vector<float> full = Run(d, s);
  const size_t last_token_bytes =
      cuda::AttentionScratchBytes(ParamsFor({1, s.first_pos + s.n_tokens - 1, s.n_heads, s.n_kv_heads, s.head_dim}));
  for (size_t bytes : {last_token_bytes, last_token_bytes + 1, cuda::AttentionScratchBytes(ParamsFor(s)) / 3}) {
    const std::vector<float> rounds = Run(d, s, bytes);
    EXPECT_EQ(std::memcmp(rounds.data(), full.data(), full.size() * sizeof(float)), 0) << bytes << " bytes";
  }
}

// The records of every (token, split, head): head_dim + 3 floats and the
// split's kAttentionSplit scores each.
TEST_F(AttentionCudaTest, ScratchBytesCountsEverySplitOfEveryToken) {
  const size_t record = (64 + 3 + kAttentionSplit) * sizeof(float);
  EXPECT_EQ(cuda::AttentionScratchBytes(ParamsFor({1, 0, 8, 2, 64})), 8 * record);
  EXPECT_EQ(cuda::AttentionScratchBytes(ParamsFor({1, 255, 8, 2, 64})), 8 * record);
  EXPECT_EQ(cuda::AttentionScratchBytes(ParamsFor({1, 256, 8, 2, 64})), 2 * 8 * record);
  // Positions 250..769: 6 of one split, 256 of two, 256 of three, 2 of four.
  EXPECT_EQ(cuda::AttentionScratchBytes(ParamsFor({520, 250, 8, 2, 64})), (6 + 512 + 768 + 8) * 8 * record);
}

// With a budget: every token's records when they fit, else the budget, but
// never less than the last token's (the fewest the op runs with); 0 for
// what the op refuses. The first 512-token chunk of a Llama-3-8B prompt fits
// kAttentionScratchBudget; the fourth (positions 1536..2047) runs in rounds.
TEST_F(AttentionCudaTest, ScratchBytesWithABudget) {
  const AttentionParams p = ParamsFor({520, 250, 8, 2, 64});
  const size_t all = cuda::AttentionScratchBytes(p);
  const size_t last = cuda::AttentionScratchBytes(ParamsFor({1, 769, 8, 2, 64}));
  EXPECT_EQ(cuda::AttentionScratchBytes(p, all), all);
  EXPECT_EQ(cuda::AttentionScratchBytes(p, SIZE_MAX), all);
  EXPECT_EQ(cuda::AttentionScratchBytes(p, all - 1), all - 1);
  EXPECT_EQ(cuda::AttentionScratchBytes(p, last + 1), last + 1);
  EXPECT_EQ(cuda::AttentionScratchBytes(p, 0), last);
  EXPECT_EQ(cuda::AttentionScratchBytes(ParamsFor({0, 0, 8, 2, 64}), 1 << 20), 0u);
  EXPECT_LE(cuda::AttentionScratchBytes(ParamsFor({512, 0, 32, 8, 128})), cuda::kAttentionScratchBudget);
  const AttentionParams chunk_8b = ParamsFor({512, 1536, 32, 8, 128});
  EXPECT_GT(cuda::AttentionScratchBytes(chunk_8b), cuda::kAttentionScratchBudget);
  EXPECT_EQ(cuda::AttentionScratchBytes(chunk_8b, cuda::kAttentionScratchBudget), cuda::kAttentionScratchBudget);
  const AttentionParams chunk_8b_at_120k = ParamsFor({512, 120 * 1024, 32, 8, 128});
  EXPECT_GT(cuda::AttentionScratchBytes(chunk_8b_at_120k), size_t{3} << 30);
  EXPECT_EQ(cuda::AttentionScratchBytes(chunk_8b_at_120k, cuda::kAttentionScratchBudget),
            cuda::kAttentionScratchBudget);
}

// out == q: every query is read before its output is written, across the
// splits, the combine and the rounds.
// A decode step whose position is read on the device (first_pos_at, the
// launch sized by max_ctx) gets the bits of the same step passed its
// position: within one split, at and past a split edge, several splits in.
TEST_F(AttentionCudaTest, APositionReadOnTheDeviceGivesThePassedPositionsBits) {
  for (const int first_pos : {0, 100, 255, 256, 700}) {
    SCOPED_TRACE(first_pos);
    const Shape s = {1, first_pos, 4, 2, 64};
    const DeviceInputs d = UploadInputs(RandomInputs(s, 30 + first_pos, /*extra_rows=*/1024 - first_pos - 1));
    const std::vector<float> want = Run(d, s);
    auto position = Upload(std::vector<int32_t>{first_pos});
    AttentionParams p = ParamsFor(s);
    p.first_pos = 0;
    p.first_pos_at = position.get();
    p.max_ctx = 1024;
    const std::vector<float> got = Run(d, p);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
  }
  // Refused: a bound below the step, or with a tree or non-causal.
  const Shape s = {2, 0, 4, 2, 8};
  const DeviceInputs d = UploadInputs(RandomInputs(s, 3));
  auto position = Upload(std::vector<int32_t>{0});
  AttentionParams p = ParamsFor(s);
  p.first_pos_at = position.get();
  p.max_ctx = 1;
  auto out = Output<float>(d.q.size());
  testing::ExpectInvalidArgument(cuda::Attention(d.q.get(), d.k.get(), d.v.get(), out.get(), p, Exec(1 << 16)),
                                 "Attention", "first_pos_at");
  p.max_ctx = 8;
  p.causal = false;
  testing::ExpectInvalidArgument(cuda::Attention(d.q.get(), d.k.get(), d.v.get(), out.get(), p, Exec(1 << 16)),
                                 "Attention", "first_pos_at");
}

// How many query heads of a kv head one block serves changes which loads
// they share, not a sum: one head a block, 2, 3, 4 and the launch's own
// choice give the same bits, causal (across split edges, also in rounds of
// one token) and non-causal. Groups of 7 (blocks of 4 and 3 heads at 4), 8,
// 6, 3 and 1; prefills and a decode step.
TEST_F(AttentionCudaTest, HeadsPerBlockDoNotChangeTheBits) {
  for (const Shape& s : {Shape{40, 240, 7, 1, 64}, Shape{9, 500, 8, 1, 128}, Shape{6, 250, 12, 2, 72},
                         Shape{5, 3, 3, 1, 33}, Shape{3, 0, 4, 4, 32}, Shape{1, 300, 8, 2, 64}}) {
    const DeviceInputs d = UploadInputs(RandomInputs(s, 70 + s.n_heads, /*extra_rows=*/2));
    // The records of the last token, causal or not (its splits are every
    // token's most): rounds of one token.
    const size_t last_token_bytes =
        cuda::AttentionScratchBytes(ParamsFor({1, s.first_pos + s.n_tokens - 1, s.n_heads, s.n_kv_heads, s.head_dim}));
    for (const bool causal : {true, false}) {
      AttentionParams p = ParamsFor(s);
      p.causal = causal;
      const std::string what = Describe(s) + (causal ? " causal" : " non-causal");
      std::vector<float> one_head;
      {
        testing::ScopedAttentionHeads heads(1);
        one_head = Run(d, p);
      }
      for (const int heads : {2, 3, 4, 0}) {
        testing::ScopedAttentionHeads scoped(heads);
        const std::vector<float> got = Run(d, p);
        EXPECT_EQ(std::memcmp(got.data(), one_head.data(), got.size() * sizeof(float)), 0)
            << what << ": " << heads << " heads a block";
        const std::vector<float> rounds = Run(d, p, last_token_bytes);
        EXPECT_EQ(std::memcmp(rounds.data(), one_head.data(), got.size() * sizeof(float)), 0)
            << what << ": " << heads << " heads a block, rounds of one token";
      }
    }
  }
  EXPECT_FALSE(cuda::SetAttentionHeadsPerBlock(5));
  EXPECT_FALSE(cuda::SetAttentionHeadsPerBlock(-1));
}

TEST_F(AttentionCudaTest, OutMayBeQ) {
  const Shape s = {40, 230, 4, 2, 24};
  const Inputs in = RandomInputs(s, 8);
  const DeviceInputs d = UploadInputs(in);
  const std::vector<float> want = Run(d, s);
  const AttentionParams p = ParamsFor(s);
  const size_t last_token_bytes =
      cuda::AttentionScratchBytes(ParamsFor({1, s.first_pos + s.n_tokens - 1, s.n_heads, s.n_kv_heads, s.head_dim}));
  for (size_t bytes : {cuda::AttentionScratchBytes(p), last_token_bytes}) {
    const DeviceInputs fresh = UploadInputs(in);
    cuda::Exec exec = Exec(cuda::AttentionScratchBytes(p));
    exec.scratch_bytes = bytes;
    ASSERT_TRUE(cuda::Attention(fresh.q.get(), fresh.k.get(), fresh.v.get(), fresh.q.get(), p, exec).ok());
    const std::vector<float> got = fresh.q.Download(stream());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << bytes << " bytes of scratch";
  }
}

// --- Tree attention ----------------------------------------------------------

// Trees whose queries' logical positions cross a split edge (250 + up to 12
// nodes: 251..262 positions), sit in a third split (600), start the cache
// (0) or follow a short context (5, a bushy tree of depth 8).
struct TreeCase {
  int n_nodes;
  int tree_base;
  int max_depth;
  double chain_bias;
  int n_heads, n_kv_heads, head_dim;
};
constexpr TreeCase kTreeCases[] = {{30, 250, 12, 0.6, 4, 2, 64},
                                   {24, 600, 10, 0.5, 8, 1, 40},
                                   {20, 0, 20, 0.8, 2, 2, 33},
                                   {40, 5, 8, 0.2, 6, 3, 16}};

class AttentionCudaTreeTest : public AttentionCudaTest {
 protected:
  // cuda::Attention of a tree step whose masks are at device_mask, with
  // `scratch_bytes` of scratch (the full AttentionScratchBytes when 0).
  std::vector<float> RunTree(const DeviceInputs& d, const Shape& s, const uint64_t* device_mask,
                             size_t scratch_bytes = 0) {
    const AttentionParams p = testing::TreeParamsFor(s, device_mask);
    cuda::Exec exec = Exec(cuda::AttentionScratchBytes(p));
    if (scratch_bytes != 0) exec.scratch_bytes = scratch_bytes;
    auto out = Output<float>(d.q.size());
    const absl::Status status = cuda::Attention(d.q.get(), d.k.get(), d.v.get(), out.get(), p, exec);
    EXPECT_TRUE(status.ok()) << status;
    return out.Download(stream());
  }
};

// The tree contract (ops.h) on the device: each tree query's output is, bit
// for bit, the CUDA causal op's for the last query of a cache holding [0,
// tree_base), then that query's ancestors and itself (the rows after it
// NaN). A scratch holding one token's records (rounds of one token) gives
// the same bits.
TEST_F(AttentionCudaTreeTest, TreeQueriesMatchTheCausalOpOnTheCompactedCacheBitForBit) {
  uint32_t seed = 700;
  for (const TreeCase& c : kTreeCases) {
    const Shape s = {c.n_nodes, c.tree_base, c.n_heads, c.n_kv_heads, c.head_dim};
    const testing::DraftTree tree = testing::RandomDraftTree(c.n_nodes, c.max_depth, c.chain_bias, seed);
    if (c.tree_base == 250) {
      ASSERT_GT(c.tree_base + tree.depth, kAttentionSplit) << "no query of this tree crosses the split edge";
    }
    const Inputs in = RandomInputs(s, seed++, /*extra_rows=*/3);
    const DeviceInputs d = UploadInputs(in);
    const auto mask = Upload(tree.mask);
    const std::vector<float> got = RunTree(d, s, mask.get());
    for (int t = 0; t < s.n_tokens; ++t) {
      const Shape compact = testing::CompactedShape(s, c.tree_base, tree.mask[t]);
      const Inputs one = testing::CompactTreeQuery(in, s, c.tree_base, tree.mask[t], t, /*extra_rows=*/3);
      const std::vector<float> want = Run(UploadInputs(one), compact);
      EXPECT_EQ(std::memcmp(want.data(), got.data() + t * TokenSize(s), TokenSize(s) * sizeof(float)), 0)
          << Describe(s) << " depth " << tree.depth << ": query " << t << " (mask " << std::hex << tree.mask[t]
          << std::dec << ") vs " << Describe(compact);
    }
    const size_t one_token_bytes = cuda::AttentionScratchBytes(testing::TreeParamsFor(s, mask.get())) / s.n_tokens;
    const std::vector<float> rounds = RunTree(d, s, mask.get(), one_token_bytes);
    EXPECT_EQ(std::memcmp(rounds.data(), got.data(), got.size() * sizeof(float)), 0)
        << Describe(s) << ": rounds of one token";
  }
}

// CUDA's tree attention against the CPU's (portable) on the same tree,
// within the causal comparison's tolerance at each query's n_ctx: the tree
// changes which rows are read, not the arithmetic. Measured (executor): at
// most 2.0e-6, under 0.01 of the tolerance; a wrong row is off by about
// 1 / n_ctx, several times the tolerance.
TEST_F(AttentionCudaTreeTest, MatchesCpuTreeAttention) {
  uint32_t seed = 800;
  double worst = 0, worst_diff = 0;
  for (const TreeCase& c : kTreeCases) {
    const Shape s = {c.n_nodes, c.tree_base, c.n_heads, c.n_kv_heads, c.head_dim};
    const testing::DraftTree tree = testing::RandomDraftTree(c.n_nodes, c.max_depth, c.chain_bias, seed);
    const Inputs in = RandomInputs(s, seed++);
    const auto mask = Upload(tree.mask);
    const std::vector<float> got = RunTree(UploadInputs(in), s, mask.get());
    std::vector<float> want(in.q.size());
    const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), want.data(),
                                               testing::TreeParamsFor(s, tree.mask.data()), {});
    ASSERT_TRUE(status.ok()) << status;
    std::vector<int> n_of(in.q.size());
    for (size_t i = 0; i < n_of.size(); ++i) {
      n_of[i] = c.tree_base + std::popcount(tree.mask[i / TokenSize(s)]);
    }
    double diff = 0;
    const double ratio = WorstRatio(got, want, n_of, CudaVsCpuTolerance, Describe(s) + " tree vs cpu", &diff);
    if (ratio >= worst) {
      worst = ratio;
      worst_diff = diff;
    }
  }
  std::printf("worst |cuda tree - cpu tree| %.3g (%.2f of its tolerance)\n", worst_diff, worst);
}

// The host cannot read the masks, so the kernels must take any: with caches
// of exactly tree_base + kMaxTreeAttentionRows rows (the executor faults on
// a read past an allocation's last page, or under AddressSanitizer past its
// last byte), masks naming the last row, every row, or none, each query
// matching its compacted cache bit for bit.
// A query that sees no row at all (tree_base 0, mask 0) outputs zeros; with
// tree_base > 0, mask 0 sees [0, tree_base), like any other mask.
TEST_F(AttentionCudaTreeTest, AnyMaskReadsOnlyTheRowsItNames) {
  const std::vector<uint64_t> masks = {uint64_t{1} << 63, ~uint64_t{0}, 0, 0x8000000000000001, 0x5555};
  for (int tree_base : {0, 250}) {
    const Shape s = {static_cast<int>(masks.size()), tree_base, 4, 2, 32};
    // Every row the masks may name holds values: first_pos + n_tokens = tree_base + 64.
    const Shape filled = {kMaxTreeAttentionRows, tree_base, s.n_heads, s.n_kv_heads, s.head_dim};
    Inputs in = RandomInputs(filled, 31 + tree_base);
    in.q.resize(s.n_tokens * TokenSize(s));
    const auto mask = Upload(masks);
    const std::vector<float> got = RunTree(UploadInputs(in), s, mask.get());
    for (int t = 0; t < s.n_tokens; ++t) {
      const float* row = got.data() + t * TokenSize(s);
      if (tree_base + std::popcount(masks[t]) == 0) {
        for (size_t i = 0; i < TokenSize(s); ++i) ASSERT_EQ(row[i], 0.0f) << "query " << t << " sees no row";
        continue;
      }
      const Shape compact = testing::CompactedShape(s, tree_base, masks[t]);
      const Inputs one = testing::CompactTreeQuery(in, s, tree_base, masks[t], t);
      const std::vector<float> want = Run(UploadInputs(one), compact);
      EXPECT_EQ(std::memcmp(want.data(), row, TokenSize(s) * sizeof(float)), 0)
          << "tree_base " << tree_base << " mask " << std::hex << masks[t];
    }
  }
}

// In tree mode every query is given the records of tree_base +
// kMaxTreeAttentionRows positions: (tree_base + 63) / kAttentionSplit + 1
// splits of n_heads records of head_dim + 3 + kAttentionSplit floats,
// whatever the masks (the pointer is not read).
TEST_F(AttentionCudaTreeTest, ScratchBytesIsTheBoundForEveryMask) {
  const size_t record = (64 + 3 + kAttentionSplit) * sizeof(float);
  const uint64_t any_mask[1] = {};
  auto bytes = [&](int n_tokens, int tree_base) {
    return cuda::AttentionScratchBytes(testing::TreeParamsFor({n_tokens, tree_base, 8, 2, 64}, any_mask));
  };
  EXPECT_EQ(bytes(1, 0), 1 * 8 * record);
  EXPECT_EQ(bytes(10, 0), 10 * 8 * record);
  EXPECT_EQ(bytes(10, 192), 10 * 8 * record);      // positions up to 255: one split
  EXPECT_EQ(bytes(10, 193), 10 * 2 * 8 * record);  // up to 256: two
  EXPECT_EQ(bytes(64, 600), 64 * 3 * 8 * record);
  // Arguments Attention refuses: no size.
  EXPECT_EQ(bytes(65, 0), 0u);
  EXPECT_EQ(bytes(4, -1), 0u);
  EXPECT_EQ(bytes(4, INT32_MAX - 63), 0u);
}

// --- Non-causal attention ----------------------------------------------------

AttentionParams NonCausal(const Shape& s) {
  AttentionParams p = ParamsFor(s);
  p.causal = false;
  return p;
}

// Query t of s alone, as a causal query at the call's last position.
Shape LastPosition(const Shape& s) { return {1, s.first_pos + s.n_tokens - 1, s.n_heads, s.n_kv_heads, s.head_dim}; }

// ops.h: each non-causal query gets, bit for bit, what the causal op gives
// its q alone at the last position (same splits, same order), in one round
// or in rounds of one token. Contexts of one split, two (258, 300) and one
// past an edge only for the last query (257).
TEST_F(AttentionCudaTest, NonCausalQueriesAreTheCausalQueryAtTheLastPositionBitForBit) {
  uint32_t seed = 70;
  for (const Shape& s : {Shape{5, 3, 3, 1, 33}, Shape{9, 249, 4, 4, 72}, Shape{9, 250, 4, 2, 40},
                         Shape{300, 0, 4, 2, 64}}) {
    const Inputs in = RandomInputs(s, seed++, /*extra_rows=*/3);
    const DeviceInputs d = UploadInputs(in);
    const std::vector<float> all = Run(d, NonCausal(s));
    const size_t one_token_bytes = cuda::AttentionScratchBytes(ParamsFor(LastPosition(s)));
    const std::vector<float> rounds = Run(d, NonCausal(s), one_token_bytes);
    EXPECT_EQ(std::memcmp(rounds.data(), all.data(), all.size() * sizeof(float)), 0) << Describe(s) << " in rounds";
    for (int t : {0, 1, 4, 8, 150, 299}) {
      if (t >= s.n_tokens) continue;
      Inputs one = in;
      one.q.assign(in.q.begin() + t * TokenSize(s), in.q.begin() + (t + 1) * TokenSize(s));
      const std::vector<float> alone = Run(UploadInputs(one), LastPosition(s));
      EXPECT_EQ(std::memcmp(alone.data(), all.data() + t * TokenSize(s), alone.size() * sizeof(float)), 0)
          << Describe(s) << " token " << t;
    }
  }
}

// Against the CPU's non-causal attention, within the causal comparison's
// tolerance at n = first_pos + n_tokens, the rows every query sees (the
// rows after them NaN: reading one shows).
TEST_F(AttentionCudaTest, NonCausalMatchesCpu) {
  uint32_t seed = 80;
  for (const Shape& s : {Shape{7, 0, 8, 2, 64}, Shape{9, 250, 4, 4, 72}, Shape{3, 1000, 2, 2, 40}}) {
    const Inputs in = RandomInputs(s, seed++, /*extra_rows=*/3);
    std::vector<float> want(in.q.size());
    ASSERT_TRUE(cpu::Attention(in.q.data(), in.k.data(), in.v.data(), want.data(), NonCausal(s), {}).ok());
    const std::vector<int> n_of(in.q.size(), s.first_pos + s.n_tokens);
    double diff = 0;
    WorstRatio(Run(UploadInputs(in), NonCausal(s)), want, n_of, CudaVsCpuTolerance, Describe(s) + " non-causal",
               &diff);
  }
}

// Every non-causal query is given the last position's splits.
TEST_F(AttentionCudaTest, NonCausalScratchBytesGivesEveryTokenTheLastPositionsSplits) {
  const size_t record = (64 + 3 + kAttentionSplit) * sizeof(float);
  EXPECT_EQ(cuda::AttentionScratchBytes(NonCausal({10, 0, 8, 2, 64})), 10 * 8 * record);
  EXPECT_EQ(cuda::AttentionScratchBytes(NonCausal({10, 246, 8, 2, 64})), 10 * 8 * record);  // up to 255
  EXPECT_EQ(cuda::AttentionScratchBytes(NonCausal({10, 247, 8, 2, 64})), 10 * 2 * 8 * record);
  EXPECT_EQ(cuda::AttentionScratchBytes(NonCausal({512, 0, 8, 2, 64})), 512 * 2 * 8 * record);
  // A tree_mask with causal false: Attention refuses it, no size.
  const uint64_t any_mask[1] = {};
  AttentionParams tree = testing::TreeParamsFor({4, 0, 8, 2, 64}, any_mask);
  tree.causal = false;
  EXPECT_EQ(cuda::AttentionScratchBytes(tree), 0u);
}

TEST_F(AttentionCudaTest, RejectsBadArgumentsWithoutLaunching) {
  const Shape ok = {2, 1, 4, 2, 8};
  const Inputs in = RandomInputs(ok, 1);
  const DeviceInputs d = UploadInputs(in);
  auto out = Output<float>(in.q.size());
  const AttentionParams good = ParamsFor(ok);
  // Two tokens of one split each, 4 heads, records of 8 + 3 + 256 floats.
  const size_t need = cuda::AttentionScratchBytes(good);
  ASSERT_EQ(need, 2 * 4 * (11 + kAttentionSplit) * sizeof(float));
  const cuda::Exec exec = Exec(need);
  auto with = [&](auto change) {
    AttentionParams p = good;
    change(p);
    return p;
  };
  auto scratch = [&](void* data, size_t bytes) {
    cuda::Exec e = exec;
    e.scratch = data;
    e.scratch_bytes = bytes;
    return e;
  };
  struct Case {
    const float* q;
    const uint16_t* k;
    const uint16_t* v;
    float* out;
    AttentionParams p;
    cuda::Exec exec;
    std::string needle;
  };
  const float* q = d.q.get();
  const uint16_t* k = d.k.get();
  const uint16_t* v = d.v.get();
  const Case cases[] = {
      {nullptr, k, v, out.get(), good, exec, "q is null"},
      {q, nullptr, v, out.get(), good, exec, "k_cache is null"},
      {q, k, nullptr, out.get(), good, exec, "v_cache is null"},
      {q, k, v, nullptr, good, exec, "out is null"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.n_tokens = 0; }), exec, "n_tokens (0)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.n_heads = -4; }), exec, "n_heads (-4)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.n_kv_heads = 0; }), exec, "n_kv_heads (0)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.n_kv_heads = 3; }), exec,
       "n_kv_heads (3) must divide n_heads (4)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.head_dim = 0; }), exec, "head_dim (0)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.head_dim = 257; }), exec, "head_dim (257) must be <= 256"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.first_pos = -1; }), exec, "first_pos (-1)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.first_pos = 2147483647; }), exec,
       "first_pos (2147483647)"},
      {q, k, v, out.get(), with([](AttentionParams& p) { p.scale = NAN; }), exec, "scale (nan)"},
      // Tree limits (the mask is not read: any pointer does).
      {q, k, v, out.get(),
       with([&](AttentionParams& p) {
         p.tree_mask = reinterpret_cast<const uint64_t*>(k);
         p.n_tokens = 65;
       }),
       exec, "n_tokens (65) must be <= kMaxTreeAttentionRows (64)"},
      {q, k, v, out.get(),
       with([&](AttentionParams& p) {
         p.tree_mask = reinterpret_cast<const uint64_t*>(k);
         p.tree_base = -1;
       }),
       exec, "tree_base (-1)"},
      {q, k, v, out.get(),
       with([&](AttentionParams& p) {
         p.tree_mask = reinterpret_cast<const uint64_t*>(k);
         p.causal = false;
       }),
       exec, "a tree_mask needs causal"},
      // The last token (position 2) has one split: 4 heads * (8 + 3 + 256) floats.
      {q, k, v, out.get(), good, scratch(exec.scratch, 4271), "exec.scratch_bytes (4271) is less than 4272"},
      {q, k, v, out.get(), good, scratch(exec.scratch, 0), "exec.scratch_bytes (0) is less than 4272"},
      {q, k, v, out.get(), good, scratch(nullptr, need), "exec.scratch is null"},
  };
  for (const Case& c : cases) {
    testing::ExpectInvalidArgument(cuda::Attention(c.q, c.k, c.v, c.out, c.p, c.exec), "Attention", c.needle);
  }
  for (float f : out.Download(stream())) ASSERT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
