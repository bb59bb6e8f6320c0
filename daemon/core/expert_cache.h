// ExpertCache: the experts of two-phase MoE layers that stay in memory
// between passes, so a hot expert is read from disk once rather than every
// pass (a decode step of a 128-expert model routes to the same few experts
// again and again).
//
// Policy: every routed use of (layer, expert) counts (LFU, counted per
// layer's expert). An expert read from disk is admitted while there is room;
// when full, it replaces the entry with the fewest uses, the least recently
// used among equals (LRU), if it has at least as many uses itself. So the
// cache converges on each layer's most used experts and, among equals,
// follows the recent ones.
//
// Memory: entries are whole expert blocks (storage/FORMAT.md); the bytes
// held never exceed the capacity, which comes out of the layer budget
// (residency_plan.h). Resize frees before it is below its holding.
//
// Threading: one thread uses it (the scheduler's); stats() is a copy for
// the reports, taken under the owner's lock.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "daemon/engine/aligned_buffer.h"

namespace octo {

struct ExpertCacheStats {
  uint64_t capacity_bytes = 0, held_bytes = 0;
  uint32_t entries = 0;
  uint64_t hits = 0;    // routed experts found here
  uint64_t misses = 0;  // routed experts that had to come from disk
  uint64_t evictions = 0;
};

class ExpertCache {
 public:
  explicit ExpertCache(uint64_t capacity_bytes = 0) { stats_.capacity_bytes = capacity_bytes; }

  // Shrinks (evicting the least used first) or grows the capacity.
  void Resize(uint64_t capacity_bytes);
  // Forgets everything (a new model, or the layer files changed).
  void Clear();

  // A routed use of (layer, expert): counted, and its block if cached
  // (nullptr otherwise). Counts a hit or a miss.
  const uint8_t* Use(uint32_t layer, uint32_t expert);
  // Whether it is cached, and its block, without counting a use.
  bool Contains(uint32_t layer, uint32_t expert) const { return entries_.count({layer, expert}) > 0; }
  const uint8_t* Peek(uint32_t layer, uint32_t expert) const {
    auto it = entries_.find({layer, expert});
    return it == entries_.end() ? nullptr : it->second.bytes.data();
  }
  // A block just read from disk for a routed use: kept if the policy
  // admits it (a copy of `size` bytes). True when kept.
  bool Offer(uint32_t layer, uint32_t expert, const uint8_t* bytes, uint64_t size);

  const ExpertCacheStats& stats() const { return stats_; }

 private:
  using Key = std::pair<uint32_t, uint32_t>;  // (layer, expert)
  struct Entry {
    AlignedBuffer bytes;
    uint64_t last_use = 0;
  };
  struct Counts {
    uint64_t uses = 0;
    uint64_t last_use = 0;
  };

  // The entry the policy would give up first: fewest uses, then least recent.
  std::map<Key, Entry>::iterator Victim();
  void Evict(std::map<Key, Entry>::iterator it);

  std::map<Key, Entry> entries_;
  std::map<Key, Counts> counts_;
  uint64_t clock_ = 0;
  ExpertCacheStats stats_;
};

}  // namespace octo
