// decompose: GGUF -> layer directory, on generated and real models.
#include "storage/decompose.h"

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <span>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/file.h"
#include "storage/gguf_json.h"
#include "storage/layer_file.h"
#include "storage/tensor_layout.h"
#include "storage/verify.h"
#include "storage/xxhash64.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

namespace fs = std::filesystem;
using ::octo::testing::GenerateModel;
using ::octo::testing::TempDir;

std::vector<uint8_t> ReadRange(const std::string& path, uint64_t offset, uint64_t n) {
  auto file = File::OpenForRead(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::vector<uint8_t> bytes(n);
  EXPECT_TRUE(file->ReadAt(offset, bytes).ok());
  return bytes;
}

// A tensor's bytes as the GGUF holds them: read whole when packed, gathered
// slice by slice from the expert blocks when strided (format 2).
std::vector<uint8_t> ReadTensorBytes(const std::string& path, const ManifestFile& f, const ManifestTensor& t) {
  if (t.expert_stride == 0) return ReadRange(path, t.offset, t.bytes);
  std::vector<uint8_t> bytes;
  const uint64_t slice = t.bytes / f.experts->count;
  for (uint32_t e = 0; e < f.experts->count; ++e) {
    std::vector<uint8_t> part = ReadRange(path, t.offset + e * t.expert_stride, slice);
    bytes.insert(bytes.end(), part.begin(), part.end());
  }
  return bytes;
}

// Decomposes `gguf_path` into `out` and checks what a user relies on: verify
// passes, every tensor's bytes are the GGUF's bytes at a 4 KiB-aligned
// offset, every file is padded to 4 KiB, config and tokenizer carried over.
void DecomposeAndCheck(const std::string& gguf_path, const std::string& out) {
  auto manifest = Decompose(gguf_path, out, {});
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  VerifyReport report = VerifyModelDir(out);
  ASSERT_TRUE(report.ok()) << report.problems[0].file << ": " << report.problems[0].message;

  auto gguf = GgufFile::Open(gguf_path);
  ASSERT_TRUE(gguf.ok());
  size_t tensors_seen = 0;
  for (const ManifestFile& f : manifest->files) {
    EXPECT_EQ(fs::file_size(out + "/" + f.name), f.size);
    EXPECT_EQ(f.size % 4096, 0u) << f.name;
    for (const ManifestTensor& t : f.tensors) {
      ++tensors_seen;
      EXPECT_EQ(t.offset % 4096, 0u) << t.name;
      const GgufTensorInfo* src = gguf->FindTensor(t.name);
      ASSERT_NE(src, nullptr) << t.name;
      EXPECT_EQ(t.type.type, src->type.type);
      EXPECT_EQ(t.shape, src->dims);
      std::vector<uint8_t> want(src->n_bytes);
      ASSERT_TRUE(gguf->ReadTensorData(*src, 0, want).ok());
      EXPECT_EQ(ReadTensorBytes(out + "/" + f.name, f, t), want) << t.name;
    }
  }
  EXPECT_EQ(tensors_seen, gguf->tensors().size());

  // What the daemon will read back equals what the GGUF said.
  auto reread = ReadManifest(out);
  ASSERT_TRUE(reread.ok()) << reread.status();
  auto config = ModelConfigFromGguf(*gguf);
  EXPECT_EQ(ModelConfigToJson(reread->config), ModelConfigToJson(*config));
  for (const auto& [key, value] : gguf->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* got = reread->FindTokenizerKey(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(GgufValueToJson(*got), GgufValueToJson(value)) << key;
  }
}

TEST(DecomposeTest, GeneratedModelsOfEveryArchitectureAndTypeMix) {
  TempDir tmp;
  for (const char* preset : {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe"}) {
    for (const char* type : {"Q4_K_M", "Q8_0", "F16", "IQ4_XS"}) {
      SCOPED_TRACE(std::string(preset) + " " + type);
      const std::string name = std::string(preset) + "-" + type;
      GenerateModel(tmp.Path(name + ".gguf"), preset, type);
      DecomposeAndCheck(tmp.Path(name + ".gguf"), tmp.Path(name));
    }
  }
}

TEST(DecomposeTest, LayerFilesHoldEveryTensorOfTheirLayerExpertsIncluded) {
  TempDir tmp;
  GenerateModel(tmp.Path("moe.gguf"), "tiny-moe", "Q4_K");
  auto manifest = Decompose(tmp.Path("moe.gguf"), tmp.Path("moe"), {});
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const ManifestFile* layer1 = manifest->Layer(1);
  ASSERT_NE(layer1, nullptr);
  std::vector<std::string> names;
  for (const ManifestTensor& t : layer1->tensors) names.push_back(t.name);
  for (const char* want : {"blk.1.ffn_gate_inp.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
                           "blk.1.ffn_down_exps.weight", "blk.1.attn_q.weight", "blk.1.attn_norm.weight"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) EXPECT_EQ(n.rfind("blk.1.", 0), 0u) << n;
}

TEST(DecomposeTest, QwenMixtureOfExpertsKeepsItsExpertWidthAndRope) {
  TempDir tmp;
  GenerateModel(tmp.Path("q.gguf"), "tiny-qwen3moe", "Q4_K_M");
  auto manifest = Decompose(tmp.Path("q.gguf"), tmp.Path("q"), {});
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const ModelConfig& c = manifest->config;
  EXPECT_EQ(c.architecture, "qwen3moe");
  EXPECT_EQ(c.n_experts, 8u);
  EXPECT_EQ(c.n_experts_used, 2u);
  EXPECT_EQ(c.expert_hidden_dim, 256u);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.head_dim, 64u);  // n_heads * head_dim != dim, as in real Qwen3
  const ManifestFile* layer0 = manifest->Layer(0);
  ASSERT_NE(layer0, nullptr);
  bool has_q_norm = false;
  for (const ManifestTensor& t : layer0->tensors) has_q_norm |= t.name == "blk.0.attn_q_norm.weight";
  EXPECT_TRUE(has_q_norm);
}

// Format 2: a MoE layer file holds its dense tensors first, then one block
// per expert with that expert's slices of gate, up and down, each at an
// aligned offset, so a loader can read one expert alone with O_DIRECT and
// check it with its own checksum.
TEST(DecomposeTest, MoeLayerFilesKeepEachExpertInItsOwnAlignedBlock) {
  TempDir tmp;
  testing::GenerateMoeModel(tmp.Path("moe.gguf"));
  auto manifest = Decompose(tmp.Path("moe.gguf"), tmp.Path("moe"), {});
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->format_version, 2u);
  auto gguf = GgufFile::Open(tmp.Path("moe.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const uint64_t slice = testing::kMoeModelSliceBytes;
  ASSERT_NE(slice % kAlignment, 0u) << "the model should need padding between slices";
  const uint64_t padded_slice = (slice + kAlignment - 1) / kAlignment * kAlignment;
  const std::map<std::string, uint64_t> in_block = {
      {"ffn_gate_exps.weight", 0}, {"ffn_up_exps.weight", padded_slice}, {"ffn_down_exps.weight", 2 * padded_slice}};
  for (const ManifestFile& f : manifest->files) {
    SCOPED_TRACE(f.name);
    const std::string path = tmp.Path("moe/" + f.name);
    EXPECT_EQ(Xxh64Hash(ReadRange(path, 0, f.size)), f.checksum);
    if (f.kind != FileKind::kLayer) {
      EXPECT_FALSE(f.experts.has_value());
      continue;
    }
    ASSERT_TRUE(f.experts.has_value());
    const ExpertBlocks& x = *f.experts;
    EXPECT_EQ(x.count, testing::kMoeModelExperts);
    EXPECT_EQ(x.offset % kAlignment, 0u);
    EXPECT_EQ(x.stride, 3 * padded_slice);
    EXPECT_EQ(x.offset + x.count * x.stride, f.size);
    ASSERT_EQ(x.checksums.size(), x.count);

    // The dense part: the header and every other tensor, before the blocks.
    EXPECT_EQ(DenseRange(f).offset, 0u);
    EXPECT_EQ(DenseRange(f).bytes, x.offset);
    EXPECT_EQ(Xxh64Hash(ReadRange(path, 0, x.offset)), x.dense_checksum);
    const std::string prefix = absl::StrCat("blk.", f.layer, ".");
    int n_stacked = 0;
    for (const ManifestTensor& t : f.tensors) {
      auto it = in_block.find(t.name.substr(prefix.size()));
      if (it == in_block.end()) {
        EXPECT_EQ(t.expert_stride, 0u) << t.name;
        EXPECT_LE(t.offset + t.bytes, x.offset) << t.name;
        continue;
      }
      ++n_stacked;
      EXPECT_EQ(t.offset, x.offset + it->second) << t.name;
      EXPECT_EQ(t.expert_stride, x.stride) << t.name;
      EXPECT_EQ(t.bytes, x.count * slice) << t.name;
    }
    EXPECT_EQ(n_stacked, 3);

    // Each block read alone: aligned for O_DIRECT, its own checksum, and
    // expert e's slice of each stacked tensor (bytes [e * slice, +slice) of
    // it in the GGUF) at its in-block offset, zeros between.
    for (uint32_t e = 0; e < x.count; ++e) {
      SCOPED_TRACE(absl::StrCat("expert ", e));
      const ByteRange r = ExpertRange(f, e);
      EXPECT_EQ(r.offset, x.offset + e * x.stride);
      EXPECT_EQ(r.bytes, x.stride);
      EXPECT_EQ(r.offset % kAlignment, 0u);
      const std::vector<uint8_t> block = ReadRange(path, r.offset, r.bytes);
      EXPECT_EQ(Xxh64Hash(block), x.checksums[e]);
      std::vector<uint8_t> want(r.bytes, 0);
      for (const auto& [suffix, offset] : in_block) {
        const GgufTensorInfo* src = gguf->FindTensor(prefix + suffix);
        ASSERT_NE(src, nullptr) << suffix;
        ASSERT_TRUE(gguf->ReadTensorData(*src, e * slice, std::span(want).subspan(offset, slice)).ok());
      }
      EXPECT_TRUE(block == want);
    }
  }

  // The manifest on disk says the same, and the directory verifies.
  const std::string text = *ReadSmallFile(tmp.Path("moe/manifest.json"), 1 << 24);
  EXPECT_NE(text.find("\"format_version\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"expert_stride\": "), std::string::npos);
  auto reread = ReadManifest(tmp.Path("moe"));
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->format_version, 2u);
  ASSERT_TRUE(reread->Layer(1)->experts.has_value());
  EXPECT_EQ(reread->Layer(1)->experts->checksums, manifest->Layer(1)->experts->checksums);
  EXPECT_EQ(reread->Layer(1)->experts->dense_checksum, manifest->Layer(1)->experts->dense_checksum);
  EXPECT_TRUE(VerifyModelDir(tmp.Path("moe")).ok());
}

// Copying page-sized chunks (many per slice) writes the same bytes, and
// progress still counts every tensor byte once.
TEST(DecomposeTest, ExpertSlicesCopiedInSmallChunksComeOutTheSame) {
  TempDir tmp;
  testing::GenerateMoeModel(tmp.Path("moe.gguf"));
  auto whole = Decompose(tmp.Path("moe.gguf"), tmp.Path("whole"), {});
  ASSERT_TRUE(whole.ok()) << whole.status();
  DecomposeOptions options;
  options.chunk_bytes = 4096;
  uint64_t last_done = 0, last_total = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  };
  auto chunked = Decompose(tmp.Path("moe.gguf"), tmp.Path("chunked"), options);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ(ManifestToJson(*chunked), ManifestToJson(*whole));
  EXPECT_EQ(last_done, last_total);
  uint64_t tensor_bytes = 0;
  for (const ManifestFile& f : whole->files) {
    for (const ManifestTensor& t : f.tensors) tensor_bytes += t.bytes;
  }
  EXPECT_EQ(last_total, tensor_bytes);
}

// Format 2 changes nothing for dense models but the version fields: each
// file is the header page, then its tensors in GGUF order, each at the next
// aligned offset, and the size is the aligned end. So are a MoE model's
// files other than its layers.
TEST(DecomposeTest, DenseFilesKeepTheVersion1Layout) {
  TempDir tmp;
  GenerateModel(tmp.Path("dense.gguf"), "tiny-qwen2", "Q4_K_M");
  testing::GenerateMoeModel(tmp.Path("moe.gguf"));
  for (const char* name : {"dense", "moe"}) {
    SCOPED_TRACE(name);
    auto manifest = Decompose(tmp.Path(absl::StrCat(name, ".gguf")), tmp.Path(name), {});
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    auto gguf = GgufFile::Open(tmp.Path(absl::StrCat(name, ".gguf")));
    ASSERT_TRUE(gguf.ok());
    for (const ManifestFile& f : manifest->files) {
      SCOPED_TRACE(f.name);
      auto header = DecodeFileHeader(ReadRange(tmp.Path(name) + "/" + f.name, 0, kHeaderBytes));
      ASSERT_TRUE(header.ok()) << header.status();
      EXPECT_EQ(header->format_version, 2u);
      if (f.experts.has_value()) continue;
      std::vector<std::string> gguf_order;
      for (const GgufTensorInfo& t : gguf->tensors()) {
        auto slot = FileForTensor(t.name, manifest->config.n_layers);
        if (slot.ok() && slot->kind == f.kind && slot->layer == f.layer) gguf_order.push_back(t.name);
      }
      ASSERT_EQ(f.tensors.size(), gguf_order.size());
      uint64_t offset = kHeaderBytes;
      for (size_t i = 0; i < f.tensors.size(); ++i) {
        const ManifestTensor& t = f.tensors[i];
        EXPECT_EQ(t.name, gguf_order[i]);
        EXPECT_EQ(t.offset, offset) << t.name;
        EXPECT_EQ(t.expert_stride, 0u) << t.name;
        offset = (offset + t.bytes + kAlignment - 1) / kAlignment * kAlignment;
      }
      EXPECT_EQ(f.size, offset);
    }
  }
  const std::string dense_text = *ReadSmallFile(tmp.Path("dense/manifest.json"), 1 << 24);
  EXPECT_EQ(dense_text.find("\"experts\""), std::string::npos);
  EXPECT_EQ(dense_text.find("\"expert_stride\""), std::string::npos);
}

// Format 1 on request (what Octo wrote before expert blocks): MoE layer
// files packed as in the GGUF, versions 1 throughout, and it verifies.
TEST(DecomposeTest, Format1IsWrittenWhenAsked) {
  TempDir tmp;
  testing::GenerateMoeModel(tmp.Path("moe.gguf"));
  DecomposeOptions options;
  options.format_version = 1;
  auto manifest = Decompose(tmp.Path("moe.gguf"), tmp.Path("v1"), options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->format_version, 1u);
  for (const ManifestFile& f : manifest->files) {
    EXPECT_FALSE(f.experts.has_value()) << f.name;
    for (const ManifestTensor& t : f.tensors) EXPECT_EQ(t.expert_stride, 0u) << t.name;
    auto header = DecodeFileHeader(ReadRange(tmp.Path("v1") + "/" + f.name, 0, kHeaderBytes));
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->format_version, 1u) << f.name;
  }
  const VerifyReport report = VerifyModelDir(tmp.Path("v1"));
  ASSERT_TRUE(report.ok()) << report.problems[0].file << ": " << report.problems[0].message;
  options.format_version = 3;
  EXPECT_EQ(Decompose(tmp.Path("moe.gguf"), tmp.Path("v3"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DecomposeTest, TiedEmbeddingsHaveNoLmHeadFile) {
  TempDir tmp;
  GenerateModel(tmp.Path("tied.gguf"), "tiny", "Q8_0", [](testing::ModelShape& s) { s.tied_embeddings = true; });
  auto manifest = Decompose(tmp.Path("tied.gguf"), tmp.Path("tied"), {});
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_TRUE(manifest->config.tied_embeddings);
  EXPECT_EQ(manifest->FindFile("lm_head.bin"), nullptr);
  EXPECT_FALSE(fs::exists(tmp.Path("tied/lm_head.bin")));
  EXPECT_TRUE(VerifyModelDir(tmp.Path("tied")).ok());
}

// <arch>.pooling_type reaches the manifest; a model without one pools its
// last token; an unknown type is refused naming the key.
TEST(DecomposeTest, PoolingTypeIsKeptAndChecked) {
  TempDir tmp;
  const std::pair<uint32_t, Pooling> cases[] = {
      {0, Pooling::kLast}, {1, Pooling::kMean}, {2, Pooling::kCls}, {3, Pooling::kLast}, {4, Pooling::kRank}};
  for (const auto& [type, pooling] : cases) {
    const std::string name = absl::StrCat("p", type);
    GenerateModel(tmp.Path(name + ".gguf"), "tiny", "Q8_0", [type](testing::ModelShape& s) { s.pooling_type = type; });
    auto manifest = Decompose(tmp.Path(name + ".gguf"), tmp.Path(name), {});
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_EQ(manifest->config.pooling, pooling) << type;
    auto reread = ReadManifest(tmp.Path(name));
    ASSERT_TRUE(reread.ok()) << reread.status();
    EXPECT_EQ(reread->config.pooling, pooling) << type;
  }
  GenerateModel(tmp.Path("bad.gguf"), "tiny", "Q8_0", [](testing::ModelShape& s) { s.pooling_type = 9; });
  const absl::Status refused = Decompose(tmp.Path("bad.gguf"), tmp.Path("bad"), {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("llama.pooling_type is 9"), std::string::npos) << refused;
  // A manifest from before pooling existed has none: the default. A bad
  // value is named.
  auto mean = ReadManifest(tmp.Path("p1"));
  ASSERT_TRUE(mean.ok()) << mean.status();
  nlohmann::json config = ModelConfigToJson(mean->config);
  EXPECT_EQ(config["pooling"], "mean");
  config.erase("pooling");
  EXPECT_EQ(ModelConfigFromJson(config)->pooling, Pooling::kLast);
  config["pooling"] = "max";
  EXPECT_NE(ModelConfigFromJson(config).status().message().find("config.pooling"), std::string::npos);
}

TEST(DecomposeTest, EverySharedModel) {
  OCTO_REQUIRE_SHARED("models/widened");
  TempDir tmp;
  std::vector<std::string> models = {"models/stories260K.gguf", "models/TinyStories-656K-Q8_0.gguf",
                                     "models/random/llama-2-tiny-random.gguf"};
  for (const auto& e : fs::directory_iterator(testing::SharedPath("models/widened"))) {
    models.push_back("models/widened/" + e.path().filename().string());
  }
  for (const std::string& m : models) {
    SCOPED_TRACE(m);
    DecomposeAndCheck(testing::SharedPath(m), tmp.Path(fs::path(m).stem().string()));
  }
}

TEST(DecomposeTest, RefusesToOverwriteUnlessForced) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q4_0");
  ASSERT_TRUE(Decompose(tmp.Path("a.gguf"), tmp.Path("out"), {}).ok());
  const std::string before = *ReadSmallFile(tmp.Path("out/manifest.json"), 1 << 24);

  GenerateModel(tmp.Path("b.gguf"), "tiny", "Q8_0");
  auto again = Decompose(tmp.Path("b.gguf"), tmp.Path("out"), {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("--force"), absl::string_view::npos);
  EXPECT_EQ(*ReadSmallFile(tmp.Path("out/manifest.json"), 1 << 24), before);

  DecomposeOptions force;
  force.overwrite = true;
  ASSERT_TRUE(Decompose(tmp.Path("b.gguf"), tmp.Path("out"), force).ok());
  EXPECT_EQ(ReadManifest(tmp.Path("out"))->Layer(0)->tensors[1].type.type, GgmlType::kQ8_0);
  EXPECT_TRUE(VerifyModelDir(tmp.Path("out")).ok());
}

TEST(DecomposeTest, ForceNeverReplacesSomethingThatIsNotAModelDirectory) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q4_0");
  fs::create_directories(tmp.Path("precious"));
  std::ofstream(tmp.Path("precious/thesis.txt")) << "years of work";
  DecomposeOptions force;
  force.overwrite = true;
  auto result = Decompose(tmp.Path("a.gguf"), tmp.Path("precious"), force);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(tmp.Path("precious/thesis.txt")));
  // Nor a plain file.
  std::ofstream(tmp.Path("file")) << "x";
  EXPECT_FALSE(Decompose(tmp.Path("a.gguf"), tmp.Path("file"), force).ok());
  EXPECT_EQ(fs::file_size(tmp.Path("file")), 1u);
}

// Nothing but the inputs may remain in `dir` after a failed run.
void ExpectNoLeftovers(const TempDir& tmp, const std::vector<std::string>& allowed) {
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << "left behind: " << name;
  }
}

TEST(DecomposeTest, InterruptedRunLeavesNothingBehind) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "F16");
  std::atomic<bool> cancel{false};
  DecomposeOptions options;
  options.cancel = &cancel;
  options.chunk_bytes = 4096;
  int calls = 0;
  options.progress = [&](uint64_t, uint64_t) {
    if (++calls == 20) cancel = true;
  };
  auto result = Decompose(tmp.Path("a.gguf"), tmp.Path("out"), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(fs::exists(tmp.Path("out")));
  ExpectNoLeftovers(tmp, {"a.gguf"});
}

TEST(DecomposeTest, SourceTruncatedMidRunFailsAndLeavesNothing) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "F32");
  DecomposeOptions options;
  options.chunk_bytes = 4096;
  int calls = 0;
  options.progress = [&](uint64_t, uint64_t) {
    if (++calls == 10) fs::resize_file(tmp.Path("a.gguf"), fs::file_size(tmp.Path("a.gguf")) / 2);
  };
  auto result = Decompose(tmp.Path("a.gguf"), tmp.Path("out"), options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("reading tensor"), absl::string_view::npos) << result.status();
  EXPECT_FALSE(fs::exists(tmp.Path("out")));
  ExpectNoLeftovers(tmp, {"a.gguf"});
}

