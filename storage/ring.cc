#include "storage/ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/interprocess/mapped_region.hpp"
#include "boost/interprocess/shared_memory_object.hpp"
#include "storage/file.h"

namespace octo {
namespace {

namespace bip = boost::interprocess;
using ring::RingHeader;
using ring::SlotDescriptor;

constexpr char kNamePrefix[] = "octo-ring-";

absl::Status BoostStatus(const bip::interprocess_exception& e, absl::string_view what, absl::string_view name) {
  if (e.get_native_error() != 0) return ErrnoStatus(e.get_native_error(), what, name);
  if (e.get_error_code() == bip::already_exists_error) {
    return absl::AlreadyExistsError(absl::StrCat(what, " ", name, ": already exists"));
  }
  if (e.get_error_code() == bip::not_found_error) {
    return absl::NotFoundError(absl::StrCat(what, " ", name, ": no such segment"));
  }
  return absl::InternalError(absl::StrCat(what, " ", name, ": ", e.what()));
}

absl::Status CheckName(const std::string& name) {
  if (name.size() < 2 || name.size() > 200 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory name '", name, "' must be '/' and 1..199 characters without '/'"));
  }
  return absl::OkStatus();
}

absl::Status CheckGeometry(uint32_t slot_count, uint64_t slot_bytes) {
  if (slot_count < 1 || slot_count > ring::kMaxRingSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring slot count ", slot_count, " is outside 1..", ring::kMaxRingSlots, " (kMaxRingSlots)"));
  }
  if (slot_bytes == 0 || slot_bytes % ring::kRingPageBytes != 0 || slot_bytes > ring::kMaxSlotBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ring slot size ", slot_bytes, " must be a non-zero multiple of ",
                                                   ring::kRingPageBytes, " up to ", ring::kMaxSlotBytes));
  }
  return absl::OkStatus();
}

