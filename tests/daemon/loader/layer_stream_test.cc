// LayerStream end to end: real octo-loader processes, real shared memory,
// real files. Every layer handed out is compared byte for byte with its
// file; every test checks that no ring is left in /dev/shm.
#include "daemon/loader/layer_stream.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/loader/loader_process.h"
#include "daemon/loader/stop_signal.h"
#include "gtest/gtest.h"
#include "storage/ring.h"
#include "tests/long_tests.h"
#include "tests/storage/loader_test_util.h"
#include "tests/temp_dir.h"

namespace octo {
namespace {

namespace fs = std::filesystem;
using ::octo::testing::RingsOf;
using ::octo::testing::TempDir;

constexpr uint32_t kLayers = 6;

class LayerStreamTest : public ::octo::testing::LayerDirTest<kLayers> {
 protected:

  static LayerStreamOptions Options(uint32_t slots, const std::string& model_dir = "") {
    LayerStreamOptions o;
    o.loader_path = OCTO_LOADER_PATH;
    o.model_dir = model_dir.empty() ? tmp_->Path("model") : model_dir;
    o.slots = slots;
    o.slot_bytes = ::octo::testing::LargestLayerFile(*manifest_);
    o.queue_depth = 4;
    o.loader_args = {"--chunk-kib", "64"};  // a layer file is ~20 reads
    return o;
  }

  // A copy of the model directory to damage.
  static std::string CopyModel(TempDir& dir) {
    const std::string copy = dir.Path("model");
    fs::copy(tmp_->Path("model"), copy);
    return copy;
  }

  // Acquires `layer`, checks its bytes against the file, releases it.
  static void ExpectLayer(LayerStream& stream, uint32_t layer) {
    absl::StatusOr<StreamedLayer> got = stream.Acquire(layer);
    ASSERT_TRUE(got.ok()) << "layer " << layer << ": " << got.status();
    const std::vector<uint8_t>& want = (*files_)[layer];
    ASSERT_EQ(got->size, want.size()) << "layer " << layer;
    EXPECT_EQ(std::memcmp(got->data, want.data(), want.size()), 0) << "layer " << layer;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got->data) % 4096, 0u);
    stream.Release(layer);
  }

};

TEST_F(LayerStreamTest, CyclicOrderGivesEachFilesBytesWithOneTwoAndThreeSlots) {
  for (uint32_t slots : {1u, 2u, 3u}) {
    SCOPED_TRACE(absl::StrCat(slots, " slots"));
    auto stream = LayerStream::Start(Options(slots));
    ASSERT_TRUE(stream.ok()) << stream.status();
    const std::vector<uint32_t> order = {1, 2, 3, 4, 5};  // layer 0 resident, say
    (*stream)->SetOrder(order);
    for (int cycle = 0; cycle < 4; ++cycle) {
      for (uint32_t layer : order) ExpectLayer(**stream, layer);
    }
    LoaderStats stats = (*stream)->stats();
    EXPECT_TRUE(stats.running);
    EXPECT_GT(stats.pid, 0);
    EXPECT_EQ(stats.restarts, 0u);
    EXPECT_EQ(stats.checksum_failures, 0u);
    uint64_t cycle_bytes = 0;
    for (uint32_t layer : order) cycle_bytes += (*files_)[layer].size();
    // Four cycles read, and at most the prefetched slots beyond them.
    EXPECT_GE(stats.bytes_read, 4 * cycle_bytes);
    EXPECT_LE(stats.bytes_read, 4 * cycle_bytes + slots * ::octo::testing::LargestLayerFile(*manifest_));
    EXPECT_GT(stats.read_seconds, 0);
    EXPECT_TRUE(stats.io_mode.rfind("io_uring+", 0) == 0 || stats.io_mode.rfind("threads+", 0) == 0) << stats.io_mode;
    const int pid = stats.pid;
    stream->reset();
    EXPECT_NE(::kill(pid, 0), 0) << "the loader outlived its stream";
  }
}

