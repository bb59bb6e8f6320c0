// octo-loader as a real process, driven by hand through the ring protocol
// (storage/RING.md): what it refuses at start, how it serves requests, and
// how it leaves when octod stops it or goes away.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"
#include "storage/ring.h"
#include "tests/storage/loader_test_util.h"
#include "tests/temp_dir.h"

namespace octo {
namespace {

using ::octo::testing::TempDir;

constexpr uint32_t kLayers = 3;

// A loader spawned by this process (so it accepts our rings), with our end
// of its control socket.
struct Loader {
  pid_t pid = -1;
  int fd = -1;

  static Loader Spawn(const std::string& ring, const std::string& model_dir) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    Loader loader;
    loader.pid = ::fork();
    if (loader.pid == 0) {
      ::dup2(fds[1], 3);  // clears close-on-exec on 3
      ::execl(OCTO_LOADER_PATH, OCTO_LOADER_PATH, "--ring", ring.c_str(), "--model-dir", model_dir.c_str(), "--fd",
              "3", "--queue-depth", "4", "--chunk-kib", "64", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    loader.fd = fds[0];
    return loader;
  }

  // The next message, or type 0 after `timeout_ms` or at end of file.
  ring::RingMessage Receive(int timeout_ms = 10000) const {
    ring::RingMessage m{};
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) == 1 && ::recv(fd, &m, sizeof(m), 0) <= 0) m.type = 0;
    return m;
  }

  void Send(ring::MessageType type) const {
    ring::RingMessage m{};
    m.type = type;
    ASSERT_EQ(::send(fd, &m, sizeof(m), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(m)));
  }

  // Exit status, or -1 if it has not exited within `timeout_ms`.
  int Wait(int timeout_ms = 5000) {
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  ~Loader() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (fd >= 0) ::close(fd);
  }
};

class LoaderProcessTest : public ::octo::testing::LayerDirTest<kLayers> {
 protected:

