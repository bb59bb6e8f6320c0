// MXFP4 through the whole engine. Our llama.cpp snapshot predates the type,
// so there is no reference output: a generated MXFP4 model is held to its
// F32 twin instead, a GGUF with the same metadata whose every MXFP4 tensor
// is written out as the F32 values it stands for. The twin sees exact
// activations, the MXFP4 model Q8_0-rounded ones (as ggml rounds them for
// this type), so their logits may differ by that rounding only: teacher-forced
// log-probabilities within 0.05 nats, and greedy tokens equal until a
// near-tie of the twin's own.
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/model.h"
#include "kernels/ops.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

constexpr int kTokens = 32;
constexpr double kLogprobTolerance = 0.05;
constexpr double kNearTieNats = 0.05;

// Writes `shape` as MXFP4 to q_path and its F32 twin to f_path.
void WriteTwins(const ModelShape& shape, const std::string& q_path, const std::string& f_path) {
  auto plan_q = PlanModel(shape, *ParseTypeRecipe("MXFP4"));
  ASSERT_TRUE(plan_q.ok()) << plan_q.status();
  ASSERT_TRUE(WriteModel(*plan_q, q_path, /*seed=*/11).ok());
  auto gguf = GgufFile::Open(q_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  std::ifstream in(q_path, std::ios::binary);
  // Each tensor's values, in the twin's F32.
  std::vector<std::vector<float>> values;
  for (const GgufTensorInfo& t : gguf->tensors()) {
    std::vector<uint8_t> raw(t.n_bytes);
    in.seekg(static_cast<std::streamoff>(t.offset));
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    ASSERT_TRUE(in) << t.name;
    const int64_t cols = static_cast<int64_t>(t.dims[0]);
    const int64_t rows = static_cast<int64_t>(t.n_elements) / cols;
    std::vector<float> out(t.n_elements);
    const WeightMatrix w{.type = t.type.type, .data = raw.data(), .rows = rows, .cols = cols};
    ASSERT_TRUE(cpu::DequantizeRows(w, 0, rows, out.data()).ok()) << t.name;
    values.push_back(std::move(out));
  }
  auto plan_f = PlanModel(shape, *ParseTypeRecipe("F32"));
  ASSERT_TRUE(plan_f.ok()) << plan_f.status();
  ASSERT_EQ(plan_f->tensors.size(), values.size());
  const auto fill = [&](size_t index, uint64_t offset, std::span<uint8_t> out) -> absl::Status {
    std::memcpy(out.data(), reinterpret_cast<const uint8_t*>(values[index].data()) + offset, out.size());
    return absl::OkStatus();
  };
  ASSERT_TRUE(plan_f->writer.WriteFile(f_path, fill).ok());
}

TEST(Mxfp4TwinTest, TheMxfp4ModelFollowsItsF32Twin) {
  TempDir tmp;
  auto shape = FindPreset("tiny");
  ASSERT_TRUE(shape.ok());
  shape->n_layers = 4;
  WriteTwins(*shape, tmp.Path("q.gguf"), tmp.Path("f.gguf"));
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(Decompose(tmp.Path("q.gguf"), tmp.Path("q"), DecomposeOptions{}).ok());
  ASSERT_TRUE(Decompose(tmp.Path("f.gguf"), tmp.Path("f"), DecomposeOptions{}).ok());
  auto q = Model::Open(tmp.Path("q"), ModelOptions{});
  auto f = Model::Open(tmp.Path("f"), ModelOptions{});
  ASSERT_TRUE(q.ok() && f.ok());
  const std::vector<int32_t> prompt = {1, 50, 120, 7, 300, 42};
  auto twin = Greedy(**f, prompt, kTokens);
  auto ours = Greedy(**q, prompt, kTokens);
  ASSERT_TRUE(twin.ok() && ours.ok());
  // Teacher-forced over the twin's tokens.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), twin->tokens.begin(), twin->tokens.end() - 1);
  auto q_rows = TeacherForced(**q, all);
  auto f_rows = TeacherForced(**f, all);
  ASSERT_TRUE(q_rows.ok() && f_rows.ok());
  double worst = 0;
  for (size_t row = prompt.size() - 1; row < all.size(); ++row) {
    const std::vector<double> a = LogSoftmax((*q_rows)[row]), b = LogSoftmax((*f_rows)[row]);
    for (size_t i = 0; i < a.size(); ++i) {
      if (b[i] > -10) worst = std::max(worst, std::abs(a[i] - b[i]));
    }
  }
  int same = 0;
  while (same < kTokens && ours->tokens[same] == twin->tokens[same]) ++same;
  std::printf("MXFP4 vs its F32 twin: %d/%d greedy tokens equal, max |dlogprob| %.4f (limit %.2f)\n", same, kTokens,
              worst, kLogprobTolerance);
  EXPECT_LE(worst, kLogprobTolerance);
  if (same < kTokens) {
    const std::vector<double> lp = LogSoftmax(twin->logits[same]);
    EXPECT_LE(lp[twin->tokens[same]] - lp[ours->tokens[same]], kNearTieNats) << "diverges at " << same;
  }
}

}  // namespace
}  // namespace octo::testing