// The disk fills (ENOSPC) or fails (EIO) midway, injected through
// DecomposeOptions::write_fault as LevelDB's test Env injects them: the run
// says which file and why, leaves nothing behind, and an existing model
// directory it was to replace stays as it was and still verifies.
TEST(DecomposeTest, DiskFullOrFailingMidwayLeavesNoDirectoryThatVerifies) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q4_0");
  GenerateModel(tmp.Path("b.gguf"), "tiny", "Q8_0");
  ASSERT_TRUE(Decompose(tmp.Path("a.gguf"), tmp.Path("kept"), {}).ok());
  const std::string kept_manifest = *ReadSmallFile(tmp.Path("kept/manifest.json"), 1 << 24);
  struct Fault {
    int err;
    std::string at;  // fail the first write to a file whose name contains this, once past `after` bytes
    uint64_t after;
    std::string says;
  };
  for (const Fault& f : {Fault{ENOSPC, "layer_001.bin", 4096, "No space left on device"},
                         Fault{EIO, "layer_000.bin", 0, "Input/output error"},
                         Fault{ENOSPC, "manifest.json", 0, "No space left on device"}}) {
    SCOPED_TRACE(f.says + " at " + f.at);
    for (const std::string out : {"fresh", "kept"}) {
      DecomposeOptions options;
      options.overwrite = true;
      options.chunk_bytes = 4096;
      options.write_fault = [&](absl::string_view path, uint64_t written) {
        return absl::StrContains(path, f.at) && written >= f.after ? f.err : 0;
      };
      const absl::StatusOr<Manifest> result = Decompose(tmp.Path("b.gguf"), tmp.Path(out), options);
      ASSERT_FALSE(result.ok());
      EXPECT_NE(result.status().message().find(f.says), absl::string_view::npos) << result.status();
      EXPECT_NE(result.status().message().find(f.at), absl::string_view::npos) << result.status();
      if (out == "fresh") {
        EXPECT_FALSE(fs::exists(tmp.Path("fresh"))) << "no directory that could be taken for a model";
        EXPECT_FALSE(VerifyModelDir(tmp.Path("fresh")).ok());
      } else {
        EXPECT_EQ(*ReadSmallFile(tmp.Path("kept/manifest.json"), 1 << 24), kept_manifest) << "the old model stays";
        EXPECT_TRUE(VerifyModelDir(tmp.Path("kept")).ok());
      }
    }
    ExpectNoLeftovers(tmp, {"a.gguf", "b.gguf", "kept"});
  }
}

