// Tests for the GGUF writer, the random block filler and the model generator.
#include "tests/tools/gguf_writer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/model_config.h"
#include "tests/tools/model_presets.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

namespace fs = std::filesystem;

// A scratch directory per test, removed afterwards.
class GgufWriterTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return tmp_.Path(name); }

  TempDir tmp_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Reads little-endian fields from a byte string, front to back.
struct Cursor {
  const std::string& bytes;
  size_t pos = 0;
  template <typename T>
  T Take() {
    T value{};
    EXPECT_LE(pos + sizeof(T), bytes.size());
    if (pos + sizeof(T) <= bytes.size()) std::memcpy(&value, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return value;
  }
  std::string TakeString() {
    const uint64_t n = Take<uint64_t>();
    std::string s = bytes.substr(pos, n);
    pos += n;
    return s;
  }
};

template <typename T>
std::string Le(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

TEST_F(GgufWriterTest, WritesHeaderKvsAndAlignedTensorData) {
  GgufWriter writer(/*alignment=*/64);
  writer.AddU8("t.u8", 7);
  writer.AddI8("t.i8", -7);
  writer.AddU16("t.u16", 700);
  writer.AddI16("t.i16", -700);
  writer.AddU32("t.u32", 70000);
  writer.AddI32("t.i32", -70000);
  writer.AddF32("t.f32", 1.5f);
  writer.AddBool("t.bool", true);
  writer.AddString("t.str", "hello");
  writer.AddU64("t.u64", 1ull << 40);
  writer.AddI64("t.i64", -(1ll << 40));
  writer.AddF64("t.f64", 2.25);
  const std::vector<std::string> strings = {"a", "bc"};
  writer.AddStringArray("t.strs", strings);
  const std::vector<int32_t> ints = {-1, 2, 3};
  writer.AddI32Array("t.i32s", ints);
  const uint64_t norm_dims[] = {5};
  const uint64_t q8_dims[] = {64, 3};
  ASSERT_TRUE(writer.AddTensor("norm", GgmlType::kF32, norm_dims).ok());
  ASSERT_TRUE(writer.AddTensor("w", GgmlType::kQ8_0, q8_dims).ok());
  EXPECT_EQ(writer.kv_count(), 15u);  // 14 added + the implicit general.alignment

  // Each tensor's bytes are its index + 1, so the test can find them.
  auto fill = [](size_t index, uint64_t, std::span<uint8_t> out) {
    std::memset(out.data(), static_cast<int>(index + 1), out.size());
    return absl::OkStatus();
  };
  const std::string path = Path("t.gguf");
  ASSERT_TRUE(writer.WriteFile(path, fill).ok());
  const std::string file = ReadAll(path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(file.size(), *writer.FileSize());

  Cursor c{file};
  EXPECT_EQ(file.substr(0, 4), "GGUF");
  c.pos = 4;
  EXPECT_EQ(c.Take<uint32_t>(), 3u);
  EXPECT_EQ(c.Take<uint64_t>(), 2u);
  EXPECT_EQ(c.Take<uint64_t>(), 15u);
  // Each KV: key, u32 type, then the value's little-endian bytes.
  const std::vector<std::tuple<std::string, uint32_t, std::string>> kvs = {
      {"t.u8", 0, Le<uint8_t>(7)},           {"t.i8", 1, Le<int8_t>(-7)},
      {"t.u16", 2, Le<uint16_t>(700)},       {"t.i16", 3, Le<int16_t>(-700)},
      {"t.u32", 4, Le<uint32_t>(70000)},     {"t.i32", 5, Le<int32_t>(-70000)},
      {"t.f32", 6, Le<float>(1.5f)},         {"t.bool", 7, Le<uint8_t>(1)},
      {"t.str", 8, Le<uint64_t>(5) + "hello"}, {"t.u64", 10, Le<uint64_t>(1ull << 40)},
      {"t.i64", 11, Le<int64_t>(-(1ll << 40))}, {"t.f64", 12, Le<double>(2.25)},
      {"t.strs", 9, Le<uint32_t>(8) + Le<uint64_t>(2) + Le<uint64_t>(1) + "a" + Le<uint64_t>(2) + "bc"},
      {"t.i32s", 9, Le<uint32_t>(5) + Le<uint64_t>(3) + Le<int32_t>(-1) + Le<int32_t>(2) + Le<int32_t>(3)},
      {"general.alignment", 4, Le<uint32_t>(64)},
  };
  for (const auto& [key, type, value] : kvs) {
    EXPECT_EQ(c.TakeString(), key);
    EXPECT_EQ(c.Take<uint32_t>(), type) << key;
    EXPECT_EQ(file.substr(c.pos, value.size()), value) << key;
    c.pos += value.size();
  }

  struct Info {
    uint64_t offset, size;
  };
  std::vector<Info> infos;
  for (const auto& [name, dims, type, size] :
       {std::tuple{"norm", std::vector<uint64_t>{5}, 0u, 20ull}, std::tuple{"w", std::vector<uint64_t>{64, 3}, 8u, 204ull}}) {
    EXPECT_EQ(c.TakeString(), name);
    EXPECT_EQ(c.Take<uint32_t>(), dims.size());
    for (uint64_t dim : dims) EXPECT_EQ(c.Take<uint64_t>(), dim);
    EXPECT_EQ(c.Take<uint32_t>(), type);
    infos.push_back({c.Take<uint64_t>(), size});
  }
  const uint64_t data_start = (c.pos + 63) / 64 * 64;
  EXPECT_EQ(data_start, writer.HeaderBytes()->size());
  for (size_t i = 0; i < infos.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(infos[i].offset % 64, 0u);
    EXPECT_EQ(file.substr(data_start + infos[i].offset, infos[i].size), std::string(infos[i].size, char(i + 1)));
  }
  EXPECT_EQ(file.size(), data_start + 64 + 256);  // 20 -> 64, 204 -> 256
}

TEST_F(GgufWriterTest, ReportsDefectsAndLeavesNoFileOnFailure) {
  GgufWriter dup;
  dup.AddU32("k", 1);
  dup.AddString("k", "again");
  EXPECT_EQ(dup.WriteFile(Path("dup.gguf"), nullptr).code(), absl::StatusCode::kInvalidArgument);

  GgufWriter writer;
  const uint64_t bad_dims[] = {100, 2};
  const absl::Status bad = writer.AddTensor("blk.0.attn_q.weight", GgmlType::kQ4_K, bad_dims);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("blk.0.attn_q.weight"), absl::string_view::npos) << bad;
  EXPECT_EQ(GgufWriter(48).HeaderBytes().status().code(), absl::StatusCode::kInvalidArgument);
  GgufWriter disagreeing(32);
  disagreeing.AddU32("general.alignment", 64);
  EXPECT_EQ(disagreeing.HeaderBytes().status().code(), absl::StatusCode::kInvalidArgument);
  GgufWriter explicit_alignment(64);
  explicit_alignment.AddU32("general.alignment", 64);
  EXPECT_EQ(explicit_alignment.kv_count(), 1u);  // no implicit second copy

  const uint64_t dims[] = {256, 64};
  ASSERT_TRUE(writer.AddTensor("w", GgmlType::kQ4_K, dims).ok());
  auto failing = [](size_t, uint64_t, std::span<uint8_t>) { return absl::DataLossError("boom"); };
  const std::string path = Path("fail.gguf");
  const absl::Status status = writer.WriteFile(path, failing);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(HalfTest, RoundTripsIncludingSubnormals) {
  for (float v : {0.0f, 1.0f, -2.5f, 1e-3f, 6.103515625e-05f, 1e-5f, -3e-6f, 65504.0f}) {
    EXPECT_NEAR(HalfToFloat(FloatToHalf(v)), v, std::abs(v) * 1e-3f + 6e-8f) << v;
  }
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0x1.0p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7c00);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
}

// fp16 scale fields per block: {offset of d, offset of the second scale or -1},
// written out independently of the filler's table, from ggml's block structs.
struct ScaleFields {
  GgmlType type;
  int d, min;
};
constexpr ScaleFields kScaleFields[] = {
    {GgmlType::kQ4_0, 0, -1}, {GgmlType::kQ4_1, 0, 2},  {GgmlType::kQ5_0, 0, -1},  {GgmlType::kQ5_1, 0, 2},
    {GgmlType::kQ8_0, 0, -1}, {GgmlType::kQ2_K, 80, 82}, {GgmlType::kQ3_K, 108, -1}, {GgmlType::kQ4_K, 0, 2},
    {GgmlType::kQ5_K, 0, 2},  {GgmlType::kQ6_K, 208, -1}, {GgmlType::kIQ4_NL, 0, -1}, {GgmlType::kIQ4_XS, 0, -1},
};

float HalfAt(const std::vector<uint8_t>& bytes, size_t at) {
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + at, 2);
  return HalfToFloat(bits);
}

TEST(FillRandomBlocksTest, EveryScaleIsFiniteAndSmall) {
  Rng rng(42);
  for (const ScaleFields& fields : kScaleFields) {
    const GgmlTypeInfo info = *LookupGgmlType(static_cast<uint32_t>(fields.type));
    SCOPED_TRACE(info.name);
    constexpr size_t kBlocks = 2000;
    std::vector<uint8_t> bytes(kBlocks * info.type_size);
    ASSERT_TRUE(FillRandomBlocks(info, bytes, rng).ok());
    absl::flat_hash_set<float> distinct;
    for (size_t b = 0; b < kBlocks; ++b) {
      const float d = HalfAt(bytes, b * info.type_size + fields.d);
      ASSERT_TRUE(std::isfinite(d) && d > 0.0f && d < 0.1f) << "block " << b << " d " << d;
      distinct.insert(d);
      if (fields.min < 0) continue;
      const float m = HalfAt(bytes, b * info.type_size + fields.min);
      ASSERT_TRUE(std::isfinite(m) && m != 0.0f && std::abs(m) < 0.1f) << "block " << b << " min " << m;
      // Q4_1/Q5_1 add m (negative to centre); K types subtract dmin (positive).
      const bool additive = fields.type == GgmlType::kQ4_1 || fields.type == GgmlType::kQ5_1;
      EXPECT_EQ(m < 0, additive);
    }
    EXPECT_GT(distinct.size(), 20u);
  }
  std::vector<uint8_t> odd(19);
  EXPECT_FALSE(FillRandomBlocks(*LookupGgmlTypeByName("Q4_0"), odd, rng).ok());
}

TEST(FillRandomBlocksTest, FloatTypesAreSmallAndNormalish) {
  Rng rng(7);
  for (const char* name : {"F32", "F16", "BF16"}) {
    SCOPED_TRACE(name);
    const GgmlTypeInfo info = *LookupGgmlTypeByName(name);
    constexpr size_t kN = 100000;
    std::vector<uint8_t> bytes(kN * info.type_size);
    ASSERT_TRUE(FillRandomBlocks(info, bytes, rng).ok());
    double sum_sq = 0;
    for (size_t i = 0; i < kN; ++i) {
      float v;
      if (info.type_size == 4) {
        std::memcpy(&v, bytes.data() + 4 * i, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        v = name[0] == 'F' ? HalfToFloat(bits) : Bf16ToFloat(bits);
      }
      ASSERT_TRUE(std::isfinite(v) && std::abs(v) < 0.1f) << v;
      sum_sq += double{v} * v;
    }
    EXPECT_NEAR(std::sqrt(sum_sq / kN), kRandomWeightStd, 0.002);
  }
}

// Q8_0 decodes as d * q: the decoded weights should look like a checkpoint's.
TEST(FillRandomBlocksTest, Q8_0WeightsHaveRealisticScale) {
  Rng rng(3);
  const GgmlTypeInfo info = *LookupGgmlTypeByName("Q8_0");
  std::vector<uint8_t> bytes(4096 * info.type_size);
  ASSERT_TRUE(FillRandomBlocks(info, bytes, rng).ok());
  double sum_sq = 0;
  for (size_t b = 0; b < 4096; ++b) {
    const float d = HalfAt(bytes, b * info.type_size);
    for (int i = 0; i < 32; ++i) {
      const float w = d * static_cast<int8_t>(bytes[b * info.type_size + 2 + i]);
      sum_sq += double{w} * w;
    }
  }
  const double std = std::sqrt(sum_sq / (4096.0 * 32));
  EXPECT_GT(std, 0.01);
  EXPECT_LT(std, 0.04);
}

// --- The model generator -------------------------------------------------------

TEST(ModelTensorsTest, EveryPresetListsConsistentTensors) {
  for (const std::string& recipe_name : AllTypeRecipeNames()) {
    const TypeRecipe recipe = *ParseTypeRecipe(recipe_name);
    for (const ModelShape& shape : AllPresets()) {
      SCOPED_TRACE(absl::StrCat(shape.name, " ", recipe_name));
      absl::StatusOr<std::vector<TensorSpec>> tensors = BuildTensorList(shape, recipe);
      ASSERT_TRUE(tensors.ok()) << tensors.status();
      if (IsEncoderArchitecture(shape.architecture)) {
        // token_embd, token_types, the input norm and its bias (+ bert's
        // positions); per layer bert: q, k, v, output, up, down with biases
        // and two norms with biases; nomic-bert: qkv, output, up, gate, down
        // and the two norms with biases.
        const bool bert = shape.architecture == "bert";
        EXPECT_EQ(tensors->size(), (bert ? 5u : 4u) + shape.n_layers * (bert ? 16u : 9u));
        continue;
      }
      const size_t ffn = (shape.n_experts ? 4 : 3) + (shape.shared_expert_dim ? 4 : 0);
      size_t per_model = 2 + (shape.tied_embeddings ? 0 : 1);
      for (uint32_t l = 0; l < shape.n_layers; ++l) {
        if (!IsHybrid(shape)) {
          per_model += 6 + ffn + (shape.qkv_bias ? 3 : 0) + (shape.qk_norm ? 2 : 0) +
                       (shape.architecture == "bitnet" ? 2 : 0);  // BitNet's sub-norms
        } else if (IsAttentionLayer(shape, l)) {  // norm, q, k, v, q/k norms, output, post norm
          per_model += 8 + ffn;
        } else {  // norm, qkv, gate, conv, dt, a, ba (or beta + alpha), ssm norm, out, post norm
          per_model += (shape.architecture == "qwen3next" ? 10 : 11) + ffn;
        }
      }
      EXPECT_EQ(tensors->size(), per_model);
      for (const TensorSpec& t : *tensors) {
        uint64_t n = 1;
        for (uint64_t dim : t.dims) n *= dim;
        EXPECT_EQ(t.n_bytes, *GgmlTensorBytes(t.type, t.dims[0], n)) << t.name;
        if (t.dims.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos ||
            t.name.find("ssm_conv1d") != std::string::npos) {
          EXPECT_EQ(t.type.type, GgmlType::kF32) << t.name;
        }
      }
    }
  }
}

TEST(ModelTensorsTest, Q4KMPutsQ6KWhereLlamaCppDoes) {
  // use_more_bits for 32 layers: the first 4, the last 4, and 6, 9, ..., 27.
  absl::flat_hash_set<uint32_t> expected = {0, 1, 2, 3, 28, 29, 30, 31, 6, 9, 12, 15, 18, 21, 24, 27};
  for (uint32_t l = 0; l < 32; ++l) EXPECT_EQ(UseMoreBits(l, 32), expected.contains(l)) << l;

  const TypeRecipe recipe = *ParseTypeRecipe("q4_k_m");
  EXPECT_EQ(recipe.file_type, 15u);
  for (const char* preset : {"llama-3-8b", "mixtral-8x7b", "llama-3.2-1b"}) {
    const ModelShape shape = *FindPreset(preset);
    const std::vector<TensorSpec> tensors = *BuildTensorList(shape, recipe);
    for (const TensorSpec& t : tensors) {
      if (t.dims.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos) continue;
      bool q6 = t.name == "output.weight" || (t.name == "token_embd.weight" && shape.tied_embeddings);
      uint32_t layer = 0;
      if (std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1) {
        const bool more_bits_tensor =
            t.name.find(".attn_v.") != std::string::npos || t.name.find(".ffn_down") != std::string::npos;
        q6 = more_bits_tensor && UseMoreBits(layer, shape.n_layers);
      }
      EXPECT_EQ(t.type.type, q6 ? GgmlType::kQ6_K : GgmlType::kQ4_K) << preset << " " << t.name;
    }
  }
}

TEST(ModelTensorsTest, RowNotWholeBlocksFallsBackAsLlamaCppOrNamesTheTensor) {
  ModelShape shape = *FindPreset("tiny");
  shape.hidden_dim = 320;  // ffn_down rows are 320 long: 10 Q8_0 blocks, not whole Q4_K blocks
  EXPECT_TRUE(BuildTensorList(shape, *ParseTypeRecipe("Q8_0")).ok());
  // Q4_K falls back to Q5_0 there, as llama.cpp's quantizer does.
  const std::vector<TensorSpec> fallen = *BuildTensorList(shape, *ParseTypeRecipe("Q4_K"));
  for (const TensorSpec& t : fallen) {
    if (t.name == "blk.0.ffn_down.weight") {
      EXPECT_EQ(t.type.type, GgmlType::kQ5_0);
    }
    if (t.name == "blk.0.ffn_up.weight") {
      EXPECT_EQ(t.type.type, GgmlType::kQ4_K);
    }
  }
  shape.hidden_dim = 336;  // not whole 32-element blocks either: Q8_0 has no fallback
  const absl::Status status = BuildTensorList(shape, *ParseTypeRecipe("Q8_0")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("blk.0.ffn_down.weight"), absl::string_view::npos) << status;
  EXPECT_FALSE(ParseTypeRecipe("Q4_K_S").ok());
  EXPECT_FALSE(FindPreset("llama-4").ok());
}

bool ValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n;
  }
  return true;
}

