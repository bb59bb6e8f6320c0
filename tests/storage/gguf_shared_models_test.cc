// The GGUF reader on the real models in ../shared (skipped without it).
#include <string>

#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "storage/model_config.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

using ::octo::testing::SharedPath;

uint64_t UintKey(const GgufFile& f, const char* key) {
  const GgufValue* v = f.Find(key);
  EXPECT_NE(v, nullptr) << key;
  return v ? *v->AsUint64() : 0;
}

TEST(GgufSharedModelsTest, Stories260K) {
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  auto f = GgufFile::Open(SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(UintKey(*f, "llama.block_count"), 5u);
  // u32 -1 ids are kept as they are, not misread as negative.
  EXPECT_EQ(UintKey(*f, "tokenizer.ggml.seperator_token_id"), 4294967295u);
  const GgufValue* tokens = f->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->count, 512u);
  EXPECT_EQ(tokens->strings[1], "<s>");
  const GgufTensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dims, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(q->type.type, GgmlType::kF32);
  EXPECT_EQ(q->n_bytes, 64u * 64 * 4);
  EXPECT_EQ(q->offset % 32, 0u);

  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dim, 64u);
  EXPECT_EQ(c->hidden_dim, 172u);
  EXPECT_EQ(c->n_layers, 5u);
  EXPECT_EQ(c->n_heads, 8u);
  EXPECT_EQ(c->n_kv_heads, 4u);
  EXPECT_EQ(c->head_dim, 8u);
  EXPECT_EQ(c->vocab_size, 512u);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->rope_style, RopeStyle::kNormal);
}

TEST(GgufSharedModelsTest, TinyStoriesIsQ8WithTiedEmbeddings) {
  OCTO_REQUIRE_SHARED("models/TinyStories-656K-Q8_0.gguf");
  auto f = GgufFile::Open(SharedPath("models/TinyStories-656K-Q8_0.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata().size(), 34u);
  EXPECT_EQ(f->tensors().size(), 20u);
  int q8 = 0, f32 = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    q8 += t.type.type == GgmlType::kQ8_0;
    f32 += t.type.type == GgmlType::kF32;
  }
  EXPECT_EQ(q8, 15);
  EXPECT_EQ(f32, 5);
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->vocab_size, 2048u);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-6f);
}

TEST(GgufSharedModelsTest, VersionOneIsRefusedWithAClearError) {
  OCTO_REQUIRE_SHARED("models/legacy/tinyllamas-stories-260k-f32.gguf");
  auto f = GgufFile::Open(SharedPath("models/legacy/tinyllamas-stories-260k-f32.gguf"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("GGUF version 1 is not supported"), absl::string_view::npos) << f.status();
}

// Each widened file is quantized to one type (except the mixes): every 2-D
// weight must come back with that type and the byte count of its blocks.
TEST(GgufSharedModelsTest, EveryWidenedTypeReads) {
  for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K",
                           "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}) {
    const std::string rel = std::string("models/widened/llama-") + type + ".gguf";
    if (!::octo::testing::HaveShared(rel)) GTEST_SKIP() << "no ../shared/" << rel;
    auto f = GgufFile::Open(SharedPath(rel));
    ASSERT_TRUE(f.ok()) << f.status();
    const GgufTensorInfo* w = f->FindTensor("blk.2.ffn_down.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->type.name, type);
    EXPECT_EQ(w->dims, (std::vector<uint64_t>{768, 256}));
    EXPECT_EQ(w->n_bytes, 768u * 256 / w->type.block_size * w->type.type_size) << type;
    EXPECT_TRUE(ModelConfigFromGguf(*f).ok()) << type;
  }
}

TEST(GgufSharedModelsTest, MixtureOfExperts) {
  OCTO_REQUIRE_SHARED("models/widened/moe-Q4_K_M-mix.gguf");
  auto f = GgufFile::Open(SharedPath("models/widened/moe-Q4_K_M-mix.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_experts, 4u);
  EXPECT_EQ(c->n_experts_used, 2u);
  const GgufTensorInfo* up = f->FindTensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dims, (std::vector<uint64_t>{256, 768, 4}));
}

TEST(GgufSharedModelsTest, Qwen2HasNeoxRopeAndBiases) {
  OCTO_REQUIRE_SHARED("models/widened/qwen2-Q4_K_M-mix.gguf");
  auto f = GgufFile::Open(SharedPath("models/widened/qwen2-Q4_K_M-mix.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_NE(f->FindTensor("blk.0.attn_q.bias"), nullptr);
}

TEST(GgufSharedModelsTest, VocabOnlyFilesParseButAreNotRunnableModels) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  auto f = GgufFile::Open(SharedPath("models/vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->Find("tokenizer.ggml.tokens")->count, 50257u);
  EXPECT_EQ(f->Find("tokenizer.ggml.merges")->count, 50000u);
  auto c = ModelConfigFromGguf(*f);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("'gpt2'"), absl::string_view::npos) << c.status();
}

TEST(GgufSharedModelsTest, RandomF16ModelWithFullLlamaVocab) {
  OCTO_REQUIRE_SHARED("models/random/llama-2-tiny-random.gguf");
  auto f = GgufFile::Open(SharedPath("models/random/llama-2-tiny-random.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 32000u);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type.type, GgmlType::kF16);
}

}  // namespace
}  // namespace octo