// The header of an attached segment, checked field by field against the
// segment's real size before any offset in it is trusted.
absl::Status CheckHeader(const RingHeader& h, uint64_t segment_bytes) {
  if (std::memcmp(h.magic, ring::kRingMagic, sizeof(h.magic)) != 0) {
    return absl::InvalidArgumentError("not an Octo ring (bad magic)");
  }
  if (h.version != ring::kRingVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("ring version ", h.version, "; this build speaks version ", ring::kRingVersion));
  }
  if (h.header_bytes != ring::kRingHeaderBytes || h.descriptor_bytes != sizeof(SlotDescriptor)) {
    return absl::InvalidArgumentError(absl::StrCat("ring header says ", h.header_bytes, "-byte header and ",
                                                   h.descriptor_bytes, "-byte descriptors; expected ",
                                                   ring::kRingHeaderBytes, " and ", sizeof(SlotDescriptor)));
  }
  if (absl::Status s = CheckGeometry(h.slot_count, h.slot_bytes); !s.ok()) return s;
  const uint64_t total = ring::RingTotalBytes(h.slot_count, h.slot_bytes);
  if (h.data_offset != ring::RingDataOffset(h.slot_count) || h.total_bytes != total || total != segment_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("ring layout (", h.slot_count, " slots of ", h.slot_bytes,
                                                   " bytes, data at ", h.data_offset, ", ", h.total_bytes,
                                                   " in all) disagrees with the segment's ", segment_bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

struct Ring::Mapping {
  bip::mapped_region region;
};

std::string Ring::UniqueName() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("/", kNamePrefix, ::getpid(), "-", counter.fetch_add(1));
}

std::string Ring::DevShmPath(const std::string& name) { return "/dev/shm" + name; }

Ring::Ring(std::unique_ptr<Mapping> mapping, std::string name, bool owner)
    : mapping_(std::move(mapping)), name_(std::move(name)), owner_(owner) {
  base_ = static_cast<uint8_t*>(mapping_->region.get_address());
  slot_count_ = header().slot_count;
  slot_bytes_ = header().slot_bytes;
}

Ring::~Ring() {
  mapping_.reset();
  if (owner_) (void)Remove(name_);
}

ring::SlotDescriptor& Ring::slot(uint32_t i) const {
  return *reinterpret_cast<SlotDescriptor*>(base_ + ring::kRingHeaderBytes + uint64_t{i} * sizeof(SlotDescriptor));
}

uint8_t* Ring::slot_data(uint32_t i) const { return base_ + ring::RingDataOffset(slot_count_) + uint64_t{i} * slot_bytes_; }

absl::StatusOr<std::unique_ptr<Ring>> Ring::Create(const std::string& name, uint32_t slot_count, uint64_t slot_bytes) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  if (absl::Status s = CheckGeometry(slot_count, slot_bytes); !s.ok()) return s;
  const uint64_t total = ring::RingTotalBytes(slot_count, slot_bytes);
  auto mapping = std::make_unique<Mapping>();
  try {
    bip::permissions owner_only(0600);
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, owner_only);
    // Reserve the memory now: a tmpfs that runs out later would SIGBUS a
    // write into the mapping instead of failing here with a Status.
    const int fd = shm.get_mapping_handle().handle;
    if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total)); err != 0) {
      bip::shared_memory_object::remove(name.c_str());
      return ErrnoStatus(err, absl::StrCat("cannot reserve ", total, " bytes for shared memory"), name);
    }
    mapping->region = bip::mapped_region(shm, bip::read_write, 0, total);
  } catch (const bip::interprocess_exception& e) {
    // create_only failed before the name was ours, or mapping failed after it.
    if (e.get_error_code() != bip::already_exists_error) bip::shared_memory_object::remove(name.c_str());
    return BoostStatus(e, "cannot create shared memory", name);
  }
  // The segment reads as zero (every slot FREE, no loader); fill in the header.
  auto* h = new (mapping->region.get_address()) RingHeader{};
  std::memcpy(h->magic, ring::kRingMagic, sizeof(h->magic));
  h->version = ring::kRingVersion;
  h->header_bytes = ring::kRingHeaderBytes;
  h->slot_count = slot_count;
  h->descriptor_bytes = sizeof(SlotDescriptor);
  h->slot_bytes = slot_bytes;
  h->data_offset = ring::RingDataOffset(slot_count);
  h->total_bytes = total;
  h->octod_pid = ::getpid();
  std::unique_ptr<Ring> ring(new Ring(std::move(mapping), name, /*owner=*/true));
  for (uint32_t i = 0; i < slot_count; ++i) new (&ring->slot(i)) SlotDescriptor{};
  return ring;
}

absl::StatusOr<std::unique_ptr<Ring>> Ring::Attach(const std::string& name) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  auto mapping = std::make_unique<Mapping>();
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    bip::offset_t size = 0;
    if (!shm.get_size(size) || size < static_cast<bip::offset_t>(ring::kRingHeaderBytes)) {
      return absl::InvalidArgumentError(absl::StrCat("shared memory ", name, " is ", size,
                                                     " bytes, too small for a ring header"));
    }
    mapping->region = bip::mapped_region(shm, bip::read_write, 0, static_cast<size_t>(size));
  } catch (const bip::interprocess_exception& e) {
    return BoostStatus(e, "cannot attach shared memory", name);
  }
  const auto& h = *static_cast<const RingHeader*>(mapping->region.get_address());
  if (absl::Status s = CheckHeader(h, mapping->region.get_size()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("shared memory ", name, ": ", s.message()));
  }
  return std::unique_ptr<Ring>(new Ring(std::move(mapping), name, /*owner=*/false));
}

absl::Status Ring::Remove(const std::string& name) {
  if (::shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, "cannot remove shared memory", name);
  }
  return absl::OkStatus();
}

int Ring::RemoveOrphans() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    absl::string_view file = entry->d_name;
    if (!absl::ConsumePrefix(&file, kNamePrefix)) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(file, '-');
    int pid = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) continue;
    struct stat st;
    const std::string name = absl::StrCat("/", entry->d_name);
    if (::stat(DevShmPath(name).c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    // A live process of that pid (ours, or one that reused it) keeps its rings.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (::shm_unlink(name.c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace octo
