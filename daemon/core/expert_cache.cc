#include "daemon/core/expert_cache.h"

#include <cstring>

namespace octo {

void ExpertCache::Resize(uint64_t capacity_bytes) {
  stats_.capacity_bytes = capacity_bytes;
  while (stats_.held_bytes > capacity_bytes && !entries_.empty()) Evict(Victim());
}

void ExpertCache::Clear() {
  entries_.clear();
  counts_.clear();
  stats_.held_bytes = 0;
  stats_.entries = 0;
}

const uint8_t* ExpertCache::Use(uint32_t layer, uint32_t expert) {
  const Key key{layer, expert};
  Counts& counts = counts_[key];
  ++counts.uses;
  counts.last_use = ++clock_;
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  it->second.last_use = clock_;
  return it->second.bytes.data();
}

bool ExpertCache::Offer(uint32_t layer, uint32_t expert, const uint8_t* bytes, uint64_t size) {
  const Key key{layer, expert};
  if (size == 0 || size > stats_.capacity_bytes || entries_.count(key) > 0) return false;
  const Counts& mine = counts_[key];
  // Make room, giving up only entries used less (or as often, less recently).
  while (stats_.held_bytes + size > stats_.capacity_bytes) {
    auto victim = Victim();
    const Counts& theirs = counts_[victim->first];
    if (theirs.uses > mine.uses) return false;
    Evict(victim);
  }
  Entry entry;
  entry.bytes = AlignedBuffer(size);
  std::memcpy(entry.bytes.data(), bytes, size);
  entry.last_use = mine.last_use;
  entries_.emplace(key, std::move(entry));
  stats_.held_bytes += size;
  stats_.entries = static_cast<uint32_t>(entries_.size());
  return true;
}

std::map<ExpertCache::Key, ExpertCache::Entry>::iterator ExpertCache::Victim() {
  auto best = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Counts& a = counts_[it->first];
    const Counts& b = counts_[best->first];
    if (a.uses < b.uses || (a.uses == b.uses && a.last_use < b.last_use)) best = it;
  }
  return best;
}

void ExpertCache::Evict(std::map<Key, Entry>::iterator it) {
  stats_.held_bytes -= it->second.bytes.size();
  entries_.erase(it);
  stats_.entries = static_cast<uint32_t>(entries_.size());
  ++stats_.evictions;
}

}  // namespace octo
