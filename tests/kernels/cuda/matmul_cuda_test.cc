// cuda::MatMul and cuda::MatMulExperts, every weight type, both paths:
//  - against the exact (fp64) product of the values the kernels actually
//    multiply (weights as decoded, activations as rounded: 8 bits per
//    32-element chunk on the decode path, fp16/bf16 on the prefill path),
//    within float rounding;
//  - against cpu::MatMul on the same inputs, within a bound computed from the
//    two sides' activation rounding;
//  - a token alone and in a decode batch gets the same bits, and so does an
//    expert choice against cuda::MatMul alone.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;
using testing::DeviceVector;

// Tolerance against the exact product of what the kernels multiply:
// |got - exact| <= kTolUlps * 2^-24 * S, S = sum_i |w_i * x_i| over those
// values. The integer sums are exact; what rounds is, per 32-element chunk,
// the scale products (d * sum, m * sum(x), their difference, times dx: 4
// roundings of terms bounded by the chunk's share of S, more where d * q and
// m cancel), each lane's float sum over its cols / 1024 chunks, the 5-level
// warp tree, and on the reference side DequantizeRows' rounding of each
// weight: about 12 roundings at cols 4096, adding like a random walk.
// Measured worst over every type and shape here: 1.28 (the test prints it).
// 8 leaves room and still catches a wrong element, which moves a result by
// about S / cols (a wrong Q6_K scale index: 10^5 of these units).
constexpr double kDecodeTolUlps = 8;
// Prefill: cuBLAS sums each output's cols products in float in an order of
// its own; the bound for a float sum of k terms is k * 2^-24 * S.
constexpr double kUlp = 1.0 / (1 << 24);

struct Problem {
  GgmlType type;
  int64_t rows, cols;
  int n_tokens;
  std::vector<uint8_t> w_bytes;
  std::vector<float> x;  // (n_tokens, cols)
  WeightMatrix w(const void* data) const { return WeightMatrix{type, data, rows, cols}; }
  std::string Name() const {
    return absl::StrFormat("%s %dx%d, %d tokens", std::string(GgmlTypeInfoOf(type).name), rows, cols, n_tokens);
  }
};

Problem Make(GgmlType type, int64_t rows, int64_t cols, int n_tokens, uint32_t seed) {
  return Problem{type, rows, cols, n_tokens, RandomWeights(type, rows, cols, seed), RandomActivations(n_tokens * cols, seed + 1)};
}

std::vector<float> Dequantized(const Problem& p) {
  std::vector<float> w(static_cast<size_t>(p.rows * p.cols));
  EXPECT_TRUE(cpu::DequantizeRows(p.w(p.w_bytes.data()), 0, p.rows, w.data()).ok());
  return w;
}

// x as the CUDA kernels see it: rounded per act_q8.h on the decode path for
// quantized weights; to fp16 (bf16 for BF16 weights) on the prefill path;
// as it is otherwise.
std::vector<double> CudaActivations(const Problem& p) {
  std::vector<double> out(p.x.size());
  const bool prefill = p.n_tokens > kMaxDecodePathTokens;
  for (size_t i = 0; i < p.x.size(); ++i) {
    if (p.type == GgmlType::kF32 || (!prefill && cuda::matmul::IsFloatWeight(p.type))) {
      out[i] = p.x[i];
    } else if (prefill) {
      out[i] = p.type == GgmlType::kBF16 ? Bf16ToFp32(Fp32ToBf16(p.x[i])) : Fp16ToFp32(Fp32ToFp16(p.x[i]));
    }
  }
  if (prefill || cuda::matmul::IsFloatWeight(p.type)) return out;
  if (cuda::ActQ8RuleFor(p.type) == cuda::ActQ8Rule::kPer256) {
    for (size_t b = 0; b < p.x.size(); b += cuda::kQ8KBlock) {
      float max = 0, best_abs = -1;
      for (int j = 0; j < cuda::kQ8KBlock; ++j) {
        if (std::fabs(p.x[b + j]) > best_abs) {
          best_abs = std::fabs(p.x[b + j]);
          max = p.x[b + j];
        }
      }
      const float iscale = best_abs == 0 ? 0.0f : -127.0f / max;
      const float d = iscale == 0 ? 0.0f : 1.0f / iscale;
      for (int j = 0; j < cuda::kQ8KBlock; ++j) {
        out[b + j] = static_cast<double>(d) * cuda::ActQ8QuantPer256(p.x[b + j], iscale);
      }
    }
    return out;
  }
  for (size_t c = 0; c < p.x.size(); c += cuda::kQ8Chunk) {
    float amax = 0;
    for (int j = 0; j < cuda::kQ8Chunk; ++j) amax = std::fmax(amax, std::fabs(p.x[c + j]));
    const float d = Fp16ToFp32(Fp32ToFp16(amax / 127.0f));
    for (int j = 0; j < cuda::kQ8Chunk; ++j) out[c + j] = static_cast<double>(d) * cuda::ActQ8QuantPer32(p.x[c + j], amax);
  }
  return out;
}

