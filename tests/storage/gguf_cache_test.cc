// GGUFs served directly: the cache entry is made once, reused while the file
// is unchanged, replaced when it changes, and never left half-written.
#include "storage/gguf_cache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/manifest.h"
#include "storage/verify.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Entries(const fs::path& cache) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(cache)) {
    if (!e.path().filename().string().starts_with(".")) names.push_back(e.path().filename().string());
  }
  return names;
}

class GgufCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gguf_ = dir_.Path("model.gguf");
    GenerateModel(gguf_, "tiny", "Q8_0", [](ModelShape& s) { s.n_layers = 2; });
  }
  TempDir dir_;
  std::string gguf_;
};

TEST_F(GgufCacheTest, FirstUseDecomposesLaterUsesReuse) {
  const std::string cache = dir_.Path("cache/nested");  // made when missing
  uint64_t last_done = 0, total = 0;
  DecomposeOptions options;
  options.progress = [&](uint64_t done, uint64_t all) {
    last_done = done;
    total = all;
  };
  auto first = DecomposeIntoCache(gguf_, cache, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->reused);
  EXPECT_GT(total, 0u);
  EXPECT_EQ(last_done, total);
  EXPECT_TRUE(absl::StartsWith(fs::path(first->dir).filename().string(), "model-"));
  EXPECT_TRUE(VerifyModelDir(first->dir).ok());
  auto second = DecomposeIntoCache(dir_.Path("./model.gguf"), cache, DecomposeOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->reused);
  EXPECT_EQ(second->dir, first->dir);
}

// A BitNet GGUF whose cache entry another version of Octo made without the
// sub-norm tensors (as a build from before BitNet support would have): the
// directory is refused naming the missing tensor and the fix, and octod's
// cache decomposes the GGUF again instead of reusing it.
TEST_F(GgufCacheTest, AnEntryThisBuildCannotReadIsDecomposedAgain) {
  const std::string bitnet = dir_.Path("bitnet.gguf");
  GenerateModel(bitnet, "tiny-bitnet", "TQ2_0", [](ModelShape& s) { s.n_layers = 1; });
  const std::string cache = dir_.Path("cache");
  auto first = DecomposeIntoCache(bitnet, cache, DecomposeOptions{});
  ASSERT_TRUE(first.ok()) << first.status();
  // Drop the sub-norms from its manifest.
  const std::string manifest_path = first->dir + "/manifest.json";
  std::ifstream in(manifest_path);
  nlohmann::json manifest = nlohmann::json::parse(in);
  in.close();
  for (nlohmann::json& file : manifest["files"]) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& t : file["tensors"]) {
      if (!absl::StrContains(t["name"].get<std::string>(), "sub_norm")) kept.push_back(t);
    }
    file["tensors"] = kept;
  }
  std::ofstream(manifest_path) << manifest.dump();
  const absl::StatusOr<Manifest> old = ReadManifest(first->dir);
  ASSERT_FALSE(old.ok());
  EXPECT_TRUE(absl::StrContains(old.status().message(), "missing tensor blk.0.attn_sub_norm.weight")) << old.status();
  EXPECT_TRUE(absl::StrContains(old.status().message(), "decompose its GGUF again with this one: octo-ctl decompose "
                                                        "--force MODEL.gguf DIR"))
      << old.status();

  auto again = DecomposeIntoCache(bitnet, cache, DecomposeOptions{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->reused) << "an entry this build cannot read is made again";
  EXPECT_TRUE(ReadManifest(again->dir).ok());
  EXPECT_TRUE(VerifyModelDir(again->dir).ok());
}