TEST_F(LayerStreamTest, PrefetchedLayerIsReadyAndHoldingTwoSlotsWorks) {
  auto stream = LayerStream::Start(Options(2));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2});
  auto first = (*stream)->Acquire(0);
  ASSERT_TRUE(first.ok()) << first.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // "compute" while layer 1 is read
  auto second = (*stream)->Acquire(1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_LT(second->wait_seconds, 0.05) << "layer 1 was not read while layer 0 was held";
  EXPECT_GT(second->load_seconds, 0);
  EXPECT_EQ(std::memcmp(first->data, (*files_)[0].data(), first->size), 0);  // still valid: not released
  EXPECT_EQ(std::memcmp(second->data, (*files_)[1].data(), second->size), 0);
  // Both slots held: a third Acquire cannot be served and says so.
  EXPECT_EQ((*stream)->Acquire(2).status().code(), absl::StatusCode::kFailedPrecondition);
  (*stream)->Release(0);
  (*stream)->Release(1);
  ExpectLayer(**stream, 2);
  ExpectLayer(**stream, 0);
}

TEST_F(LayerStreamTest, OutOfOrderAcquireRestartsTheCycle) {
  for (uint32_t slots : {1u, 3u}) {
    SCOPED_TRACE(absl::StrCat(slots, " slots"));
    auto stream = LayerStream::Start(Options(slots));
    ASSERT_TRUE(stream.ok()) << stream.status();
    (*stream)->SetOrder({0, 1, 2, 3, 4, 5});
    ExpectLayer(**stream, 0);
    ExpectLayer(**stream, 1);
    ExpectLayer(**stream, 2);
    // A failed pass starts over at the first layer ...
    for (uint32_t layer : {0, 1, 2, 3, 4, 5}) ExpectLayer(**stream, layer);
    // ... or jumps ahead; either way the next layers follow in order.
    ExpectLayer(**stream, 0);
    ExpectLayer(**stream, 4);
    ExpectLayer(**stream, 5);
    ExpectLayer(**stream, 0);
    ExpectLayer(**stream, 3);
    EXPECT_EQ((*stream)->Acquire(99).status().code(), absl::StatusCode::kInvalidArgument);
    ExpectLayer(**stream, 4);
  }
}

TEST_F(LayerStreamTest, SetOrderDropsWhatWasLoadedAndFollowsTheNewOrder) {
  auto stream = LayerStream::Start(Options(3));
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->Acquire(0).status().code(), absl::StatusCode::kFailedPrecondition);  // no order yet
  (*stream)->SetOrder({0, 1, 2});
  ExpectLayer(**stream, 0);
  (*stream)->SetOrder({5, 3, 1});
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (uint32_t layer : {5, 3, 1}) ExpectLayer(**stream, layer);
  }
  EXPECT_EQ((*stream)->Acquire(0).status().code(), absl::StatusCode::kInvalidArgument);  // no longer streamed
  (*stream)->SetOrder({});
  EXPECT_EQ((*stream)->Acquire(5).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(LayerStreamTest, CorruptedLayerIsDataLossNamingTheFileAndLaterLayersStillWork) {
  TempDir dir;
  const std::string model = CopyModel(dir);
  {
    std::fstream f(model + "/layer_003.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5000);
    const char c = static_cast<char>(f.get() ^ 0x01);
    f.seekp(5000);
    f.put(c);
  }
  auto stream = LayerStream::Start(Options(2, model));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2, 3, 4, 5});
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (uint32_t layer : {0, 1, 2}) ExpectLayer(**stream, layer);
    absl::StatusOr<StreamedLayer> bad = (*stream)->Acquire(3);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(bad.status().message().find("layer_003.bin"), absl::string_view::npos) << bad.status();
    EXPECT_NE(bad.status().message().find("checksum"), absl::string_view::npos) << bad.status();
    for (uint32_t layer : {4, 5}) ExpectLayer(**stream, layer);
  }
  EXPECT_EQ((*stream)->stats().checksum_failures, 2u);  // read again in the second cycle, failed again
  EXPECT_EQ((*stream)->stats().restarts, 0u);
}

