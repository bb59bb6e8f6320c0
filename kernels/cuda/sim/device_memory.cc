#include "kernels/cuda/sim/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace octo::cuda_sim {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uintptr_t RoundUp(uintptr_t v, size_t to) { return (v + to - 1) / to * to; }
uintptr_t RoundDown(uintptr_t v, size_t to) { return v / to * to; }

}  // namespace

DeviceMemory::DeviceMemory(size_t capacity) : capacity_(capacity) {}

size_t DeviceMemory::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

size_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

bool DeviceMemory::SetCapacity(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes < used_) return false;
  capacity_ = bytes;
  return true;
}

cudaError_t DeviceMemory::Allocate(size_t bytes, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (bytes == 0) return cudaSuccess;
  const size_t counted = RoundUp(bytes, kAlignment);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (counted > capacity_ - used_) return cudaErrorMemoryAllocation;
    used_ += counted;
  }
  const size_t usable = RoundUp(bytes, PageBytes());
  const size_t map_bytes = usable + PageBytes();
  void* map = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= counted;
    return cudaErrorMemoryAllocation;
  }
  auto* base = static_cast<unsigned char*>(map);
  mprotect(base + usable, PageBytes(), PROT_NONE);  // the guard page
#if defined(__SANITIZE_ADDRESS__)
  // A fresh mapping may sit where poisoned memory (a fiber stack, an earlier
  // allocation's tail) was: start clean, then poison the tail past the end.
  ASAN_UNPOISON_MEMORY_REGION(base, usable);
#endif
  std::memset(base, 0xFF, usable);
#if defined(__SANITIZE_ADDRESS__)
  ASAN_POISON_MEMORY_REGION(base + bytes, usable - bytes);
#endif
  std::lock_guard<std::mutex> lock(mu_);
  allocations_[reinterpret_cast<uintptr_t>(base)] = Allocation{reinterpret_cast<uintptr_t>(base), bytes, map_bytes};
  *out = base;
  return cudaSuccess;
}

cudaError_t DeviceMemory::Free(void* p) {
  if (p == nullptr) return cudaSuccess;
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(p));
    if (it == allocations_.end()) return cudaErrorInvalidValue;
    a = it->second;
    allocations_.erase(it);
    used_ -= RoundUp(a.bytes, kAlignment);
  }
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(a.begin), a.map_bytes - PageBytes());
#endif
  munmap(reinterpret_cast<void*>(a.begin), a.map_bytes);  // a later use faults
  return cudaSuccess;
}

bool DeviceMemory::IsDeviceRange(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(begin);
  if (it == allocations_.begin()) return false;
  --it;
  return begin >= it->second.begin && bytes <= it->second.bytes && begin - it->second.begin <= it->second.bytes - bytes;
}

bool DeviceMemory::IsDevicePointer(const void* p) const {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return false;
  --it;
  return address < it->second.begin + it->second.map_bytes;
}

cudaError_t DeviceMemory::AllocateHost(size_t bytes, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* p = std::aligned_alloc(PageBytes(), RoundUp(bytes, PageBytes()));
  if (p == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(mu_);
  pinned_[reinterpret_cast<uintptr_t>(p)] = bytes;
  host_allocated_.insert(reinterpret_cast<uintptr_t>(p));
  *out = p;
  return cudaSuccess;
}

cudaError_t DeviceMemory::FreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (host_allocated_.erase(reinterpret_cast<uintptr_t>(p)) == 0) return cudaErrorInvalidValue;
    pinned_.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t DeviceMemory::Register(void* p, size_t bytes, size_t limit) {
  if (p == nullptr || bytes == 0) return cudaErrorInvalidValue;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pinned_.upper_bound(begin + bytes - 1);
  if (it != pinned_.begin() && std::prev(it)->first + std::prev(it)->second > begin) {
    return cudaErrorHostMemoryAlreadyRegistered;
  }
  size_t registered = 0;
  for (const auto& [start, size] : pinned_) registered += host_allocated_.count(start) != 0 ? 0 : size;
  if (bytes > limit || registered > limit - bytes) return cudaErrorMemoryAllocation;
  pinned_[begin] = bytes;
  return cudaSuccess;
}

cudaError_t DeviceMemory::Unregister(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  if (host_allocated_.count(begin) != 0 || pinned_.erase(begin) == 0) return cudaErrorHostMemoryNotRegistered;
  return cudaSuccess;
}

std::pair<uintptr_t, uintptr_t> DeviceMemory::PinnedRangeFrom(uintptr_t begin) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pinned_.upper_bound(begin);
  if (it == pinned_.begin()) return {0, 0};
  --it;
  return {it->first, it->first + it->second};
}