TEST_F(GgufCacheTest, AChangedFileGetsANewEntryAndTheOldOneGoes) {
  const std::string cache = dir_.Path("cache");
  auto first = DecomposeIntoCache(gguf_, cache, DecomposeOptions{});
  ASSERT_TRUE(first.ok()) << first.status();
  // Same size and time, other bytes in the header: the checksum tells them apart.
  auto before = FingerprintGguf(gguf_);
  ASSERT_TRUE(before.ok());
  GenerateModel(gguf_, "tiny", "Q8_0", [](ModelShape& s) { s.n_layers = 2; }, /*seed=*/7);
  const struct timespec times[2] = {{0, UTIME_OMIT},
                                    {before->mtime_ns / 1000000000, before->mtime_ns % 1000000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, gguf_.c_str(), times, 0), 0);
  auto after = FingerprintGguf(gguf_);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->mtime_ns, before->mtime_ns);
  auto second = DecomposeIntoCache(gguf_, cache, DecomposeOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->reused);
  EXPECT_NE(second->dir, first->dir);
  EXPECT_EQ(Entries(cache), std::vector<std::string>{fs::path(second->dir).filename().string()});
}

TEST_F(GgufCacheTest, TwoGgufsOfOneNameInOtherFoldersKeepTheirOwnEntries) {
  const std::string cache = dir_.Path("cache");
  fs::create_directory(dir_.Path("other"));
  GenerateModel(dir_.Path("other/model.gguf"), "tiny", "Q8_0", [](ModelShape& s) { s.n_layers = 3; });
  auto a = DecomposeIntoCache(gguf_, cache, DecomposeOptions{});
  auto b = DecomposeIntoCache(dir_.Path("other/model.gguf"), cache, DecomposeOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->dir, b->dir);
  EXPECT_EQ(Entries(cache).size(), 2u);
  EXPECT_TRUE(DecomposeIntoCache(gguf_, cache, DecomposeOptions{})->reused);
}

TEST_F(GgufCacheTest, ACancelledRunLeavesNothingThatIsReused) {
  const std::string cache = dir_.Path("cache");
  std::atomic<bool> cancel{true};
  DecomposeOptions options;
  options.cancel = &cancel;
  auto cancelled = DecomposeIntoCache(gguf_, cache, options);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  EXPECT_TRUE(absl::StrContains(cancelled.status().message(), "model.gguf")) << cancelled.status();
  EXPECT_TRUE(Entries(cache).empty());
  auto again = DecomposeIntoCache(gguf_, cache, DecomposeOptions{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->reused);
}

TEST_F(GgufCacheTest, TwoLoadsAtOnceDecomposeOnce) {
  const std::string cache = dir_.Path("cache");
  std::atomic<int> decomposed{0};
  std::vector<std::thread> threads;
  std::vector<std::string> dirs(2);
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto got = DecomposeIntoCache(gguf_, cache, DecomposeOptions{});
      ASSERT_TRUE(got.ok()) << got.status();
      dirs[i] = got->dir;
      if (!got->reused) ++decomposed;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(decomposed.load(), 1);
  EXPECT_EQ(dirs[0], dirs[1]);
}

TEST_F(GgufCacheTest, BadInputsAreNamed) {
  auto missing = DecomposeIntoCache(dir_.Path("absent.gguf"), dir_.Path("cache"), DecomposeOptions{});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "absent.gguf")) << missing.status();
  {
    std::ofstream junk(dir_.Path("junk.gguf"));
    junk << "not a gguf";
  }
  auto junk = DecomposeIntoCache(dir_.Path("junk.gguf"), dir_.Path("cache"), DecomposeOptions{});
  EXPECT_FALSE(junk.ok());
  EXPECT_TRUE(absl::StrContains(junk.status().message(), "junk.gguf")) << junk.status();
  {
    std::ofstream file(dir_.Path("a-file"));
  }
  auto no_cache = DecomposeIntoCache(gguf_, dir_.Path("a-file/cache"), DecomposeOptions{});
  EXPECT_EQ(no_cache.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(no_cache.status().message(), "--cache-dir")) << no_cache.status();
}

}  // namespace
}  // namespace octo::testing