TEST_F(LayerStreamTest, MissingShortAndOversizedFilesFailTheirAcquireOnly) {
  TempDir dir;
  const std::string model = CopyModel(dir);
  fs::remove(model + "/layer_001.bin");
  fs::resize_file(model + "/layer_004.bin", (*files_)[4].size() / 2);
  auto stream = LayerStream::Start(Options(2, model));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2, 3, 4, 5, 77});
  ExpectLayer(**stream, 0);
  absl::StatusOr<StreamedLayer> missing = (*stream)->Acquire(1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("layer_001.bin"), absl::string_view::npos) << missing.status();
  ExpectLayer(**stream, 2);
  ExpectLayer(**stream, 3);
  absl::StatusOr<StreamedLayer> short_file = (*stream)->Acquire(4);
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(short_file.status().message().find("layer_004.bin is"), absl::string_view::npos) << short_file.status();
  ExpectLayer(**stream, 5);
  // A layer the model does not have: a clean error, and the stream goes on.
  absl::StatusOr<StreamedLayer> out_of_range = (*stream)->Acquire(77);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("layer 77 is not in the model"), absl::string_view::npos);
  ExpectLayer(**stream, 0);

  // A slot smaller than the files: every Acquire says so.
  LayerStreamOptions small = Options(1);
  small.slot_bytes = 8192;
  auto cramped = LayerStream::Start(small);
  ASSERT_TRUE(cramped.ok()) << cramped.status();
  (*cramped)->SetOrder({2});
  absl::StatusOr<StreamedLayer> too_big = (*cramped)->Acquire(2);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("ring slot holds 8192"), absl::string_view::npos) << too_big.status();
  EXPECT_EQ((*cramped)->stats().restarts, 0u);
}

// kill -9 of the loader at random moments (mid-read, idle, between files)
// while the forward pass streams: every byte handed out is still right.
// 5 kills in CI, 15 in the long form (OCTO_LONG_TESTS).
TEST_F(LayerStreamTest, LoaderKilledAtRandomPointsIsRestartedAndBytesStayRight) {
  LayerStreamOptions options = Options(2);
  options.max_restarts = 1000;
  options.queue_depth = 2;
  options.loader_args = {"--chunk-kib", "16"};  // longer reads: more kills land mid-file
  auto stream = LayerStream::Start(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<uint32_t> order = {0, 1, 2, 3, 4, 5};
  (*stream)->SetOrder(order);

  std::atomic<bool> done{false};
  std::atomic<uint32_t> kills{0};
  const uint32_t wanted = ::octo::testing::LongTests() ? 15 : 5;
  std::thread killer([&] {
    std::mt19937 rng(12345);
    int last = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (kills < wanted && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
      const LoaderStats s = (*stream)->stats();
      // Only a loader the stream has published, and each one once: the
      // stream reaps it, so its pid is never one of someone else's.
      if (s.pid != last && s.running && ::kill(s.pid, SIGKILL) == 0) {
        last = s.pid;
        ++kills;
      }
    }
    done = true;
  });
  int cycles = 0;
  while (!done || cycles < 2) {
    for (uint32_t layer : order) ExpectLayer(**stream, layer);
    if (done) ++cycles;  // full cycles after the last kill: its death is noticed
    if (::testing::Test::HasFailure()) break;
  }
  killer.join();
  for (uint32_t layer : order) ExpectLayer(**stream, layer);
  const LoaderStats stats = (*stream)->stats();
  EXPECT_EQ(kills.load(), wanted);
  EXPECT_EQ(stats.restarts, kills.load());
  EXPECT_TRUE(stats.running);
}

TEST_F(LayerStreamTest, TooManyLoaderDeathsAreUnavailable) {
  LayerStreamOptions options = Options(1);
  options.max_restarts = 2;
  options.restart_window = absl::Seconds(60);
  auto stream = LayerStream::Start(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2});
  uint32_t layer = 0;
  for (int death = 1; death <= 3; ++death) {
    ASSERT_EQ(::kill((*stream)->stats().pid, SIGKILL), 0);
    // Skip the layer the one slot was prefetching: this Acquire needs a read
    // from the (dead) loader.
    layer = (layer + 2) % 3;
    absl::StatusOr<StreamedLayer> got = (*stream)->Acquire(layer);
    if (death <= 2) {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(std::memcmp(got->data, (*files_)[layer].data(), got->size), 0);
      (*stream)->Release(layer);
      EXPECT_EQ((*stream)->stats().restarts, static_cast<uint32_t>(death));
    } else {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
      EXPECT_NE(got.status().message().find("giving up"), absl::string_view::npos) << got.status();
    }
  }
  EXPECT_EQ((*stream)->Acquire(0).status().code(), absl::StatusCode::kUnavailable);  // for good
  EXPECT_FALSE((*stream)->stats().running);
}

