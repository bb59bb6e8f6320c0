// The staging ring's layout and its shared-memory segment: what octod and the
// loader rely on (alignment for O_DIRECT, owner-only access, one creator
// that removes the name, an attacher that refuses anything but a ring).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "gtest/gtest.h"
#include "storage/ring.h"
#include "storage/ring_format.h"
#include "tests/storage/loader_test_util.h"

namespace octo {
namespace {

using ::octo::testing::RingsOf;

bool SegmentExists(const std::string& name) { return ::access(Ring::DevShmPath(name).c_str(), F_OK) == 0; }

class RingTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(RingsOf(::getpid()).empty()) << "a ring was left in /dev/shm"; }
};

TEST(RingFormatTest, SlotDataIsPageAlignedAndFollowsTheDescriptors) {
  for (uint32_t slots : {1u, 2u, 8u, 9u, ring::kMaxRingSlots}) {
    const uint64_t data = ring::RingDataOffset(slots);
    EXPECT_EQ(data % ring::kRingPageBytes, 0u) << slots;
    EXPECT_GE(data, ring::kRingHeaderBytes + slots * sizeof(ring::SlotDescriptor)) << slots;
    EXPECT_LT(data - ring::kRingPageBytes, ring::kRingHeaderBytes + slots * sizeof(ring::SlotDescriptor)) << slots;
    EXPECT_EQ(ring::RingTotalBytes(slots, 3 * 4096), data + slots * 3 * 4096);
  }
  // The header fits its page; the message buffers stay NUL-terminable.
  EXPECT_LE(sizeof(ring::RingHeader), ring::kRingHeaderBytes);
  EXPECT_EQ(sizeof(ring::RingMessage::text), ring::kSlotMessageBytes);
  // The largest ring a hostile header may describe cannot overflow 64 bits.
  EXPECT_LT(ring::RingTotalBytes(ring::kMaxRingSlots, ring::kMaxSlotBytes), uint64_t{1} << 63);
}

TEST_F(RingTest, CreatorAndAttacherShareSlotsAndStates) {
  const std::string name = Ring::UniqueName();
  auto owner = Ring::Create(name, 3, 2 * 4096);
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto peer = Ring::Attach(name);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ((*peer)->slot_count(), 3u);
  EXPECT_EQ((*peer)->slot_bytes(), 2u * 4096);
  EXPECT_EQ((*peer)->header().octod_pid, ::getpid());
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*owner)->slot_data(i)) % 4096, 0u);
    EXPECT_EQ((*peer)->slot(i).state.load(), ring::kFree);
    std::memset((*owner)->slot_data(i), 'a' + i, 2 * 4096);
  }
  (*owner)->slot(1).layer = 7;
  (*owner)->slot(1).state.store(ring::kRequested, std::memory_order_release);
  EXPECT_EQ((*peer)->slot(1).state.load(std::memory_order_acquire), ring::kRequested);
  EXPECT_EQ((*peer)->slot(1).layer, 7u);
  // Slots do not overlap: each still holds its own letter at both ends.
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*peer)->slot_data(i)[0], 'a' + i);
    EXPECT_EQ((*peer)->slot_data(i)[2 * 4096 - 1], 'a' + i);
  }
}

