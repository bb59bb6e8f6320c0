// The KV cache's types through the runtime (--cache-type-k, --cache-type-v,
// and per model at load): the budget counts the bytes a position really
// takes, so Q8_0 serves about twice the context of F16 and Q4_0 about 3.6
// times, and the report says so; a session keeps its model's types; a
// model whose rows cannot take a type is refused naming the flag, and the
// daemon serves on; greedy tokens at Q8_0 leave F16's only where F16's own
// top two were close.
#include <cmath>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "daemon/core/runtime_impl.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 2;
// tiny: 4 kv heads of 32 values, so a position of one layer is 2 rows of
// 128 values: 512 bytes at F16, 272 at Q8_0 (4 blocks of 34), 144 at Q4_0.
// Two layers.
constexpr uint64_t kF16PositionBytes = kLayers * 2 * 128 * 2;

class RuntimeKvTypesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    MakeModelDir(root_->path().string(), "m", "tiny", "Q4_K_M", kLayers);
    // 2 kv heads of 8 values: rows of 16, which no 32-value block fits.
    const std::string gguf = root_->Path("narrow.gguf");
    GenerateModel(gguf, "tiny", "Q8_0", [](ModelShape& s) {
      s.n_layers = 1;
      s.n_heads = 4;
      s.n_kv_heads = 2;
      s.head_dim = 8;
      s.dim = 32;
    });
  }
  static void TearDownTestSuite() { delete root_; }

  static RuntimeOptions Options(KvCacheTypes types) {
    RuntimeOptions o = TestRuntimeOptions(root_->path().string());
    o.model = "m";
    o.kv_budget_bytes = 256 << 10;  // 256 KiB: 256 positions at F16, under the trained 2048
    o.kv_types = types;
    return o;
  }
  static std::unique_ptr<RuntimeImpl> Start(const RuntimeOptions& options) {
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }
  static const LoadedModelReport* ModelReport(const RuntimeReport& r, const std::string& name) {
    for (const LoadedModelReport& m : r.models) {
      if (m.summary.path == name) return &m;
    }
    return nullptr;
  }

  static inline TempDir* root_ = nullptr;
};

TEST_F(RuntimeKvTypesTest, TheBudgetHoldsMorePositionsAtFewerBytesEach) {
  struct Case {
    KvCacheTypes types;
    uint64_t position_bytes;
  };
  uint32_t f16_positions = 0;
  for (const Case& c : {Case{{GgmlType::kF16, GgmlType::kF16}, kF16PositionBytes},
                        Case{{GgmlType::kQ8_0, GgmlType::kQ8_0}, kLayers * 2 * 4 * 34},
                        Case{{GgmlType::kQ4_0, GgmlType::kQ4_0}, kLayers * 2 * 4 * 18},
                        Case{{GgmlType::kQ8_0, GgmlType::kQ4_1}, kLayers * 4 * (34 + 20)}}) {
    auto runtime = Start(Options(c.types));
    ASSERT_NE(runtime, nullptr);
    const RuntimeReport report = runtime->Report();
    const LoadedModelReport* m = ModelReport(report, "m");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->kv_types, c.types);
    EXPECT_EQ(m->kv_bytes_per_position, c.position_bytes) << KvCacheTypeName(c.types.k);
    EXPECT_EQ(m->kv_budget_positions, (256u << 10) / c.position_bytes) << KvCacheTypeName(c.types.k);
    if (c.types.k == GgmlType::kF16) f16_positions = m->kv_budget_positions;
    const double gain = static_cast<double>(m->kv_budget_positions) / f16_positions;
    std::printf("k %s v %s: %llu bytes per position, the budget holds %u positions (%.2f x f16)\n",
                std::string(KvCacheTypeName(c.types.k)).c_str(), std::string(KvCacheTypeName(c.types.v)).c_str(),
                static_cast<unsigned long long>(m->kv_bytes_per_position), m->kv_budget_positions, gain);
    if (c.types.k == GgmlType::kQ8_0 && c.types.v == GgmlType::kQ8_0) {
      EXPECT_NEAR(gain, 1.88, 0.02);
    }
    if (c.types.k == GgmlType::kQ4_0) {
      EXPECT_NEAR(gain, 3.56, 0.03);
    }

    // A one-shot request may use all of it: a prompt longer than F16 could
    // hold runs at Q4_0.
    GenerateJob job = GreedyJob("Once", 4);
    job.prompt_tokens.assign(static_cast<size_t>(m->kv_budget_positions) - 8, 5);
    job.prompt.clear();
    auto sink = Submit(*runtime, job);
    ASSERT_TRUE(sink->Wait());
    EXPECT_TRUE(sink->status.ok()) << sink->status;
  }
}