bool DeviceMemory::IsPinned(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto [start, end] = PinnedRangeFrom(begin);
  return begin >= start && begin + bytes <= end;
}

bool DeviceMemory::RunsPastPinned(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto [start, end] = PinnedRangeFrom(begin);
  return begin >= start && begin < end && begin + bytes > end;
}

int DeviceMemory::TakeOff(void* dst, const void* src, size_t bytes, std::string what) {
  InFlight flight;
  flight.what = std::move(what);
  const size_t page = PageBytes();
  if (IsDeviceRange(dst, bytes)) {
    flight.dst_begin = RoundUp(reinterpret_cast<uintptr_t>(dst), page);
    flight.dst_end = RoundDown(reinterpret_cast<uintptr_t>(dst) + bytes, page);
    if (flight.dst_end < flight.dst_begin) flight.dst_end = flight.dst_begin;
  }
  if (src != nullptr && IsDeviceRange(src, bytes)) {
    flight.src_begin = RoundUp(reinterpret_cast<uintptr_t>(src), page);
    flight.src_end = RoundDown(reinterpret_cast<uintptr_t>(src) + bytes, page);
    if (flight.src_end < flight.src_begin) flight.src_end = flight.src_begin;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_flight_++;
  in_flight_[id] = flight;
  Reprotect(flight.dst_begin, flight.dst_end);
  Reprotect(flight.src_begin, flight.src_end);
  return id;
}

void DeviceMemory::Land(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return;
  const InFlight flight = it->second;
  in_flight_.erase(it);
  Reprotect(flight.dst_begin, flight.dst_end);
  Reprotect(flight.src_begin, flight.src_end);
}

void DeviceMemory::Reprotect(uintptr_t begin, uintptr_t end) {
  // Each page: no access under an in-flight destination, read-only under an
  // in-flight device source, else read-write; one mprotect per run of pages
  // that agree.
  const size_t page = PageBytes();
  auto protection = [&](uintptr_t p) {
    int prot = PROT_READ | PROT_WRITE;
    for (const auto& [id, f] : in_flight_) {
      if (p >= f.dst_begin && p < f.dst_end) return PROT_NONE;
      if (p >= f.src_begin && p < f.src_end) prot = PROT_READ;
    }
    return prot;
  };
  uintptr_t run = begin;
  while (run < end) {
    const int prot = protection(run);
    uintptr_t next = run + page;
    while (next < end && protection(next) == prot) next += page;
    mprotect(reinterpret_cast<void*>(run), next - run, prot);
    run = next;
  }
}

std::string DeviceMemory::ExplainFault(uintptr_t address) const {
  // No waiting in a signal handler: take the lock if it is free, else read
  // as things are (the process ends after this report either way).
  const bool locked = mu_.try_lock();
  std::string out;
  for (const auto& [id, f] : in_flight_) {
    if ((address >= f.dst_begin && address < f.dst_end) || (address >= f.src_begin && address < f.src_end)) {
      out = absl::StrFormat("0x%x is in flight: %s has not landed yet (a missing event or stream wait?)", address,
                            f.what);
      break;
    }
  }
  if (out.empty()) {
    auto it = allocations_.upper_bound(address);
    if (it != allocations_.begin()) {
      --it;
      const Allocation& a = it->second;
      if (address >= a.begin + a.bytes && address < a.begin + a.map_bytes) {
        out = absl::StrFormat("0x%x is %d bytes past the end of a %d-byte device allocation at 0x%x", address,
                              address - (a.begin + a.bytes), a.bytes, a.begin);
      }
    }
  }
  if (locked) mu_.unlock();
  return out;
}

}  // namespace octo::cuda_sim
