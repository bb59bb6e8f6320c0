// kernels/cuda/fused.h's MatMulGlu: gate, up and the SiLU product in one
// decode launch give MatMulGroup's and SiluMul's bits -- the product, and
// its 8-bit activations for the down projection when it rounds them (one
// launch fewer again). Blocks holding fewer rows than a rounding chunk (the
// chunk rounded by the block that completes it, the counters left zeroed)
// and more (a partial last block too), both rules, a staged type (Q6_K),
// a token and a few, with x rounded by the launch or given.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;
using cuda::ActQ8Rule;

struct Shape {
  GgmlType type;
  int64_t rows, cols;
};

class FusedGluCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> product;
    std::vector<uint8_t> act;  // the product's 8-bit activations, for `down_rule`
    std::vector<uint32_t> arrivals;
    uint64_t launches = 0;
  };

  // gate and up of `shape` over x (n_tokens rows), their SiLU product
  // rounded by `down_rule` for a down projection: fused (MatMulGlu, x
  // rounded by it or, with x_given, beforehand as a producer would) or
  // apart (MatMulGroup, then SiluMul rounding). `runs` fused launches in a
  // row on one arrivals buffer.
  Result Run(const Shape& shape, ActQ8Rule down_rule, int n_tokens, bool fused, bool x_given, int runs = 1) {
    auto d_gate = Upload(RandomWeights(shape.type, shape.rows, shape.cols, 51));
    auto d_up = Upload(RandomWeights(shape.type, shape.rows, shape.cols, 52));
    auto d_x = Upload(RandomActivations(n_tokens * shape.cols, 53));
    auto d_product = Output<float>(n_tokens * shape.rows), d_up_out = Output<float>(n_tokens * shape.rows);
    auto d_arrivals = Upload(std::vector<uint32_t>(shape.rows / cuda::kQ8Chunk, 0));
    const WeightMatrix gate{shape.type, d_gate.get(), shape.rows, shape.cols};
    const WeightMatrix up{shape.type, d_up.get(), shape.rows, shape.cols};
    // The product's activations at the scratch's front, x's after them.
    const size_t front = cuda::ActQ8Bytes(n_tokens, shape.rows);
    const cuda::Exec exec = Exec(front + cuda::MatMulScratchBytes(gate, n_tokens));
    cuda::Exec x_exec = exec;
    x_exec.scratch = static_cast<uint8_t*>(exec.scratch) + front;
    x_exec.scratch_bytes -= front;
    cuda::ActQ8Out product_q8 = cuda::ActQ8At(exec.scratch, down_rule, n_tokens, shape.rows);
    product_q8.arrivals = d_arrivals.get();
    const cuda::ActQ8Out x_q8 = cuda::ActQ8At(x_exec.scratch, cuda::ActQ8RuleFor(shape.type), n_tokens, shape.cols);
    if (fused && x_given) {
      // x's activations as a producer (here: the quantize launch) leaves them.
      cuda::matmul::ActQ8View view;
      EXPECT_TRUE(cuda::matmul::QuantizeActivations(shape.type, d_x.get(), n_tokens, shape.cols, x_exec, &view).ok());
    }
    Sync();
    Result r;
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    for (int i = 0; i < runs; ++i) {
      if (fused) {
        const absl::Status s = cuda::MatMulGlu(gate, up, d_x.get(), d_product.get(), n_tokens, x_exec,
                                               x_given ? &x_q8 : nullptr, &product_q8);
        EXPECT_TRUE(s.ok()) << s;
      } else {
        const WeightMatrix ws[] = {gate, up};
        float* const outs[] = {d_product.get(), d_up_out.get()};
        EXPECT_TRUE(cuda::MatMulGroup(ws, d_x.get(), outs, n_tokens, x_exec).ok());
        EXPECT_TRUE(cuda::SiluMul(d_product.get(), d_up_out.get(), d_product.get(), n_tokens * shape.rows, stream(),
                                  product_q8)
                        .ok());
      }
    }
    r.launches = (cuda::CurrentApiCounts() - before).launches / runs;
    r.product = d_product.Download(stream());
    r.arrivals = d_arrivals.Download(stream());
    r.act.resize(front);
    EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, front, cudaMemcpyDeviceToHost), cudaSuccess);
    return r;
  }
};