// A session's cache has its model's types: its bytes are whole positions
// at that rate, and a second turn reuses them (the rows written at Q8_0 are
// read back as Q8_0).
TEST_F(RuntimeKvTypesTest, ASessionKeepsItsModelsCacheType) {
  auto runtime = Start(Options({GgmlType::kQ8_0, GgmlType::kQ8_0}));
  ASSERT_NE(runtime, nullptr);
  auto session = runtime->CreateSession(300, "", "s", "");
  ASSERT_TRUE(session.ok()) << session.status();
  auto first = RunGreedy(*runtime, "Once upon a time", 8, session->id);
  ASSERT_TRUE(first->status.ok()) << first->status;
  auto second = RunGreedy(*runtime, " there was", 8, session->id);
  ASSERT_TRUE(second->status.ok()) << second->status;
  EXPECT_GT(second->stats.cached_tokens, 0) << "the second turn reuses the first's rows";
  const RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.sessions.size(), 1u);
  const uint64_t per_position = ModelReport(report, "m")->kv_bytes_per_position;
  EXPECT_EQ(per_position, kLayers * 2 * 4 * 34u);
  // Its first growth step, kKvGrowPositions positions, at Q8_0's rate.
  EXPECT_GE(kKvGrowPositions, static_cast<int>(report.sessions[0].positions));
  EXPECT_EQ(report.sessions[0].kv_bytes, kKvGrowPositions * per_position);
}

// Per model at load, over the daemon's types; a model whose rows do not
// take the type is refused naming the flag and what to use, and the model
// loaded before serves on.
TEST_F(RuntimeKvTypesTest, PerModelTypesAndARefusedLoad) {
  auto runtime = Start(Options({GgmlType::kQ8_0, GgmlType::kQ8_0}));
  ASSERT_NE(runtime, nullptr);
  auto loaded = runtime->LoadModel("m", {.cache_type_k = GgmlType::kQ4_0});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const RuntimeReport report = runtime->Report();
  const LoadedModelReport* m = ModelReport(report, "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kv_types, (KvCacheTypes{GgmlType::kQ4_0, GgmlType::kQ8_0})) << "v stays the daemon's";

  auto narrow = runtime->LoadModel("narrow.gguf", {});
  ASSERT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument) << narrow.status();
  EXPECT_NE(narrow.status().message().find("cache-type-k: a q8_0 cache needs rows of a multiple of 32 values; "
                                           "this model's are 16 (n_kv_heads * head_dim); use f16"),
            std::string::npos)
      << narrow.status();
  EXPECT_TRUE(RunGreedy(*runtime, "Once", 4)->status.ok()) << "the daemon serves on";
  auto f16 = runtime->LoadModel("narrow.gguf", {.cache_type_k = GgmlType::kF16, .cache_type_v = GgmlType::kF16});
  EXPECT_TRUE(f16.ok()) << f16.status();
}

// Greedy tokens at Q8_0 against F16 on the same model: equal, or where they
// part, F16's own top two tokens were within 0.2 nats (Q8_0's rounding of
// keys and values moves a logit by far less than that).
TEST_F(RuntimeKvTypesTest, Q8_0TokensLeaveF16sOnlyAtNearTies) {
  auto f16 = Start(Options({}));
  auto q8 = Start(Options({GgmlType::kQ8_0, GgmlType::kQ8_0}));
  ASSERT_TRUE(f16 != nullptr && q8 != nullptr);
  int equal = 0;
  const char* prompts[] = {"Once upon a time", "The little dog", "She said", "In the morning"};
  for (const char* prompt : prompts) {
    GenerateJob job = GreedyJob(prompt, 48);
    job.sampling.top_logprobs = 2;
    auto want = Submit(*f16, job);
    auto got = Submit(*q8, job);
    ASSERT_TRUE(want->Wait() && got->Wait());
    ASSERT_TRUE(want->status.ok() && got->status.ok());
    size_t i = 0;
    while (i < want->tokens.size() && i < got->tokens.size() && want->tokens[i] == got->tokens[i]) ++i;
    if (i == want->tokens.size()) {
      ++equal;
      continue;
    }
    const auto& top = want->generated[i].top;
    ASSERT_GE(top.size(), 2u);
    EXPECT_LT(top[0].logprob - top[1].logprob, 0.2) << prompt << ": parted at token " << i;
    std::printf("%s: parted at token %zu, f16's top two %.4f apart\n", prompt, i, top[0].logprob - top[1].logprob);
  }
  std::printf("%d of 4 prompts give f16's 48 tokens at q8_0\n", equal);
}

}  // namespace
}  // namespace octo::testing