// The weights as the CUDA kernels multiply them: decoded, and on the
// prefill path of a quantized type rounded to fp16.
std::vector<double> CudaWeights(const Problem& p, const std::vector<float>& w) {
  std::vector<double> out(w.begin(), w.end());
  if (p.n_tokens > kMaxDecodePathTokens && !cuda::matmul::IsFloatWeight(p.type)) {
    for (double& v : out) v = Fp16ToFp32(Fp32ToFp16(static_cast<float>(v)));
  }
  return out;
}

// What cpu::MatMul computes for each output, exactly (testing::ReferenceDot
// of its activation encoding): it is within 16 * 2^-24 of its S of that
// (tests/kernels/matmul_test.cc).
std::vector<testing::ExactDot> CpuExact(const Problem& p, const std::vector<float>& w) {
  const cpu::ActType act = cpu::FindTypeKernels(p.type)->act;
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(p.type, p.cols));
  std::vector<uint8_t> enc(static_cast<size_t>(cpu::ActRowBytes(act, p.cols)));
  std::vector<float> x_hat(p.cols);
  std::vector<testing::ExactDot> out;
  for (int t = 0; t < p.n_tokens; ++t) {
    cpu::QuantizeActivationRow(act, &p.x[t * p.cols], p.cols, enc.data(), cpu::Simd::kPortable);
    cpu::DequantizeActivationRow(act, enc.data(), p.cols, x_hat.data());
    for (int64_t r = 0; r < p.rows; ++r) {
      out.push_back(
          testing::ReferenceDot(p.type, &w[r * p.cols], &p.w_bytes[r * row_bytes], act, enc.data(), x_hat.data(), p.cols));
    }
  }
  return out;
}

class MatMulCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<float> Run(const Problem& p) {
    auto d_w = Upload(p.w_bytes);
    auto d_x = Upload(p.x);
    auto d_out = Output<float>(static_cast<size_t>(p.n_tokens * p.rows));
    const WeightMatrix w = p.w(d_w.get());
    const absl::Status status =
        cuda::MatMul(w, d_x.get(), d_out.get(), p.n_tokens, Exec(cuda::MatMulScratchBytes(w, p.n_tokens)));
    EXPECT_TRUE(status.ok()) << p.Name() << ": " << status;
    return d_out.Download(stream());
  }

  // Runs p and checks it against both references; returns the largest error
  // against the exact product in units of 2^-24 * S.
  double Check(const Problem& p) {
    const std::vector<float> got = Run(p);
    const std::vector<float> w = Dequantized(p);
    const std::vector<double> w_cuda = CudaWeights(p, w);
    const std::vector<double> x_cuda = CudaActivations(p);
    const std::vector<testing::ExactDot> cpu_exact = CpuExact(p, w);
    std::vector<float> cpu_out(got.size());
    EXPECT_TRUE(cpu::MatMul(p.w(p.w_bytes.data()), p.x.data(), cpu_out.data(), p.n_tokens, cpu::Exec{}).ok());
    const bool prefill = p.n_tokens > kMaxDecodePathTokens;
    const double tol_ulps = prefill ? static_cast<double>(p.cols) : kDecodeTolUlps;
    double worst = 0;
    int misses = 0;
    for (int t = 0; t < p.n_tokens; ++t) {
      for (int64_t r = 0; r < p.rows; ++r) {
        double exact = 0, s = 0;
        for (int64_t c = 0; c < p.cols; ++c) {
          const size_t wi = r * p.cols + c, xi = t * p.cols + c;
          exact += w_cuda[wi] * x_cuda[xi];
          s += std::fabs(w_cuda[wi] * x_cuda[xi]);
        }
        const float g = got[t * p.rows + r];
        const double err = std::fabs(g - exact);
        worst = std::fmax(worst, err / (kUlp * s + 1e-30));
        // Against the CPU: the two exact values differ by the two sides'
        // rounding of the activations (8 bits per 32 or 256 values, fp16,
        // bf16: computed, not assumed), and each side is within its float
        // error of its exact value.
        const testing::ExactDot& cpu = cpu_exact[t * p.rows + r];
        const double cpu_bound =
            std::fabs(exact - cpu.value) + tol_ulps * kUlp * s + 16 * kUlp * cpu.abs_sum + 1e-6;
        if ((!(err <= tol_ulps * kUlp * s + 1e-6) || !(std::fabs(g - cpu_out[t * p.rows + r]) <= cpu_bound)) &&
            ++misses <= 3) {
          ADD_FAILURE() << p.Name() << " token " << t << " row " << r << ": got " << g << ", exact " << exact
                        << " (" << err / (kUlp * s) << " ulps of S), cpu " << cpu_out[t * p.rows + r]
                        << " (bound " << cpu_bound << ")";
        }
      }
    }
    return worst;
  }
};