// Renames one tensor inside a GGUF header (same length, so the file stays
// well-formed): the model then lacks a tensor it needs.
void RenameTensorInPlace(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string head(1 << 20, '\0');
  f.read(head.data(), head.size());
  const size_t at = head.find(from);
  ASSERT_NE(at, std::string::npos);
  f.clear();
  f.seekp(static_cast<std::streamoff>(at));
  f.write(to.data(), to.size());
}

TEST(DecomposeTest, ModelThatCannotRunIsRefusedBeforeAnythingIsWritten) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q4_0");
  RenameTensorInPlace(tmp.Path("a.gguf"), "blk.1.attn_q.weight", "blk.1.attn_x.weight");
  auto result = Decompose(tmp.Path("a.gguf"), tmp.Path("out"), {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("missing tensor blk.1.attn_q.weight"), absl::string_view::npos)
      << result.status();
  EXPECT_FALSE(fs::exists(tmp.Path("out")));
  ExpectNoLeftovers(tmp, {"a.gguf"});
}

TEST(DecomposeTest, UnsupportedArchitectureIsNamed) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  TempDir tmp;
  auto result = Decompose(testing::SharedPath("models/vocab/ggml-vocab-gpt-2.gguf"), tmp.Path("out"), {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(result.status().message().find("architecture 'gpt2' is not supported"), absl::string_view::npos);
  ExpectNoLeftovers(tmp, {});
}

TEST(DecomposeTest, PartialDirectoryOfAKilledRunIsRemovedByTheNextRun) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q4_0");
  // A pid that is certainly dead: a child that has exited and been reaped.
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const std::string stale = tmp.Path(".out.partial-" + std::to_string(child));
  fs::create_directories(stale);
  std::ofstream(stale + "/layer_000.bin") << "half";
  EXPECT_FALSE(VerifyModelDir(stale).ok());  // never mistaken for a model
  ASSERT_TRUE(Decompose(tmp.Path("a.gguf"), tmp.Path("out"), {}).ok());
  EXPECT_FALSE(fs::exists(stale));
}

// A full disk is found before the first byte is written. Needs a small file
// system: a 1 MiB tmpfs (mounting needs root; skipped otherwise).
TEST(DecomposeTest, NotEnoughDiskSpaceIsReportedUpFront) {
  TempDir tmp;
  GenerateModel(tmp.Path("a.gguf"), "tiny", "Q8_0");
  fs::create_directories(tmp.Path("small"));
  if (::mount("tmpfs", tmp.Path("small").c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  auto result = Decompose(tmp.Path("a.gguf"), tmp.Path("small/out"), {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(result.status().message().find("not enough space"), absl::string_view::npos) << result.status();
  EXPECT_TRUE(fs::is_empty(tmp.Path("small")));
  ::umount(tmp.Path("small").c_str());
}

}  // namespace
}  // namespace octo