  static std::string ModelDir() { return tmp_->Path("model"); }
  static std::unique_ptr<Ring> MakeRing(uint32_t slots, uint64_t slot_bytes = 0) {
    auto ring = Ring::Create(Ring::UniqueName(), slots,
                             slot_bytes != 0 ? slot_bytes : ::octo::testing::LargestLayerFile(*manifest_));
    EXPECT_TRUE(ring.ok()) << ring.status();
    return ring.ok() ? std::move(ring).value() : nullptr;
  }
  static void Request(Ring& ring, uint32_t slot, uint32_t layer, uint64_t sequence) {
    ring.slot(slot).layer = layer;
    ring.slot(slot).sequence = sequence;
    ring.slot(slot).state.store(ring::kRequested, std::memory_order_release);
  }

};

TEST_F(LoaderProcessTest, RefusesARingWithABadMagicOrVersion) {
  struct Case {
    void (*corrupt)(ring::RingHeader&);
    const char* message;
  };
  for (const Case& c : {Case{[](ring::RingHeader& h) { h.magic[7] = '9'; }, "bad magic"},
                        Case{[](ring::RingHeader& h) { h.version = ring::kRingVersion + 1; }, "ring version 3"}}) {
    SCOPED_TRACE(c.message);
    std::unique_ptr<Ring> ring = MakeRing(1);
    c.corrupt(ring->header());
    Loader loader = Loader::Spawn(ring->name(), ModelDir());
    ring::RingMessage m = loader.Receive();
    EXPECT_EQ(m.type, ring::kStartFailed);
    EXPECT_NE(std::strstr(m.text, c.message), nullptr) << m.text;
    EXPECT_EQ(loader.Wait(), 2);
    EXPECT_EQ(ring->header().loader_pid.load(), 0);  // it never attached
    EXPECT_EQ(::access(Ring::DevShmPath(ring->name()).c_str(), F_OK), 0);  // and left octod's segment alone
  }
}

TEST_F(LoaderProcessTest, RefusesAMissingRingOrModel) {
  {
    Loader loader = Loader::Spawn("/octo-ring-no-such", ModelDir());
    EXPECT_EQ(loader.Receive().type, ring::kStartFailed);
    EXPECT_EQ(loader.Wait(), 2);
  }
  std::unique_ptr<Ring> ring = MakeRing(1);
  Loader loader = Loader::Spawn(ring->name(), tmp_->Path("no-model"));
  ring::RingMessage m = loader.Receive();
  EXPECT_EQ(m.type, ring::kStartFailed);
  EXPECT_NE(std::strstr(m.text, "manifest.json"), nullptr) << m.text;
  EXPECT_EQ(loader.Wait(), 2);
}

TEST_F(LoaderProcessTest, ServesRequestsLowestSequenceFirstAndFailsBadOnesCleanly) {
  std::unique_ptr<Ring> ring = MakeRing(3);
  Loader loader = Loader::Spawn(ring->name(), ModelDir());
  ring::RingMessage hello = loader.Receive();
  ASSERT_EQ(hello.type, ring::kHello) << hello.text;
  EXPECT_EQ(hello.value, loader.pid);
  EXPECT_EQ(ring->header().loader_pid.load(), loader.pid);
  EXPECT_GT(std::strlen(hello.text), 0u);  // the io mode

  Request(*ring, 0, 2, /*sequence=*/9);
  Request(*ring, 1, 99, /*sequence=*/7);  // no such layer
  Request(*ring, 2, 0, /*sequence=*/8);
  loader.Send(ring::kDoorbell);
  std::vector<uint32_t> completed;
  for (int i = 0; i < 3; ++i) {
    ring::RingMessage m = loader.Receive();
    ASSERT_EQ(m.type, ring::kCompleted);
    completed.push_back(m.slot);
  }
  EXPECT_EQ(completed, (std::vector<uint32_t>{1, 2, 0}));

  const ring::SlotDescriptor& bad = ring->slot(1);
  EXPECT_EQ(bad.state.load(std::memory_order_acquire), ring::kFailed);
  EXPECT_EQ(bad.status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(std::strstr(bad.message, "layer 99 is not in the model"), nullptr) << bad.message;
  for (auto [slot, layer] : {std::pair{0u, 2u}, std::pair{2u, 0u}}) {
    const ring::SlotDescriptor& d = ring->slot(slot);
    ASSERT_EQ(d.state.load(std::memory_order_acquire), ring::kReady) << d.message;
    ASSERT_EQ(d.bytes, (*files_)[layer].size());
    EXPECT_EQ(std::memcmp(ring->slot_data(slot), (*files_)[layer].data(), d.bytes), 0) << "layer " << layer;
    EXPECT_GT(d.load_nanos, 0u);
  }

  // Slots come back to the loader once octod frees them.
  ring->slot(1).state.store(ring::kFree, std::memory_order_release);
  Request(*ring, 1, 1, 10);
  loader.Send(ring::kDoorbell);
  EXPECT_EQ(loader.Receive().type, ring::kCompleted);
  ASSERT_EQ(ring->slot(1).state.load(std::memory_order_acquire), ring::kReady);
  EXPECT_EQ(std::memcmp(ring->slot_data(1), (*files_)[1].data(), (*files_)[1].size()), 0);

  // kStop: it leaves, and leaves the segment to its owner.
  loader.Send(ring::kStop);
  EXPECT_EQ(loader.Wait(), 0);
  EXPECT_EQ(::access(Ring::DevShmPath(ring->name()).c_str(), F_OK), 0);
}

TEST_F(LoaderProcessTest, AFileLargerThanASlotFails) {
  std::unique_ptr<Ring> ring = MakeRing(1, /*slot_bytes=*/4096);
  Loader loader = Loader::Spawn(ring->name(), ModelDir());
  ASSERT_EQ(loader.Receive().type, ring::kHello);
  Request(*ring, 0, 1, 1);
  loader.Send(ring::kDoorbell);
  EXPECT_EQ(loader.Receive().type, ring::kCompleted);
  const ring::SlotDescriptor& d = ring->slot(0);
  EXPECT_EQ(d.state.load(std::memory_order_acquire), ring::kFailed);
  EXPECT_EQ(d.status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(std::strstr(d.message, "layer_001.bin is"), nullptr) << d.message;
  EXPECT_NE(std::strstr(d.message, "a ring slot holds 4096"), nullptr) << d.message;
}

// What the loader sees when octod dies: its socket's end of file. It must
// remove the segment octod can no longer remove, and exit.
TEST_F(LoaderProcessTest, EndOfFileFromOctodRemovesTheSegmentAndExits) {
  std::unique_ptr<Ring> ring = MakeRing(2);
  const std::string name = ring->name();
  Loader loader = Loader::Spawn(name, ModelDir());
  ASSERT_EQ(loader.Receive().type, ring::kHello);
  Request(*ring, 0, 0, 1);
  loader.Send(ring::kDoorbell);
  ::close(loader.fd);
  loader.fd = -1;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(loader.Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_NE(::access(Ring::DevShmPath(name).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace octo