void ExpectUniqueUtf8Tokens(const GeneratedVocab& vocab, uint32_t vocab_size) {
  ASSERT_EQ(vocab.tokens.size(), vocab_size);
  ASSERT_EQ(vocab.token_types.size(), vocab_size);
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& token : vocab.tokens) {
    EXPECT_TRUE(seen.insert(token).second) << "duplicate " << token;
    EXPECT_TRUE(ValidUtf8(token)) << token;
    EXPECT_EQ(token.find(' '), std::string::npos) << token;
  }
  EXPECT_EQ(vocab.token_types[vocab.bos_id], kTokenControl);
  EXPECT_EQ(vocab.token_types[vocab.eos_id], kTokenControl);
}

TEST(VocabTest, BpeMergesJoinExistingTokens) {
  for (const char* preset : {"tiny-qwen2", "llama-3.2-1b", "qwen2.5-7b"}) {
    SCOPED_TRACE(preset);
    const ModelShape shape = *FindPreset(preset);
    const GeneratedVocab vocab = *MakeVocab(shape);
    ExpectUniqueUtf8Tokens(vocab, shape.vocab_size);
    absl::flat_hash_set<absl::string_view> tokens(vocab.tokens.begin(), vocab.tokens.end());
    ASSERT_FALSE(vocab.merges.empty());
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
      const std::string& merge = vocab.merges[i];
      const size_t space = merge.find(' ');
      ASSERT_NE(space, std::string::npos) << merge;
      const std::string a = merge.substr(0, space), b = merge.substr(space + 1);
      ASSERT_TRUE(tokens.contains(a) && tokens.contains(b)) << merge;
      ASSERT_EQ(vocab.tokens[256 + i], a + b) << "merge " << i << " makes token " << 256 + i;
    }
    for (size_t id = 256 + vocab.merges.size(); id < vocab.tokens.size(); ++id) {
      EXPECT_EQ(vocab.token_types[id], kTokenControl) << vocab.tokens[id];
    }
    EXPECT_EQ(vocab.tokens[0x41], "A");
    EXPECT_EQ(vocab.tokens[' '], "\xC4\xA0");  // 'Ġ'
    EXPECT_TRUE(vocab.scores.empty());
  }
}