TEST_F(MatMulCudaTest, DecodeEveryTypeMatchesTheExactProductAndTheCpu) {
  struct Shape {
    int64_t rows, cols;
    int n_tokens;
  };
  double worst = 0;
  uint32_t seed = 1;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    // Rows that fill no warp group evenly, 1 to 16 tokens, short and long
    // rows; one token over rows long enough that a lane has several units
    // (Q4_K: 4) or a warp several spans, so the next ones load ahead.
    for (const Shape& s : {Shape{1, 256, 1}, Shape{7, 512, 3}, Shape{33, 4096, 9}, Shape{70, 1024, 16},
                           Shape{45, 768, 5}, Shape{19, 8192, 1}}) {
      worst = std::fmax(worst, Check(Make(info.type, s.rows, s.cols, s.n_tokens, seed += 2)));
    }
  }
  // Float weights take any width: rows shorter than a warp share it.
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (const Shape& s : {Shape{9, 8, 2}, Shape{5, 3, 1}, Shape{11, 40, 4}}) {
      worst = std::fmax(worst, Check(Make(type, s.rows, s.cols, s.n_tokens, seed += 2)));
    }
  }
  std::printf("decode: worst error %.2f x 2^-24 S (tolerance %.0f)\n", worst, kDecodeTolUlps);
}

TEST_F(MatMulCudaTest, PrefillEveryTypeMatchesTheExactProductAndTheCpu) {
  uint32_t seed = 500;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    Check(Make(info.type, 70, 1024, kMaxDecodeTokens + 1, seed += 2));  // two decode launches
    Check(Make(info.type, 70, 1024, kMaxDecodePathTokens + 1, seed += 2));
    Check(Make(info.type, 600, 256, 20, seed += 2));
    Check(Make(info.type, 33, 512, 512, seed += 2));
  }
}

// A matrix of more rows than a tile holds is dequantized and multiplied a
// tile at a time: every tile's rows land in their place, the last one
// short. (At the default, a 4096-column matrix is one tile up to 8192 rows.)
TEST_F(MatMulCudaTest, PrefillTileByTileGivesEveryRow) {
  EXPECT_EQ(cuda::matmul::PrefillTileRows(14336, 4096), 8192);  // Llama-3-8B gate: two GEMMs
  EXPECT_EQ(cuda::matmul::PrefillTileRows(4096, 14336), 2304);   // down: two
  EXPECT_EQ(cuda::matmul::PrefillTileRows(1024, 4096), 1024);    // k, v: whole
  EXPECT_EQ(cuda::matmul::PrefillTileRows(4096, 1 << 20), cuda::matmul::kPrefillTileQuantum);  // at least one quantum
  EXPECT_FALSE(cuda::matmul::SetPrefillTileElements(0));
  ASSERT_TRUE(cuda::matmul::SetPrefillTileElements(256 * cuda::matmul::kPrefillTileQuantum));
  EXPECT_EQ(cuda::matmul::PrefillTileRows(600, 256), 128);
  uint32_t seed = 900;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kIQ2_XS}) {
    Check(Make(type, 600, 256, kMaxDecodePathTokens + 3, seed += 2));  // four tiles of 128 rows and one of 88
  }
  ASSERT_TRUE(cuda::matmul::SetPrefillTileElements(cuda::kPrefillTileElements));
}