// A loader that is alive but makes no progress (SIGSTOP: a stalled disk, an
// NFS hang) is killed after the stall timeout and replaced; the reads are
// issued again and the bytes stay right.
TEST_F(LayerStreamTest, StoppedLoaderIsKilledRestartedAndBytesStayRight) {
  LayerStreamOptions options = Options(2);
  options.stall_timeout = absl::Milliseconds(500);
  auto stream = LayerStream::Start(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<uint32_t> order = {0, 1, 2, 3, 4, 5};
  (*stream)->SetOrder(order);
  const int stopped = (*stream)->stats().pid;
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (uint32_t layer : order) ExpectLayer(**stream, layer);
  }
  const LoaderStats stats = (*stream)->stats();
  EXPECT_EQ(stats.stalls, 1u);
  EXPECT_EQ(stats.restarts, 1u);
  EXPECT_NE(stats.pid, stopped);
  EXPECT_NE(::kill(stopped, 0), 0) << "the stopped loader was reaped";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Every new loader hangs too: the third stall of one wait fails it,
// UNAVAILABLE naming the file and the seconds; once the disk is back, the
// next wait succeeds (the stream is not given up for good).
TEST_F(LayerStreamTest, AWaitThatKeepsStallingIsUnavailableNamingTheFile) {
  LayerStreamOptions options = Options(1);
  options.stall_timeout = absl::Milliseconds(300);
  // Reads of 5 ms (100 ms a file): a new loader is stopped before it finishes one.
  options.loader_path = OCTO_FAULTY_LOADER_PATH;
  options.loader_args = {"--chunk-kib", "64", "--delay-ms", "5"};
  auto stream = LayerStream::Start(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::atomic<bool> hang{true};
  std::thread stopper([&] {
    int last = 0;
    while (hang) {
      const LoaderStats s = (*stream)->stats();
      if (s.running && s.pid != last && ::kill(s.pid, SIGSTOP) == 0) last = s.pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::kill(last, SIGCONT);  // the disk is back
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first loader is stopped
  (*stream)->SetOrder({3, 4});
  absl::StatusOr<StreamedLayer> got = (*stream)->Acquire(3);
  hang = false;
  stopper.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find("layer_003.bin: octo-loader made no progress"), absl::string_view::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("3 times in a row"), absl::string_view::npos) << got.status();
  EXPECT_EQ((*stream)->stats().stalls, kMaxLoaderStalls);
  ExpectLayer(**stream, 3);
  ExpectLayer(**stream, 4);
}

// octod stopping raises the stop signal: a wait on a hung loader ends at
// once instead of waiting out the stall timeout.
TEST_F(LayerStreamTest, TheStopSignalEndsAWaitOnAHungLoader) {
  LayerStreamOptions options = Options(1);
  options.stall_timeout = absl::Seconds(60);
  options.stop = StopSignal::Create();
  auto stream = LayerStream::Start(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_EQ(::kill((*stream)->stats().pid, SIGSTOP), 0);
  (*stream)->SetOrder({2, 3});
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    options.stop->Raise();
  });
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<StreamedLayer> got = (*stream)->Acquire(2);
  stop.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const auto stopping = std::chrono::steady_clock::now();
  stream->reset();  // stops the stopped loader: kStop unanswered, then SIGKILL
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, absl::ToChronoMilliseconds(kLoaderStopGrace) + std::chrono::seconds(1));
}

TEST_F(LayerStreamTest, StartRefusesBadOptionsAndReportsALoaderThatCannotStart) {
  LayerStreamOptions bad = Options(0);
  EXPECT_EQ(LayerStream::Start(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options(2);
  bad.slot_bytes = 0;
  EXPECT_EQ(LayerStream::Start(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options(2);
  bad.queue_depth = 0;
  EXPECT_EQ(LayerStream::Start(bad).status().code(), absl::StatusCode::kInvalidArgument);

  LayerStreamOptions no_loader = Options(2);
  no_loader.loader_path = tmp_->Path("no-such-loader");
  absl::StatusOr<std::unique_ptr<LayerStream>> s = LayerStream::Start(no_loader);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("no-such-loader"), absl::string_view::npos) << s.status();

  s = LayerStream::Start(Options(2, tmp_->Path("no-model")));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("manifest.json"), absl::string_view::npos) << s.status();
  // TearDown checks that the failed starts removed their rings.
}

// --- Faults injected into the loader's reads (octo-loader-faulty) ---------------

LayerStreamOptions Faulty(LayerStreamOptions options, std::vector<std::string> faults) {
  options.loader_path = OCTO_FAULTY_LOADER_PATH;
  options.loader_args.insert(options.loader_args.end(), faults.begin(), faults.end());
  return options;
}

TEST_F(LayerStreamTest, ShortAndSlowReadsStillGiveTheFilesBytes) {
  const std::vector<std::vector<std::string>> fault_sets = {
      {"--short-reads"},
      {"--short-reads", "--page-multiples", "false", "--seed", "9"},
      {"--delay-ms", "2"},
  };
  for (const auto& faults : fault_sets) {
    SCOPED_TRACE(absl::StrJoin(faults, " "));
    auto stream = LayerStream::Start(Faulty(Options(2), faults));
    ASSERT_TRUE(stream.ok()) << stream.status();
    (*stream)->SetOrder({0, 1, 2, 3, 4, 5});
    for (int cycle = 0; cycle < 2; ++cycle) {
      for (uint32_t layer = 0; layer < kLayers; ++layer) ExpectLayer(**stream, layer);
    }
    EXPECT_EQ((*stream)->stats().restarts, 0u);
  }
}

TEST_F(LayerStreamTest, SlowReadsShowInLoadAndWaitTimes) {
  auto stream = LayerStream::Start(Faulty(Options(1), {"--delay-ms", "5"}));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({2, 3});
  absl::StatusOr<StreamedLayer> got = (*stream)->Acquire(2);
  ASSERT_TRUE(got.ok()) << got.status();
  // ~20 reads of 64 KiB two... four at a time, each completion 5 ms late.
  EXPECT_GT(got->load_seconds, 0.02);
  EXPECT_GT(got->wait_seconds, 0.02);
  (*stream)->Release(2);
}

TEST_F(LayerStreamTest, ReadErrorsFailTheirLayerNamingTheFile) {
  auto stream = LayerStream::Start(Faulty(Options(2), {"--fail-path", "layer_002.bin", "--fail-after", "3"}));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2, 3});
  for (int cycle = 0; cycle < 2; ++cycle) {
    ExpectLayer(**stream, 0);
    ExpectLayer(**stream, 1);
    absl::StatusOr<StreamedLayer> failed = (*stream)->Acquire(2);
    EXPECT_FALSE(failed.ok());
    EXPECT_NE(failed.status().message().find("layer_002.bin"), absl::string_view::npos) << failed.status();
    EXPECT_NE(failed.status().message().find("Input/output error"), absl::string_view::npos) << failed.status();
    ExpectLayer(**stream, 3);
  }
  EXPECT_EQ((*stream)->stats().restarts, 0u);
  EXPECT_EQ((*stream)->stats().checksum_failures, 0u);
}

TEST_F(LayerStreamTest, AFileSystemWithoutDirectIoIsReadThroughTheCache) {
  auto stream = LayerStream::Start(Faulty(Options(2), {"--refuse-direct"}));
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*stream)->SetOrder({0, 1, 2});
  for (uint32_t layer : {0, 1, 2}) ExpectLayer(**stream, layer);
  EXPECT_NE((*stream)->stats().io_mode.find("+buffered"), std::string::npos) << (*stream)->stats().io_mode;

  // Asked for: direct_io = false, with the real loader.
  LayerStreamOptions cached = Options(2);
  cached.direct_io = false;
  auto through_cache = LayerStream::Start(cached);
  ASSERT_TRUE(through_cache.ok()) << through_cache.status();
  EXPECT_NE((*through_cache)->stats().io_mode.find("+buffered"), std::string::npos);
  (*through_cache)->SetOrder({3, 4});
  for (uint32_t layer : {3, 4, 3}) ExpectLayer(**through_cache, layer);
}

// --- octod's death -------------------------------------------------------------

// kill -9 of the process that owns the stream (octod), at random points of
// its streaming: its loader must exit and the segment must go, within about
// a second. This process becomes a subreaper, so the orphaned loader is
// reparented here and its exit can be seen (and reaped).
TEST_F(LayerStreamTest, OctodKilledLeavesNoLoaderAndNoSegment) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  std::mt19937 rng(777);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    int report[2];
    ASSERT_EQ(::pipe(report), 0);
    const pid_t octod = ::fork();
    ASSERT_GE(octod, 0);
    if (octod == 0) {
      ::close(report[0]);
      auto stream = LayerStream::Start(Options(2));
      if (!stream.ok()) ::_exit(3);
      (*stream)->SetOrder({0, 1, 2, 3, 4, 5});
      const int loader = (*stream)->stats().pid;
      (void)::write(report[1], &loader, sizeof(loader));
      ::close(report[1]);
      for (uint32_t i = 0;; ++i) {  // stream until killed
        auto got = (*stream)->Acquire(i % kLayers);
        if (!got.ok()) ::_exit(4);
        (*stream)->Release(i % kLayers);
      }
    }
    ::close(report[1]);
    int loader = 0;
    ASSERT_EQ(::read(report[0], &loader, sizeof(loader)), static_cast<ssize_t>(sizeof(loader)));
    ::close(report[0]);
    ASSERT_EQ(RingsOf(octod).size(), 1u);
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 30000)(rng)));
    ASSERT_EQ(::kill(octod, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(octod, &status, 0), octod);
    ASSERT_TRUE(WIFSIGNALED(status)) << "octod stopped on its own, status " << status;

    const auto killed = std::chrono::steady_clock::now();
    bool loader_gone = false;
    while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(3)) {
      if (::waitpid(loader, &status, WNOHANG) == loader) {
        loader_gone = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    EXPECT_TRUE(loader_gone) << "octo-loader " << loader << " outlived octod";
    EXPECT_LT(seconds, 1.5);
    EXPECT_TRUE(RingsOf(octod).empty()) << "octod's ring is still in /dev/shm";
    if (!loader_gone) {
      ::kill(loader, SIGKILL);
      ::waitpid(loader, nullptr, 0);
      for (const std::string& name : RingsOf(octod)) (void)Ring::Remove(name);
    }
  }
}

