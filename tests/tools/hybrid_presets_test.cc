// The hybrid presets (qwen3next, qwen35, qwen35moe): the tensors and keys
// llama.cpp's loaders for these architectures ask for, layer by layer, read
// back from a generated file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/gguf.h"
#include "storage/xxhash64.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

uint64_t U64(const GgufFile& gguf, const std::string& key) {
  const GgufValue* v = gguf.Find(key);
  EXPECT_NE(v, nullptr) << key;
  return v == nullptr ? 0 : *v->AsUint64();
}

std::vector<uint64_t> Dims(const GgufFile& gguf, const std::string& name) {
  const GgufTensorInfo* t = gguf.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t == nullptr ? std::vector<uint64_t>{} : t->dims;
}

// A written tiny preset, parsed back.
GgufFile Generate(const TempDir& tmp, const std::string& preset) {
  absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset(preset), *ParseTypeRecipe("Q4_K_M"));
  EXPECT_TRUE(plan.ok()) << plan.status();
  const std::string path = tmp.Path(preset + ".gguf");
  EXPECT_TRUE(WriteModel(*plan, path, /*seed=*/7).ok());
  absl::StatusOr<GgufFile> gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return std::move(*gguf);
}

TEST(HybridPresetsTest, LayersAlternateAsTheIntervalSays) {
  const ModelShape s = *FindPreset("qwen3-next-80b-a3b");
  int attention = 0;
  for (uint32_t l = 0; l < s.n_layers; ++l) attention += IsAttentionLayer(s, l);
  EXPECT_EQ(attention, 12);  // 48 layers, every 4th: 3, 7, ..., 47
  EXPECT_FALSE(IsAttentionLayer(s, 0));
  EXPECT_TRUE(IsAttentionLayer(s, 3));
  EXPECT_TRUE(IsAttentionLayer(*FindPreset("qwen3-8b"), 0)) << "a plain transformer is all attention";
  EXPECT_EQ(RopeSections(*FindPreset("qwen3.5-27b")), (std::vector<int32_t>{11, 11, 10, 0}));
  EXPECT_EQ(RopeSections(*FindPreset("tiny-qwen35")), (std::vector<int32_t>{3, 3, 2, 0}));
}

TEST(HybridPresetsTest, TinyQwen35HasEveryTensorAndKeyLlamaCppLoads) {
  TempDir tmp;
  const GgufFile g = Generate(tmp, "tiny-qwen35");
  const std::string a = "qwen35.";
  EXPECT_EQ(U64(g, a + "full_attention_interval"), 2u);
  EXPECT_EQ(U64(g, a + "ssm.conv_kernel"), 4u);
  EXPECT_EQ(U64(g, a + "ssm.state_size"), 64u);
  EXPECT_EQ(U64(g, a + "ssm.group_count"), 2u);
  EXPECT_EQ(U64(g, a + "ssm.time_step_rank"), 4u);
  EXPECT_EQ(U64(g, a + "ssm.inner_size"), 256u);
  EXPECT_EQ(U64(g, a + "rope.dimension_count"), 16u);
  const GgufValue* sections = g.Find(a + "rope.dimension_sections");
  ASSERT_NE(sections, nullptr);
  ASSERT_EQ(sections->count, 4u);
  EXPECT_EQ(sections->IntElement(0) + sections->IntElement(1) + sections->IntElement(2), 8);

  // DeltaNet layers 0 and 2: q, k (2 heads of 64) and v (4 heads of 64) in one projection.
  for (int l : {0, 2}) {
    const std::string b = absl::StrCat("blk.", l, ".");
    EXPECT_EQ(Dims(g, b + "attn_qkv.weight"), (std::vector<uint64_t>{256, 512}));
    EXPECT_EQ(Dims(g, b + "attn_gate.weight"), (std::vector<uint64_t>{256, 256}));
    EXPECT_EQ(Dims(g, b + "ssm_conv1d.weight"), (std::vector<uint64_t>{4, 512}));
    EXPECT_EQ(Dims(g, b + "ssm_dt.bias"), (std::vector<uint64_t>{4}));
    EXPECT_EQ(Dims(g, b + "ssm_a"), (std::vector<uint64_t>{4}));
    EXPECT_EQ(Dims(g, b + "ssm_beta.weight"), (std::vector<uint64_t>{256, 4}));
    EXPECT_EQ(Dims(g, b + "ssm_alpha.weight"), (std::vector<uint64_t>{256, 4}));
    EXPECT_EQ(Dims(g, b + "ssm_norm.weight"), (std::vector<uint64_t>{64}));
    EXPECT_EQ(Dims(g, b + "ssm_out.weight"), (std::vector<uint64_t>{256, 256}));
    EXPECT_EQ(g.FindTensor(b + "attn_q.weight"), nullptr);
    EXPECT_EQ(g.FindTensor(b + "ffn_norm.weight"), nullptr);
    EXPECT_EQ(Dims(g, b + "post_attention_norm.weight"), (std::vector<uint64_t>{256}));
    EXPECT_EQ(Dims(g, b + "ffn_down.weight"), (std::vector<uint64_t>{768, 256}));
  }
  // Attention layers 1 and 3: queries and their gates (4 heads of 64), 2 kv heads.
  for (int l : {1, 3}) {
    const std::string b = absl::StrCat("blk.", l, ".");
    EXPECT_EQ(Dims(g, b + "attn_q.weight"), (std::vector<uint64_t>{256, 512}));
    EXPECT_EQ(Dims(g, b + "attn_k.weight"), (std::vector<uint64_t>{256, 128}));
    EXPECT_EQ(Dims(g, b + "attn_q_norm.weight"), (std::vector<uint64_t>{64}));
    EXPECT_EQ(Dims(g, b + "attn_output.weight"), (std::vector<uint64_t>{256, 256}));
    EXPECT_EQ(g.FindTensor(b + "attn_qkv.weight"), nullptr);
  }
}

