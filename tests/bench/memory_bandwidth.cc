#include "tests/bench/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace octo::bench {
namespace {

constexpr uint64_t kSliceAlignment = 4096;

double SecondsOf(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sums the 64-bit words of [p, p + bytes) so the loads cannot be dropped.
// bytes is a multiple of 128 and p is 32-byte aligned. Four independent
// accumulators keep several loads in flight, so the loop waits on memory,
// not on its own adds. The AVX2 loop reads ~10% faster than SSE2 here.
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t SumWordsAvx2(const uint8_t* p, uint64_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (uint64_t i = 0; i < bytes; i += 128) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes),
                      _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

uint64_t SumWords(const uint8_t* p, uint64_t bytes) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return SumWordsAvx2(p, bytes);
#endif
  uint64_t s[4] = {0, 0, 0, 0};
  for (uint64_t i = 0; i < bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, sizeof(w));
      s[k] += w;
    }
  }
  return s[0] + s[1] + s[2] + s[3];
}

}  // namespace

MemoryBandwidth MeasureMemoryBandwidth(cpu::ThreadPool& pool, uint64_t buffer_bytes, int reps) {
  const int threads = pool.size();
  // One slice per thread, each a whole number of pages.
  const uint64_t slice =
      std::max<uint64_t>(kSliceAlignment, buffer_bytes / threads / kSliceAlignment * kSliceAlignment);
  const uint64_t total = slice * threads;
  std::vector<uint8_t> src(total + kSliceAlignment);
  std::vector<uint8_t> dst(total + kSliceAlignment);
  auto align = [](uint8_t* p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    return p + (kSliceAlignment - address % kSliceAlignment) % kSliceAlignment;
  };
  uint8_t* from = align(src.data());
  uint8_t* to = align(dst.data());
  for (uint64_t i = 0; i < total; i += 64) from[i] = static_cast<uint8_t>(i / 64);

  MemoryBandwidth result{.buffer_bytes = total, .reps = reps, .threads = threads};
  std::vector<uint64_t> sums(threads);
  // One untimed copy first: the page tables and the TLB are warm for both.
  pool.ParallelFor(threads, [&](int64_t t) { std::memcpy(to + t * slice, from + t * slice, slice); });
  for (int rep = 0; rep < reps; ++rep) {
    const double copy_s = SecondsOf(
        [&] { pool.ParallelFor(threads, [&](int64_t t) { std::memcpy(to + t * slice, from + t * slice, slice); }); });
    const double read_s =
        SecondsOf([&] { pool.ParallelFor(threads, [&](int64_t t) { sums[t] = SumWords(from + t * slice, slice); }); });
    result.copy_bytes_per_s = std::max(result.copy_bytes_per_s, static_cast<double>(total) / copy_s);
    result.read_bytes_per_s = std::max(result.read_bytes_per_s, static_cast<double>(total) / read_s);
  }
  // Keep the sums observable so the scan is not optimized away.
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return result;
}

}  // namespace octo::bench
