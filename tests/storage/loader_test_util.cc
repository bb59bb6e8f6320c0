#include "tests/storage/loader_test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "storage/file.h"
#include "tests/storage/test_models.h"

namespace octo::testing {

Manifest MakeLayerDir(const std::string& dir, uint32_t n_layers) {
  const std::string gguf = dir + ".gguf";
  GenerateModel(gguf, "tiny", "F16", [&](ModelShape& shape) { shape.n_layers = n_layers; });
  absl::StatusOr<Manifest> manifest = Decompose(gguf, dir, {});
  ::unlink(gguf.c_str());
  if (!manifest.ok()) {
    ADD_FAILURE() << manifest.status();
    return {};
  }
  return *manifest;
}

std::vector<std::vector<uint8_t>> ReadLayerFiles(const std::string& dir, const Manifest& manifest) {
  std::vector<std::vector<uint8_t>> files(manifest.config.n_layers);
  for (uint32_t l = 0; l < files.size(); ++l) {
    const ManifestFile* f = manifest.Layer(l);
    auto file = File::OpenForRead(dir + "/" + f->name);
    EXPECT_TRUE(file.ok()) << file.status();
    files[l].resize(f->size);
    EXPECT_TRUE(file->ReadAt(0, files[l]).ok());
  }
  return files;
}

uint64_t LargestLayerFile(const Manifest& manifest) {
  uint64_t largest = 0;
  for (uint32_t l = 0; l < manifest.config.n_layers; ++l) largest = std::max(largest, manifest.Layer(l)->size);
  return largest;
}

std::set<std::string> RingsOf(pid_t pid) {
  std::set<std::string> names;
  const std::string prefix = absl::StrCat("octo-ring-", pid, "-");
  if (DIR* d = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(d)) {
      if (absl::StartsWith(e->d_name, prefix)) names.insert(absl::StrCat("/", e->d_name));
    }
    ::closedir(d);
  }
  return names;
}

FaultyReadQueue::FaultyReadQueue(std::unique_ptr<ReadQueue> inner, const ReadFaults& faults)
    : inner_(std::move(inner)), faults_(faults), rng_(faults.seed) {}

absl::Status FaultyReadQueue::Submit(int fd, uint64_t offset, std::span<uint8_t> dest, uint64_t tag) {
  ++reads_;
  if (faults_.refuse_direct && (::fcntl(fd, F_GETFL) & O_DIRECT) != 0) {
    ++failed_;
    synthetic_.push_back({tag, -EINVAL});
    return absl::OkStatus();
  }
  if (!faults_.fail_path.empty()) {
    char path[4096] = {};
    const ssize_t n = ::readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), path, sizeof(path) - 1);
    if (n > 0 && absl::StrContains(path, faults_.fail_path) && matching_reads_++ >= faults_.fail_after) {
      ++failed_;
      synthetic_.push_back({tag, -int64_t{faults_.fail_errno}});
      return absl::OkStatus();
    }
  }
  return inner_->Submit(fd, offset, dest, tag);
}

absl::StatusOr<ReadQueue::Completion> FaultyReadQueue::Wait() {
  if (faults_.delay > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(faults_.delay));
  if (!synthetic_.empty()) {
    Completion c = synthetic_.front();
    synthetic_.pop_front();
    return c;
  }
  absl::StatusOr<Completion> c = inner_->Wait();
  if (!c.ok() || !faults_.short_reads || c->result <= 1) return c;
  // The bytes did arrive; claim fewer, so the caller reads the rest again.
  const uint64_t unit = faults_.page_multiples ? 4096 : 1;
  const uint64_t units = static_cast<uint64_t>(c->result) / unit;
  if (units < 2) return c;
  c->result = static_cast<int64_t>(std::uniform_int_distribution<uint64_t>(1, units - 1)(rng_) * unit);
  ++shortened_;
  return c;
}

}  // namespace octo::testing