// Alone, a token takes the kernels built for one token (and their loads
// ahead: 8192 columns give a Q4_K lane 4 units, a staged row 8 spans a warp).
TEST_F(MatMulCudaTest, ATokenGetsTheSameBitsAloneAndInADecodeBatch) {
  for (const auto& [type, cols] : std::vector<std::pair<GgmlType, int64_t>>{
           {GgmlType::kQ4_K, 512}, {GgmlType::kQ6_K, 512}, {GgmlType::kQ8_0, 512}, {GgmlType::kF16, 512},
           {GgmlType::kF32, 512}, {GgmlType::kQ4_K, 8192}, {GgmlType::kQ5_K, 8192}, {GgmlType::kQ6_K, 8192},
           {GgmlType::kIQ2_XS, 8192}}) {
    const Problem batch = Make(type, 37, cols, kMaxDecodePathTokens, 77);
    const std::vector<float> together = Run(batch);
    for (int t = 0; t < batch.n_tokens; t += 5) {
      Problem alone = batch;
      alone.n_tokens = 1;
      alone.x.assign(batch.x.begin() + t * batch.cols, batch.x.begin() + (t + 1) * batch.cols);
      const std::vector<float> single = Run(alone);
      EXPECT_EQ(0, std::memcmp(single.data(), &together[t * batch.rows], batch.rows * sizeof(float)))
          << batch.Name() << ": token " << t;
    }
  }
}

