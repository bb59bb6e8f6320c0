// Ring: one mapping of the staging ring's shared-memory segment (layout in
// storage/ring_format.h, protocol in storage/RING.md).
//
// octod Creates the segment (owner-only, mode 0600, a name no one else
// holds) and removes its name when its Ring is destroyed; the loader
// Attaches to it by name and only unmaps on destruction. Both sides keep
// the mapping for their whole life; the segment's memory is freed by the
// kernel once the name is removed and the last mapping is gone.
//
// Threading: the object itself is not synchronised (one owner); the shared
// memory is accessed through the atomics the protocol names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/ring_format.h"

namespace octo {

class Ring {
 public:
  // A fresh segment name for this process: "/octo-ring-<pid>-<counter>".
  static std::string UniqueName();

  // Creates segment `name` (POSIX shm name, leading '/'), sized for `slot_count`
  // slots of `slot_bytes` (a multiple of kRingPageBytes), header filled in, every
  // slot FREE. ALREADY_EXISTS if the name is taken, INVALID_ARGUMENT for bad
  // geometry, RESOURCE_EXHAUSTED / INTERNAL when the system refuses.
  static absl::StatusOr<std::unique_ptr<Ring>> Create(const std::string& name, uint32_t slot_count,
                                                       uint64_t slot_bytes);

  // Maps an existing segment and checks its header as hostile input: NOT_FOUND
  // if it does not exist; INVALID_ARGUMENT for a bad magic or a layout that
  // disagrees with the segment's size; FAILED_PRECONDITION for another version.
  static absl::StatusOr<std::unique_ptr<Ring>> Attach(const std::string& name);

  // Removes the name of segment `name`; OK if it is already gone.
  static absl::Status Remove(const std::string& name);

  // Removes "/octo-ring-<pid>-*" segments of this user whose creating process
  // no longer exists (left behind when both octod and its loader were killed
  // at once). Returns how many were removed. Best effort.
  static int RemoveOrphans();

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();  // unmaps; the creator also removes the name

  ring::RingHeader& header() const { return *reinterpret_cast<ring::RingHeader*>(base_); }
  ring::SlotDescriptor& slot(uint32_t i) const;
  uint8_t* slot_data(uint32_t i) const;
  uint32_t slot_count() const { return slot_count_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  const std::string& name() const { return name_; }
  // "/dev/shm/<name>": where Linux shows the segment.
  static std::string DevShmPath(const std::string& name);

 private:
  struct Mapping;
  Ring(std::unique_ptr<Mapping> mapping, std::string name, bool owner);

  std::unique_ptr<Mapping> mapping_;
  std::string name_;
  bool owner_ = false;
  uint8_t* base_ = nullptr;
  uint32_t slot_count_ = 0;
  uint64_t slot_bytes_ = 0;
};

}  // namespace octo