TEST_F(RingTest, SegmentIsOwnerOnlyWhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  const std::string name = Ring::UniqueName();
  auto ring = Ring::Create(name, 1, 4096);
  ::umask(old_umask);
  ASSERT_TRUE(ring.ok()) << ring.status();
  struct stat st;
  ASSERT_EQ(::stat(Ring::DevShmPath(name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

TEST_F(RingTest, CreatorRemovesTheNameAttacherDoesNot) {
  const std::string name = Ring::UniqueName();
  auto owner = Ring::Create(name, 1, 4096);
  ASSERT_TRUE(owner.ok()) << owner.status();
  {
    auto peer = Ring::Attach(name);
    ASSERT_TRUE(peer.ok()) << peer.status();
  }
  EXPECT_TRUE(SegmentExists(name));
  owner->reset();
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_EQ(Ring::Attach(name).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RingTest, NamesAreUniqueAndNeverReused) {
  const std::string a = Ring::UniqueName();
  const std::string b = Ring::UniqueName();
  EXPECT_NE(a, b);
  auto ring = Ring::Create(a, 1, 4096);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(Ring::Create(a, 1, 4096).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(SegmentExists(a));  // the failed Create left the first one alone
}

TEST_F(RingTest, CreateRefusesBadGeometryAndNames) {
  const std::string name = Ring::UniqueName();
  EXPECT_EQ(Ring::Create(name, 0, 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create(name, ring::kMaxRingSlots + 1, 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create(name, 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create(name, 1, 4097).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create("no-slash", 1, 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create("/a/b", 1, 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SegmentExists(name));
}

// Each defect is written into a real segment, which Attach must refuse
// naming it, without reading past the segment.
TEST_F(RingTest, AttachRefusesAnythingButARing) {
  struct Case {
    const char* what;
    void (*corrupt)(ring::RingHeader&);
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"magic", [](ring::RingHeader& h) { h.magic[0] = 'X'; }, absl::StatusCode::kInvalidArgument, "bad magic"},
      {"version", [](ring::RingHeader& h) { h.version = 99; }, absl::StatusCode::kFailedPrecondition, "version 99"},
      {"slot count", [](ring::RingHeader& h) { h.slot_count = 3; }, absl::StatusCode::kInvalidArgument, "disagrees"},
      {"zero slots", [](ring::RingHeader& h) { h.slot_count = 0; }, absl::StatusCode::kInvalidArgument, "slot count"},
      {"huge slots", [](ring::RingHeader& h) { h.slot_bytes = uint64_t{1} << 62; }, absl::StatusCode::kInvalidArgument,
       "slot size"},
      {"data offset", [](ring::RingHeader& h) { h.data_offset = 4096; }, absl::StatusCode::kInvalidArgument,
       "disagrees"},
      {"descriptor size", [](ring::RingHeader& h) { h.descriptor_bytes = 8; }, absl::StatusCode::kInvalidArgument,
       "descriptors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string name = Ring::UniqueName();
    auto owner = Ring::Create(name, 2, 4096);
    ASSERT_TRUE(owner.ok());
    c.corrupt((*owner)->header());
    auto attached = Ring::Attach(name);
    EXPECT_EQ(attached.status().code(), c.code) << attached.status();
    EXPECT_NE(attached.status().message().find(c.message), absl::string_view::npos) << attached.status();
  }
}

TEST_F(RingTest, AttachRefusesATruncatedSegment) {
  const std::string name = Ring::UniqueName();
  auto owner = Ring::Create(name, 2, 4096);
  ASSERT_TRUE(owner.ok());
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096 * 2), 0);  // header page and descriptors only
  EXPECT_EQ(Ring::Attach(name).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(::ftruncate(fd, 100), 0);  // not even a header
  EXPECT_EQ(Ring::Attach(name).status().code(), absl::StatusCode::kInvalidArgument);
  ::close(fd);
}

TEST_F(RingTest, RemoveOrphansRemovesRingsOfDeadProcessesOnly) {
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Creates a ring, and when told, dies without its destructors (as under kill -9).
    auto ring = Ring::Create(Ring::UniqueName(), 1, 4096);
    char name[64] = {};
    if (ring.ok()) std::snprintf(name, sizeof(name), "%s", (*ring)->name().c_str());
    (void)::write(to_parent[1], name, sizeof(name));
    char go;
    (void)::read(to_child[0], &go, 1);
    ::_exit(0);
  }
  char name[64] = {};
  ASSERT_EQ(::read(to_parent[0], name, sizeof(name)), static_cast<ssize_t>(sizeof(name)));
  ASSERT_NE(name[0], '\0') << "the child could not create its ring";
  Ring::RemoveOrphans();  // while its creator lives, a sweep leaves it alone
  EXPECT_TRUE(SegmentExists(name));
  ASSERT_EQ(::write(to_child[1], "x", 1), 1);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // its ring is left behind

  auto mine = Ring::Create(Ring::UniqueName(), 1, 4096);
  ASSERT_TRUE(mine.ok());
  Ring::RemoveOrphans();
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_TRUE(SegmentExists((*mine)->name()));  // a live process's ring stays
}

}  // namespace
}  // namespace octo