// A Q4_K and a Q6_K matrix (as q and v of a Q4_K_M model: both round x by
// the K-quant rule), a Q8_0 one (the per-32 rule) and an F16 one (x as it
// is): each output is what its own MatMul gives, bit for bit, on both paths;
// on the decode path x is rounded once per rule (2 quantize launches per 16
// tokens, not 3).
TEST_F(MatMulCudaTest, AGroupGivesEachMatrixItsMatMulBitsRoundingXOncePerRuleDecodingOncePerType) {
  // Per decode chunk of tokens: the roundings of x (one per rule) and the
  // decode launches (one per type).
  struct Group {
    std::vector<std::pair<GgmlType, int64_t>> shapes;
    uint64_t launches;
  };
  const Group groups[] = {
      {{{GgmlType::kQ4_K, 64}, {GgmlType::kQ6_K, 32}, {GgmlType::kQ8_0, 24}, {GgmlType::kF16, 8}}, 2 + 4},
      // q, k, v of Q4_K_M: Q4_K q and k (and a Q4_K v, or a Q6_K one).
      {{{GgmlType::kQ4_K, 64}, {GgmlType::kQ4_K, 32}, {GgmlType::kQ6_K, 32}, {GgmlType::kQ4_K, 8}}, 1 + 2},
  };
  constexpr int64_t kCols = 512;
  std::vector<std::pair<const Group*, int>> cases;
  for (const Group& group : groups) {
    for (int n_tokens : {1, 5, 20, kMaxDecodePathTokens + 6}) cases.emplace_back(&group, n_tokens);
  }
  for (const auto& [group_ptr, n_tokens] : cases) {
    SCOPED_TRACE(n_tokens);
    const Group& group = *group_ptr;
    const auto& shapes = group.shapes;
    std::vector<Problem> problems;
    std::vector<DeviceVector<uint8_t>> weights;
    std::vector<DeviceVector<float>> outs;
    std::vector<WeightMatrix> ws;
    std::vector<float*> out_ptrs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      problems.push_back(Make(shapes[i].first, shapes[i].second, kCols, n_tokens, 300 + static_cast<uint32_t>(i)));
      problems.back().x = problems[0].x;  // one x for the group
      weights.push_back(Upload(problems.back().w_bytes));
      outs.push_back(Output<float>(static_cast<size_t>(n_tokens * shapes[i].second)));
      ws.push_back(problems.back().w(weights.back().get()));
      out_ptrs.push_back(outs.back().get());
    }
    auto d_x = Upload(problems[0].x);
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    const absl::Status grouped =
        cuda::MatMulGroup(ws, d_x.get(), out_ptrs, n_tokens, Exec(cuda::MatMulGroupScratchBytes(ws, n_tokens)));
    ASSERT_TRUE(grouped.ok()) << grouped;
    const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
    if (n_tokens <= kMaxDecodePathTokens) {
      const uint64_t chunks = (n_tokens + kMaxDecodeTokens - 1) / kMaxDecodeTokens;
      EXPECT_EQ(launches, chunks * group.launches) << "a rounding of x per rule and a decode per type";
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(outs[i].Download(stream()), Run(problems[i])) << problems[i].Name();
    }
  }
  // Refused: unequal columns, more matrices than outputs.
  auto d_w = Upload(RandomWeights(GgmlType::kQ8_0, 8, 256, 1));
  auto d_x = Upload(RandomActivations(512, 2));
  auto d_out = Output<float>(64);
  const WeightMatrix narrow{GgmlType::kQ8_0, d_w.get(), 8, 256}, wide{GgmlType::kQ8_0, d_w.get(), 4, 512};
  float* const two_outs[] = {d_out.get(), d_out.get() + 32};
  const WeightMatrix mixed[] = {narrow, wide};
  EXPECT_EQ(cuda::MatMulGroup(mixed, d_x.get(), two_outs, 1, Exec(1 << 16)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::MatMulGroup(mixed, d_x.get(), std::span<float* const>(two_outs, 1), 1, Exec(1 << 16)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MatMulCudaTest, ExpertChoicesGetWhatMatMulGivesEachAlone) {
  const int n_experts = 5, rows = 24, n_tokens = 4, k = 2;
  const std::vector<int32_t> ids = {4, 1, 0, 4, 2, 2, 3, 0};
  // 512 columns: a warp per row; 4096 (Q4_K, Q6_K): rows of two and of
  // four warps, which sync per choice.
  struct Case {
    GgmlType type;
    int64_t cols;
  };
  for (const auto& [type, cols] : {Case{GgmlType::kQ4_K, 512}, Case{GgmlType::kQ5_0, 512}, Case{GgmlType::kBF16, 512},
                                   Case{GgmlType::kIQ2_XS, 512}, Case{GgmlType::kTQ2_0, 512},
                                   Case{GgmlType::kMXFP4, 512}, Case{GgmlType::kQ4_K, 4096},
                                   Case{GgmlType::kQ6_K, 4096}}) {
    const std::vector<uint8_t> packed = RandomWeights(type, n_experts * rows, cols, 9);
    const int64_t packed_bytes = static_cast<int64_t>(RowBytes(type, cols)) * rows;
    // Packed, and each expert in its own 4 KiB-aligned block as a format-2
    // layer file lays them out (the padding is garbage the kernel must skip).
    for (const int64_t stride : {int64_t{0}, (packed_bytes + 4095) / 4096 * 4096 + 4096})
    for (bool per_choice : {false, true}) {
      const int64_t expert_bytes = stride != 0 ? stride : packed_bytes;
      std::vector<uint8_t> bytes(static_cast<size_t>(expert_bytes) * n_experts, 0xA5);
      for (int e = 0; e < n_experts; ++e) {
        std::memcpy(&bytes[e * expert_bytes], &packed[e * packed_bytes], packed_bytes);
      }
      auto d_w = Upload(bytes);
      auto d_ids = Upload(ids);
      const std::vector<float> x = RandomActivations((per_choice ? n_tokens * k : n_tokens) * cols, 10);
      auto d_x = Upload(x);
      auto d_out = Output<float>(static_cast<size_t>(n_tokens * k * rows));
      const WeightMatrix w{type, d_w.get(), n_experts * rows, cols, stride};
      const MatMulExpertsParams p{n_experts, k, n_tokens, per_choice};
      ASSERT_TRUE(cuda::MatMulExperts(w, d_ids.get(), d_x.get(), d_out.get(), p,
                                      Exec(cuda::MatMulExpertsScratchBytes(w, p)))
                      .ok());
      const std::vector<float> got = d_out.Download(stream());
      for (int i = 0; i < n_tokens * k; ++i) {
        const WeightMatrix expert{type, d_w.get() + ids[i] * expert_bytes, rows, cols};
        auto alone = Output<float>(rows);
        const float* x_row = d_x.get() + (per_choice ? i : i / k) * cols;
        ASSERT_TRUE(cuda::MatMul(expert, x_row, alone.get(), 1, Exec(cuda::MatMulScratchBytes(expert, 1))).ok());
        EXPECT_EQ(0, std::memcmp(alone.Download(stream()).data(), &got[i * rows], rows * sizeof(float)))
            << GgmlTypeInfoOf(type).name << " choice " << i << " per_choice " << per_choice << " stride " << stride;
      }
    }
  }
}

TEST_F(MatMulCudaTest, AnExpertIdOutOfRangeGivesNanRows) {
  const std::vector<uint8_t> bytes = RandomWeights(GgmlType::kQ8_0, 2 * 8, 64, 3);
  auto d_w = Upload(bytes);
  auto d_ids = Upload(std::vector<int32_t>{1, 7});
  auto d_x = Upload(RandomActivations(2 * 64, 4));
  auto d_out = Output<float>(2 * 8);
  const WeightMatrix w{GgmlType::kQ8_0, d_w.get(), 16, 64};
  const MatMulExpertsParams p{2, 1, 2, false};
  ASSERT_TRUE(
      cuda::MatMulExperts(w, d_ids.get(), d_x.get(), d_out.get(), p, Exec(cuda::MatMulExpertsScratchBytes(w, p))).ok());
  const std::vector<float> out = d_out.Download(stream());
  for (int r = 0; r < 8; ++r) {
    EXPECT_FALSE(std::isnan(out[r])) << r;
    EXPECT_TRUE(std::isnan(out[8 + r])) << r;
  }
}

TEST_F(MatMulCudaTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<uint8_t> bytes = RandomWeights(GgmlType::kQ4_K, 4, 256, 1);
  auto d_w = Upload(bytes);
  constexpr int kPrefill = kMaxDecodePathTokens + 1;  // takes the cuBLAS path
  auto d_x = Upload(std::vector<float>(kPrefill * 256, 1.0f));
  auto d_out = Output<float>(kPrefill * 4);
  const WeightMatrix w{GgmlType::kQ4_K, d_w.get(), 4, 256};
  const cuda::Exec exec = Exec(1 << 20);
  cuda::Exec no_blas = exec;
  no_blas.blas = nullptr;
  cuda::Exec small = exec;
  small.scratch_bytes = 100;
  struct Case {
    WeightMatrix w;
    const float* x;
    float* out;
    int n_tokens;
    cuda::Exec exec;
    std::string needle;
  };
  for (const Case& c : {
           Case{{GgmlType::kQ4_K, nullptr, 4, 256}, d_x.get(), d_out.get(), 1, exec, "w.data is null"},
           Case{w, nullptr, d_out.get(), 1, exec, "x is null"},
           Case{w, d_x.get(), nullptr, 1, exec, "out is null"},
           Case{{static_cast<GgmlType>(4), d_w.get(), 4, 256}, d_x.get(), d_out.get(), 1, exec, "not a weight type"},
           Case{{GgmlType::kQ4_K, d_w.get(), 4, 128}, d_x.get(), d_out.get(), 1, exec, "multiple of Q4_K's block size 256"},
           Case{{GgmlType::kQ4_K, d_w.get(), 0, 256}, d_x.get(), d_out.get(), 1, exec, "w.rows (0)"},
           Case{w, d_x.get(), d_out.get(), 0, exec, "n_tokens (0)"},
           Case{w, d_x.get(), d_out.get(), 2, small, "exec.scratch holds 100 bytes"},
           Case{w, d_x.get(), d_out.get(), kPrefill, no_blas, "exec.blas is null"},
           Case{w, d_x.get(), reinterpret_cast<float*>(d_x.get()) + 8, 2, exec, "out overlaps x"},
           // Q4_K blocks are read 16 bytes at a time.
           Case{{GgmlType::kQ4_K, d_w.get() + 2, 3, 256}, d_x.get(), d_out.get(), 1, exec, "16-byte aligned"},
       }) {
    testing::ExpectInvalidArgument(cuda::MatMul(c.w, c.x, c.out, c.n_tokens, c.exec), "MatMul", c.needle);
  }
  for (float f : d_out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
