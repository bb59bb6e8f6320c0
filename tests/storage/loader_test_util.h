// Helpers the loader tests share (tests/storage/loader_*, tests/daemon/loader):
// a small generated layer directory, the bytes of its files, the staging
// rings this process has in /dev/shm, and a ReadQueue that injects faults.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "storage/loader_read_queue.h"
#include "storage/manifest.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"

namespace octo::testing {

// A decomposed tiny llama (F16, `n_layers` layers of ~1.3 MB each) in
// `dir`. Returns its manifest; fails the test (ADD_FAILURE) on error.
Manifest MakeLayerDir(const std::string& dir, uint32_t n_layers);

// Every layer file's bytes, by layer index.
std::vector<std::vector<uint8_t>> ReadLayerFiles(const std::string& dir, const Manifest& manifest);

// The largest layer file.
uint64_t LargestLayerFile(const Manifest& manifest);

// Names ("/octo-ring-...") of the rings in /dev/shm created by process `pid`.
std::set<std::string> RingsOf(pid_t pid);

// What FaultyReadQueue does to the reads passing through it.
struct ReadFaults {
  bool short_reads = false;      // report fewer bytes than read (the caller must ask again)
  bool page_multiples = true;    // short counts in whole 4 KiB pages, as O_DIRECT short reads are
  absl::Duration delay = absl::ZeroDuration();  // added to every read
  std::string fail_path = "";    // reads of a file whose path contains this ...
  int fail_errno = 5;            // ... fail with this errno (EIO) ...
  uint32_t fail_after = 0;       // ... after this many good reads of such files
  bool refuse_direct = false;    // -EINVAL for every read through an O_DIRECT descriptor (tmpfs)
  uint64_t seed = 1;
};

// Wraps a real queue: reads really happen (the data arrives), then the
// completion is altered as `faults` says.
class FaultyReadQueue : public ReadQueue {
 public:
  FaultyReadQueue(std::unique_ptr<ReadQueue> inner, const ReadFaults& faults);

  const char* name() const override { return inner_->name(); }
  uint32_t depth() const override { return inner_->depth(); }
  absl::Status Submit(int fd, uint64_t offset, std::span<uint8_t> dest, uint64_t tag) override;
  absl::StatusOr<Completion> Wait() override;

  uint64_t reads() const { return reads_; }
  uint64_t shortened() const { return shortened_; }
  uint64_t failed() const { return failed_; }

 private:
  std::unique_ptr<ReadQueue> inner_;
  ReadFaults faults_;
  std::mt19937_64 rng_;
  std::deque<Completion> synthetic_;  // failures decided at Submit
  uint32_t matching_reads_ = 0;
  uint64_t reads_ = 0, shortened_ = 0, failed_ = 0;
};

// A fixture over one layer directory of n_layers layers at tmp_->Path("model"),
// made once per suite, with its files' bytes; each test must leave no ring
// of this process in /dev/shm.
template <uint32_t n_layers>
class LayerDirTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    manifest_ = new Manifest(MakeLayerDir(tmp_->Path("model"), n_layers));
    files_ = new std::vector<std::vector<uint8_t>>(ReadLayerFiles(tmp_->Path("model"), *manifest_));
  }
  static void TearDownTestSuite() {
    delete files_;
    delete manifest_;
    delete tmp_;
  }
  void TearDown() override { EXPECT_TRUE(RingsOf(::getpid()).empty()) << "a ring was left in /dev/shm"; }

  static inline TempDir* tmp_ = nullptr;
  static inline Manifest* manifest_ = nullptr;
  static inline std::vector<std::vector<uint8_t>>* files_ = nullptr;
};

}  // namespace octo::testing
