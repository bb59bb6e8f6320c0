// decompose: GGUF -> layer directory, on generated and real models.
#include "storage/decompose.h"

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "storage/file.h"
#include "storage/gguf_json.h"
#include "storage/verify.h"
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
      EXPECT_EQ(ReadRange(out + "/" + f.name, t.offset, t.bytes), want) << t.name;
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