TEST_F(FusedGluCudaTest, GateUpAndTheSiluProductInOneLaunchGiveTheThreeLaunchesBits) {
  const Shape shapes[] = {
      {GgmlType::kQ8_0, 96, 512},   // 8 rows a block: a 32-element chunk spans 4 blocks
      {GgmlType::kQ8_0, 96, 64},    // 64 rows a block: whole chunks, the last block 32 rows
      {GgmlType::kQ4_K, 512, 512},  // 16 rows a block, 256-element chunks
      {GgmlType::kQ4_K, 256, 4096}, // 2 rows a block (a row two warps)
      {GgmlType::kQ6_K, 256, 256},  // staged through shared memory
  };
  for (const Shape& shape : shapes) {
    for (const ActQ8Rule down_rule : {ActQ8Rule::kPer32, ActQ8Rule::kPer256}) {
      if (shape.rows % cuda::ActQ8ChunkOf(down_rule) != 0) continue;
      for (int n_tokens : {1, 3}) {
        SCOPED_TRACE(absl::StrFormat("%s %d x %d, down per %d, tokens %d", GgmlTypeName(shape.type), shape.rows,
                                     shape.cols, cuda::ActQ8ChunkOf(down_rule), n_tokens));
        const Result apart = Run(shape, down_rule, n_tokens, false, false);
        for (const bool x_given : {false, true}) {
          const Result fused = Run(shape, down_rule, n_tokens, true, x_given);
          EXPECT_EQ(fused.launches + 1, apart.launches - (x_given ? 1 : 0)) << "x given: " << x_given;
          EXPECT_EQ(0, std::memcmp(fused.product.data(), apart.product.data(), fused.product.size() * 4));
          EXPECT_EQ(fused.act, apart.act) << "the launch's rounding is SiluMul's";
          EXPECT_EQ(fused.arrivals, std::vector<uint32_t>(fused.arrivals.size(), 0u)) << "left zeroed";
        }
      }
    }
  }
}

TEST_F(FusedGluCudaTest, TheCountersServeLaunchAfterLaunch) {
  const Shape shape{GgmlType::kQ4_K, 512, 512};
  const Result once = Run(shape, ActQ8Rule::kPer256, 2, true, false);
  const Result thrice = Run(shape, ActQ8Rule::kPer256, 2, true, false, 3);
  EXPECT_EQ(thrice.act, once.act);
  EXPECT_EQ(thrice.arrivals, std::vector<uint32_t>(thrice.arrivals.size(), 0u));
}

TEST_F(FusedGluCudaTest, RefusesWhatOneLaunchCannotDo) {
  auto d_w = Upload(RandomWeights(GgmlType::kQ4_K, 512, 512, 1));
  auto d_x = Upload(RandomActivations(512 * (kMaxDecodeTokens + 1), 2));
  auto d_out = Output<float>(512 * (kMaxDecodeTokens + 1));
  const cuda::Exec exec = Exec(cuda::ActQ8Bytes(kMaxDecodeTokens + 1, 512) * 2);
  const WeightMatrix q4k{GgmlType::kQ4_K, d_w.get(), 512, 512};
  const WeightMatrix q8{GgmlType::kQ8_0, d_w.get(), 512, 512};
  const WeightMatrix f32{GgmlType::kF32, d_w.get(), 64, 512};
  testing::ExpectInvalidArgument(cuda::MatMulGlu(q4k, q8, d_x.get(), d_out.get(), 1, exec), "MatMulGlu",
                                 "one quantized type and shape");
  testing::ExpectInvalidArgument(cuda::MatMulGlu(f32, f32, d_x.get(), d_out.get(), 1, exec), "MatMulGlu",
                                 "one quantized type and shape");
  testing::ExpectInvalidArgument(cuda::MatMulGlu(q4k, q4k, d_x.get(), d_out.get(), kMaxDecodeTokens + 1, exec),
                                 "MatMulGlu", "one decode launch");
  const cuda::ActQ8Out per32 = cuda::ActQ8At(exec.scratch, ActQ8Rule::kPer32, 1, 512);
  testing::ExpectInvalidArgument(cuda::MatMulGlu(q4k, q4k, d_x.get(), d_out.get(), 1, exec, &per32), "MatMulGlu",
                                 "not by the rule");
  // 16 rows a block share a 256-element chunk: the counters are needed.
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, ActQ8Rule::kPer256, 1, 512);
  testing::ExpectInvalidArgument(cuda::MatMulGlu(q4k, q4k, d_x.get(), d_out.get(), 1, exec, nullptr, &per256),
                                 "MatMulGlu", "arrivals is null");
}

}  // namespace
}  // namespace octo