TEST(HybridPresetsTest, Qwen3NextFusesBetaAlphaAndBothMoeFormsHaveASharedExpert) {
  TempDir tmp;
  const GgufFile next = Generate(tmp, "tiny-qwen3next");
  EXPECT_EQ(Dims(next, "blk.0.ssm_ba.weight"), (std::vector<uint64_t>{256, 8}));
  EXPECT_EQ(next.FindTensor("blk.0.ssm_beta.weight"), nullptr);
  EXPECT_EQ(next.Find("qwen3next.rope.dimension_sections"), nullptr) << "qwen3next's rope is not sectioned";
  const GgufFile moe = Generate(tmp, "tiny-qwen35moe");
  for (const GgufFile* g : {&next, &moe}) {
    const std::string a = std::string(*g->Find("general.architecture")->AsString()) + ".";
    EXPECT_EQ(U64(*g, a + "expert_count"), 8u);
    EXPECT_EQ(U64(*g, a + "expert_feed_forward_length"), 256u);
    EXPECT_EQ(U64(*g, a + "expert_shared_feed_forward_length"), 256u);
    EXPECT_EQ(Dims(*g, "blk.2.ffn_gate_exps.weight"), (std::vector<uint64_t>{256, 256, 8}));
    EXPECT_EQ(Dims(*g, "blk.2.ffn_gate_inp_shexp.weight"), (std::vector<uint64_t>{256}));
    EXPECT_EQ(Dims(*g, "blk.3.ffn_down_shexp.weight"), (std::vector<uint64_t>{256, 256}));
  }
}

TEST(HybridPresetsTest, DecayIsNegativeSoTheStateShrinks) {
  TempDir tmp;
  absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset("tiny-qwen35"), *ParseTypeRecipe("F32"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string path = tmp.Path("f32.gguf");
  ASSERT_TRUE(WriteModel(*plan, path, /*seed=*/3).ok());
  absl::StatusOr<GgufFile> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  for (const char* name : {"blk.0.ssm_a", "blk.2.ssm_a"}) {
    const GgufTensorInfo* t = gguf->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->n_elements, 4u);
    std::vector<uint8_t> bytes(4 * sizeof(float));
    ASSERT_TRUE(gguf->ReadTensorData(*t, 0, bytes).ok());
    for (int i = 0; i < 4; ++i) {
      float v = 0;
      std::memcpy(&v, bytes.data() + i * sizeof(float), sizeof v);
      EXPECT_LE(v, -1.0f) << name;
      EXPECT_GT(v, -16.0f) << name;
    }
  }
}

TEST(HybridPresetsTest, BadHybridShapesAreNamed) {
  ModelShape s = *FindPreset("tiny-qwen35");
  s.ssm_v_heads = 3;
  EXPECT_NE(ValidateShape(s).message().find("ssm_v_heads"), std::string::npos);
  s = *FindPreset("tiny-qwen35");
  s.full_attention_interval = 0;
  EXPECT_NE(ValidateShape(s).message().find("full_attention_interval"), std::string::npos);
  s = *FindPreset("tiny-qwen35");
  s.n_experts = 8;
  s.n_experts_used = 2;
  EXPECT_NE(ValidateShape(s).message().find("dense"), std::string::npos);
  s = *FindPreset("tiny-qwen3next");
  s.shared_expert_dim = 0;
  EXPECT_NE(ValidateShape(s).message().find("shared expert"), std::string::npos);
  s = *FindPreset("tiny-qwen35");
  s.rope_dim = 65;
  EXPECT_NE(ValidateShape(s).message().find("rope_dim"), std::string::npos);
}

// tests/data/llamacpp-hybrid.jsonl holds llama.cpp's outputs for models
// this generator made: regenerating each must give the very bytes they were
// computed on, or the records are stale (tests/data/README.md says how to
// redo them).
TEST(HybridPresetsTest, LlamaCppReferenceMatchesTheGeneratedBytes) {
  std::ifstream in(OCTO_HYBRID_REFERENCE);
  ASSERT_TRUE(in) << OCTO_HYBRID_REFERENCE;
  TempDir tmp;
  int records = 0;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    const std::string preset = r["preset"], type = r["type"];
    SCOPED_TRACE(preset + " " + type);
    ++records;
    const ModelShape shape = *FindPreset(preset);
    ASSERT_EQ(r["tokens"].size(), 32u);
    ASSERT_EQ(r["top5_logprobs"].size(), 32u);
    for (size_t i = 0; i < 32; ++i) {
      const nlohmann::json& top = r["top5_logprobs"][i];
      ASSERT_EQ(top.size(), 5u);
      EXPECT_EQ(top[0][0], r["tokens"][i]) << "the greedy token is the most likely";
      for (const nlohmann::json& alt : top) EXPECT_LT(alt[0].get<uint32_t>(), shape.vocab_size);
    }
    const std::string path = tmp.Path(preset + "-" + type + ".gguf");
    if (!std::filesystem::exists(path)) {
      absl::StatusOr<ModelPlan> plan = PlanModel(shape, *ParseTypeRecipe(type));
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_TRUE(WriteModel(*plan, path, r["seed"].get<uint64_t>()).ok());
    }
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
    Xxh64 hash;
    hash.Update(bytes);
    EXPECT_EQ(absl::StrFormat("%016x", hash.Digest()), r["gguf_xxh64"].get<std::string>())
        << "the generator no longer makes the bytes llama.cpp was run on";
  }
  EXPECT_EQ(records, 18);  // 3 presets x 3 types x 2 prompt modes
}

}  // namespace
}  // namespace octo::testing
