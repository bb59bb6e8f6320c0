// DequantizeRows and MatMul on real tensors quantized by llama.cpp's
// quantizer (../shared/models/widened: the same trained model in every type,
// see its README), against the F32 file's same tensors.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quantize_activation.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/ops.h"
#include "storage/gguf.h"
#include "tests/kernels/quant_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

struct Tensor {
  GgmlType type;
  int64_t rows;
  int64_t cols;
  std::vector<uint8_t> bytes;
  WeightMatrix w() const { return WeightMatrix{type, bytes.data(), rows, cols}; }
};

Tensor ReadTensor(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* info = file.FindTensor(name);
  EXPECT_NE(info, nullptr) << file.name() << ": " << name;
  if (info == nullptr) return {};
  Tensor t{info->type.type, static_cast<int64_t>(info->dims.size() > 1 ? info->dims[1] : 1),
           static_cast<int64_t>(info->dims[0]), std::vector<uint8_t>(info->n_bytes)};
  const absl::Status status = file.ReadTensorData(*info, 0, std::span<uint8_t>(t.bytes));
  EXPECT_TRUE(status.ok()) << status;
  return t;
}

std::vector<float> Dequantize(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  const absl::Status status = cpu::DequantizeRows(t.w(), 0, t.rows, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

double RelativeRms(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    ref += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / ref);
}

// Per type: the file, and a bound on the relative RMS error of its weights
// against F32 (the quantization noise: about halving per extra bit). The
// files are fixed, so the errors are too; the bounds sit about 1.25x above
// the worst of the three tensors, measured (token_embd / attn_q / ffn_down):
//   F16 2.0e-4 2.1e-4 2.0e-4    BF16 1.7e-3 1.8e-3 1.8e-3
//   Q8_0 5.5e-3 5.0e-3 5.4e-3   Q6_K 1.7e-2 1.6e-2 1.8e-2
//   Q5_0 .044 .040 .043  Q5_1 .039 .035 .040  Q5_K .037 .032 .036
//   Q4_0 .087 .080 .087  Q4_1 .088 .073 .083  Q4_K .078 .066 .072
//   IQ4_NL .080 .072 .077  IQ4_XS .081 .072 .077
//   Q3_K .15 .14 .15     Q2_K .34 .28 .31
// A wrong block layout would give errors near 1, not these.
struct TypeCase {
  const char* file_type;
  double max_weight_error;
};

constexpr TypeCase kCases[] = {
    {"F16", 2.5e-4},  {"BF16", 2.5e-3},  {"Q8_0", 7e-3},  {"Q6_K", 0.025}, {"Q5_0", 0.055},
    {"Q5_1", 0.055},  {"Q5_K", 0.055},   {"Q4_0", 0.11},  {"Q4_1", 0.11},  {"Q4_K", 0.11},
    {"IQ4_NL", 0.11}, {"IQ4_XS", 0.11},  {"Q3_K", 0.2},   {"Q2_K", 0.42},
};

constexpr const char* kTensors[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"};

class RealWeightsTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(RealWeightsTest, DequantizeAndMatMulTrackF32) {
  const std::string path = std::string("models/widened/llama-") + GetParam().file_type + ".gguf";
  OCTO_REQUIRE_SHARED(path);
  OCTO_REQUIRE_SHARED("models/widened/llama-F32.gguf");
  absl::StatusOr<GgufFile> quant = GgufFile::Open(testing::SharedPath(path));
  absl::StatusOr<GgufFile> f32 = GgufFile::Open(testing::SharedPath("models/widened/llama-F32.gguf"));
  ASSERT_TRUE(quant.ok()) << quant.status();
  ASSERT_TRUE(f32.ok()) << f32.status();

  for (const char* name : kTensors) {
    const Tensor q = ReadTensor(*quant, name);
    const Tensor f = ReadTensor(*f32, name);
    ASSERT_EQ(f.type, GgmlType::kF32);
    ASSERT_EQ(q.rows, f.rows);
    ASSERT_EQ(q.cols, f.cols);
    EXPECT_EQ(std::string(GgmlTypeName(q.type)), GetParam().file_type) << name;

    const std::vector<float> deq = Dequantize(q);
    const std::vector<float> ref = Dequantize(f);
    const double weight_error = RelativeRms(deq, ref);
    EXPECT_LE(weight_error, GetParam().max_weight_error) << name;

    // MatMul against the F32 weights' MatMul: the weights' noise, plus the
    // activation encoding's (up to 0.013 for Q8_0 with these outlier-heavy x).
    const int n_tokens = 3;
    const std::vector<float> x = testing::RandomActivations(n_tokens * q.cols, 5);
    std::vector<float> out_q(n_tokens * q.rows), out_f(n_tokens * q.rows);
    const cpu::Exec exec{nullptr, cpu::DetectSimd()};
    ASSERT_TRUE(cpu::MatMul(q.w(), x.data(), out_q.data(), n_tokens, exec).ok());
    ASSERT_TRUE(cpu::MatMul(f.w(), x.data(), out_f.data(), n_tokens, exec).ok());
    const double out_error = RelativeRms(out_q, out_f);
    EXPECT_LE(out_error, 1.5 * GetParam().max_weight_error + 0.01) << name;

    // And against the exact dot products of the two encodings (tolerance as
    // in matmul_test.cc: 16 float roundings of sum |w x|).
    const cpu::TypeKernels* kernels = cpu::FindTypeKernels(q.type);
    std::vector<uint8_t> enc(cpu::ActRowBytes(kernels->act, q.cols));
    std::vector<float> x_hat(q.cols);
    for (int t = 0; t < n_tokens; ++t) {
      cpu::QuantizeActivationRow(kernels->act, &x[t * q.cols], q.cols, enc.data(), cpu::Simd::kPortable);
      cpu::DequantizeActivationRow(kernels->act, enc.data(), q.cols, x_hat.data());
      const int64_t row_bytes = static_cast<int64_t>(RowBytes(q.type, q.cols));
      for (int64_t r = 0; r < q.rows; ++r) {
        const testing::ExactDot dot = testing::ReferenceDot(q.type, &deq[r * q.cols], &q.bytes[r * row_bytes],
                                                            kernels->act, enc.data(), x_hat.data(), q.cols);
        ASSERT_LE(std::fabs(out_q[t * q.rows + r] - dot.value), 16 * std::ldexp(dot.abs_sum, -24))
            << name << " token " << t << " row " << r;
      }
    }
    std::printf("%-7s %-22s weights rel. RMS %.2e, MatMul vs F32 %.2e\n", GetParam().file_type, name,
                weight_error, out_error);
  }
}

INSTANTIATE_TEST_SUITE_P(Widened, RealWeightsTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(info.param.file_type);
                         });

}  // namespace
}  // namespace octo