// The second line of defence: a process forked from octod (without exec)
// holds a copy of octod's end of the control socket, so the loader sees no
// end of file when octod dies. The parent-death signal still ends it.
TEST_F(LayerStreamTest, OctodKilledWhileAForkHoldsItsSocketStillEndsTheLoader) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t octod = ::fork();
  ASSERT_GE(octod, 0);
  if (octod == 0) {
    ::close(report[0]);
    auto stream = LayerStream::Start(Options(2));
    if (!stream.ok()) ::_exit(3);
    (*stream)->SetOrder({0, 1});
    const pid_t holder = ::fork();
    if (holder == 0) {
      while (true) ::pause();  // keeps every fd octod had
    }
    const int pids[2] = {(*stream)->stats().pid, holder};
    (void)::write(report[1], pids, sizeof(pids));
    while (true) ::pause();
  }
  ::close(report[1]);
  int pids[2] = {0, 0};
  ASSERT_EQ(::read(report[0], pids, sizeof(pids)), static_cast<ssize_t>(sizeof(pids)));
  ::close(report[0]);
  ASSERT_EQ(::kill(octod, SIGKILL), 0);
  ASSERT_EQ(::waitpid(octod, nullptr, 0), octod);
  const auto killed = std::chrono::steady_clock::now();
  bool loader_gone = false;
  while (!loader_gone && std::chrono::steady_clock::now() - killed < std::chrono::seconds(3)) {
    loader_gone = ::waitpid(pids[0], nullptr, WNOHANG) == pids[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(loader_gone);
  // Well under the loader's once-a-second check of its parent: the signal did it.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(), 0.5);
  EXPECT_TRUE(RingsOf(octod).empty());
  ::kill(pids[1], SIGKILL);
  ::waitpid(pids[1], nullptr, 0);
  if (!loader_gone) {
    ::kill(pids[0], SIGKILL);
    ::waitpid(pids[0], nullptr, 0);
    for (const std::string& name : RingsOf(octod)) (void)Ring::Remove(name);
  }
}

}  // namespace
}  // namespace octo