TEST(VocabTest, SpmHasByteTokensAndDescendingScores) {
  const ModelShape shape = *FindPreset("llama-2-70b");
  const GeneratedVocab vocab = *MakeVocab(shape);
  ExpectUniqueUtf8Tokens(vocab, shape.vocab_size);
  EXPECT_EQ(vocab.tokens[0], "<unk>");
  EXPECT_EQ(vocab.tokens[1], "<s>");
  EXPECT_EQ(vocab.tokens[2], "</s>");
  EXPECT_EQ(vocab.tokens[3 + 0x0A], "<0x0A>");
  EXPECT_EQ(vocab.token_types[3 + 0xFF], kTokenByte);
  ASSERT_EQ(vocab.scores.size(), vocab.tokens.size());
  for (size_t i = 260; i < vocab.scores.size(); ++i) ASSERT_LT(vocab.scores[i], vocab.scores[i - 1]) << i;
  EXPECT_TRUE(vocab.merges.empty());
}

TEST_F(GgufWriterTest, GeneratesTinyModelsOfTheComputedSize) {
  for (const char* preset :
       {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-qwen35", "tiny-qwen35moe", "tiny-qwen3next"}) {
    SCOPED_TRACE(preset);
    absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset(preset), *ParseTypeRecipe("Q4_K_M"));
    ASSERT_TRUE(plan.ok()) << plan.status();
    const std::string path = Path(absl::StrCat(preset, ".gguf"));
    uint64_t last_written = 0;
    ASSERT_TRUE(WriteModel(*plan, path, /*seed=*/5, [&](uint64_t w, uint64_t) { last_written = w; }).ok());
    EXPECT_EQ(fs::file_size(path), *plan->writer.FileSize());
    EXPECT_EQ(last_written, fs::file_size(path));
    EXPECT_FALSE(fs::exists(path + ".tmp"));
  }
  // Same seed, same bytes.
  const ModelPlan plan = *PlanModel(*FindPreset("tiny"), *ParseTypeRecipe("Q8_0"), /*alignment=*/128);
  ASSERT_TRUE(WriteModel(plan, Path("a.gguf"), 9).ok());
  ASSERT_TRUE(WriteModel(plan, Path("b.gguf"), 9).ok());
  EXPECT_EQ(ReadAll(Path("a.gguf")), ReadAll(Path("b.gguf")));
}

}  // namespace
}  // namespace octo::testing
