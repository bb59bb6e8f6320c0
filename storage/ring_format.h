// The staging ring: a shared-memory segment octod creates and the octo-loader
// process fills with layer files. storage/RING.md describes the protocol in
// prose (who writes what when, what survives either side dying); this header
// is its byte layout and constants. Change both together, and bump
// kRingVersion on any change the other side would notice.
//
// Layout (every offset from the start of the segment):
//
//   0                  RingHeader           (one page, kRingHeaderBytes)
//   kRingHeaderBytes   SlotDescriptor[slot_count]
//   data_offset        slot 0's data area   (slot_bytes, a multiple of 4096)
//   + slot_bytes       slot 1's data area ...
//
// data_offset = RingDataOffset(slot_count): the descriptors rounded up to a
// page. Every data area is 4 KiB aligned, so O_DIRECT reads (aligned
// buffer, offset and length) go straight into a slot.
//
// The two processes share this memory without any lock: a dead peer could
// hold a lock forever. Each slot's `state` is the only field both sides
// write, always with release stores (or a CAS) after the fields it
// publishes, and read with acquire loads. Both processes are built from
// this header, so the layout is the compiler's for x86-64/aarch64 Linux;
// the static_asserts below pin it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace octo::ring {

inline constexpr char kRingMagic[8] = {'O', 'C', 'T', 'O', 'R', 'N', 'G', '1'};
inline constexpr uint32_t kRingVersion = 2;

inline constexpr uint64_t kRingPageBytes = 4096;    // O_DIRECT alignment of slot data
inline constexpr uint64_t kRingHeaderBytes = 4096;  // the header's page
inline constexpr uint32_t kMaxRingSlots = 64;       // a hostile header cannot ask for more
inline constexpr uint64_t kMaxSlotBytes = 64ull << 30;  // 64 GiB: above any one layer file
inline constexpr size_t kSlotMessageBytes = 448;    // a slot's error message, NUL-terminated
inline constexpr size_t kIoModeBytes = 64;          // the loader's io mode, NUL-terminated

// A slot's state. Transitions (RING.md, "Slot states"):
//   octod:  FREE -> REQUESTED; READY/FAILED -> FREE;
//           LOADING -> REQUESTED only after the loader that set LOADING is dead and reaped
//   loader: REQUESTED -> LOADING (CAS); LOADING -> READY or FAILED
// The most experts a layer may have for per-expert requests (the request's
// bit mask); a model with more streams its MoE layers whole.
inline constexpr uint32_t kMaxRingExperts = 1024;

// What a request asks the loader to read into the slot. The slot is an image
// of the layer file: every part lands at its own file offset.
enum RequestPart : uint32_t {
  kWholeFile = 0,     // the whole file, against its file checksum
  kDensePart = 1,     // a format-2 MoE layer's dense part, against its dense checksum
  kExpertBlocks = 2,  // the expert blocks in `experts`, each against its own checksum
};

enum SlotState : uint32_t {
  kFree = 0,       // octod may write the descriptor and the data area
  kRequested = 1,  // octod asks for `layer`; the loader has not started
  kLoading = 2,    // the loader is reading into the data area
  kReady = 3,      // data area holds the file (`bytes` long), checksum verified
  kFailed = 4,     // `status_code` / `message` say why
};

// Page 0 of the segment. octod writes every field before the loader starts,
// except the loader_* fields, which each loader writes once it attached.
struct RingHeader {
  char magic[8];                      // kRingMagic
  uint32_t version;                   // kRingVersion
  uint32_t header_bytes;              // kRingHeaderBytes
  uint32_t slot_count;                // 1..kMaxRingSlots
  uint32_t descriptor_bytes;          // sizeof(SlotDescriptor)
  uint64_t slot_bytes;                // each data area, multiple of kRingPageBytes
  uint64_t data_offset;               // RingDataOffset(slot_count)
  uint64_t total_bytes;               // RingTotalBytes(slot_count, slot_bytes)
  int32_t octod_pid;                  // the creator; the loader's parent
  std::atomic<int32_t> loader_pid;    // the attached loader, 0 before one attaches
  std::atomic<uint32_t> loader_starts;  // how many loaders attached so far
  uint32_t reserved0;
};

// One per slot. octod owns every field but `state` while the slot is FREE,
// READY or FAILED; the loader owns them while it is LOADING.
struct SlotDescriptor {
  std::atomic<uint32_t> state;  // SlotState
  uint32_t layer;               // requested layer index (octod)
  uint64_t sequence;            // request number, increasing (octod); the loader serves the lowest first
  uint64_t bytes;               // bytes this request read (loader)
  uint64_t load_nanos;          // read + checksum time (loader)
  int32_t status_code;          // absl::StatusCode of a FAILED load (loader)
  uint32_t part;                // RequestPart (octod)
  char message[kSlotMessageBytes];  // FAILED: what went wrong, naming the file (loader)
  uint64_t experts[kMaxRingExperts / 64];  // kExpertBlocks: bit e asks for expert e's block (octod)
};

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free (address-free) to work across processes");
static_assert(sizeof(RingHeader) == 64 && offsetof(RingHeader, loader_pid) == 52);
static_assert(sizeof(SlotDescriptor) == 616 && offsetof(SlotDescriptor, message) == 40 &&
              offsetof(SlotDescriptor, experts) == 488);
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

inline constexpr uint64_t RoundUpToPage(uint64_t n) { return (n + kRingPageBytes - 1) / kRingPageBytes * kRingPageBytes; }
inline constexpr uint64_t RingDataOffset(uint32_t slot_count) {
  return RoundUpToPage(kRingHeaderBytes + uint64_t{slot_count} * sizeof(SlotDescriptor));
}
// Callers check slot_count <= kMaxRingSlots and slot_bytes <= kMaxSlotBytes
// first, so this cannot overflow.
inline constexpr uint64_t RingTotalBytes(uint32_t slot_count, uint64_t slot_bytes) {
  return RingDataOffset(slot_count) + uint64_t{slot_count} * slot_bytes;
}

// --- The control socket ------------------------------------------------------
// octod and the loader also share one AF_UNIX SOCK_SEQPACKET socket pair,
// created at spawn (the loader's end is its fd given by --fd). Messages are
// RingMessage records; shared memory stays the truth about each slot, a
// message only says "look again". End of file on the socket means the peer
// is gone.
enum MessageType : uint32_t {
  kHello = 1,       // loader -> octod: attached; `text` is the io mode, `value` the pid
  kStartFailed = 2,  // loader -> octod: could not start; `text` says why, `value` a StatusCode
  kDoorbell = 3,    // octod -> loader: slots were requested
  kCompleted = 4,   // loader -> octod: slot `slot` is READY or FAILED; `text` the io mode now
  kStop = 5,        // octod -> loader: exit now, leave the segment (octod removes it)
};

struct RingMessage {
  uint32_t type;     // MessageType
  uint32_t slot;
  int64_t value;
  char text[kSlotMessageBytes];
};
static_assert(sizeof(RingMessage) == 464);

}  // namespace octo::ring
