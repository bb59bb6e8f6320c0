// matmul_bench: how close MatMul at batch 1 (decode) comes to the memory
// bandwidth bound, and how a batch of tokens scales. Not a test; run it by
// hand:
//
//   matmul_bench [--threads N] [--tokens T[,T...]] [--rounds R] [--portable] [--cached] [TYPE...]
//
// For each type (default: Q4_0 Q8_0 Q4_K Q6_K) it builds copies of a
// rows x cols = 2048 x 8192 matrix (Llama-3.2-1B's ffn_down shape) totalling
// at least kStreamBytes, so every MatMul streams its weights from DRAM rather
// than the last-level cache, as in a real decode step through a model. It
// times passes over all copies and reports the weight bytes read per second
// next to memcpy's rate measured in the same run on a buffer of the same
// total size (bytes copied per second; each byte is read and written). The
// ratio is the figure the engine's decode target is stated in: weight bytes
// / time against the memcpy GB/s. Medians over the rounds; memcpy is measured
// between the types too, and its median over the run is used. --cached uses
// one copy, which the last-level cache can hold: the kernels' compute speed.
//
// Each type runs at every token count of --tokens (default 1,4,8,16: decode
// batches): "tok/ms" is the aggregate (tokens per millisecond of one
// MatMul), "x b1" its multiple of the 1-token figure, "GMAC/s/core" the
// multiply-adds per second of process CPU time.
//
// On a shared machine other processes take CPU time from the run; the
// "cores" column (process CPU time / wall time) shows how much it really
// had, and "GB/s per core" (weight bytes / process CPU time) the kernels'
// rate independent of that.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

constexpr int64_t kRows = 2048;
constexpr int64_t kCols = 8192;
constexpr int64_t kStreamBytes = int64_t{256} << 20;  // 8x a 32 MiB L3

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// memcpy GB/s (bytes copied / s) on kStreamBytes, median of `rounds`.
double MemcpyGbps(int rounds) {
  static std::vector<uint8_t> src(kStreamBytes, 1), dst(kStreamBytes, 2);
  std::vector<double> rates;
  for (int r = 0; r < rounds + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    const auto t1 = std::chrono::steady_clock::now();
    if (r > 0) rates.push_back(static_cast<double>(src.size()) / Seconds(t0, t1) / 1e9);  // r 0 warms up
    src[r % src.size()] ^= dst[(r * 7919) % dst.size()];  // keep the copies observable
  }
  return Median(rates);
}

struct Result {
  double gbps;           // weight bytes / wall time
  double ms_per_matmul;
  double cores;          // process CPU time / wall time
  double gbps_per_core;  // weight bytes / process CPU time
  int64_t matrix_bytes;
  double cpu_ms_per_matmul;  // process CPU time per MatMul
};

Result BenchType(GgmlType type, int n_tokens, int rounds, bool cached, const cpu::Exec& exec) {
  const std::vector<uint8_t> one = testing::RandomWeights(type, kRows, kCols, 1);
  const int64_t matrix_bytes = static_cast<int64_t>(one.size());
  const int copies =
      cached ? 1 : static_cast<int>(std::max<int64_t>(2, (kStreamBytes + matrix_bytes - 1) / matrix_bytes));
  std::vector<std::vector<uint8_t>> matrices(copies, one);
  const std::vector<float> x = testing::RandomActivations(n_tokens * kCols, 2);
  std::vector<float> out(static_cast<size_t>(n_tokens * kRows));

  std::vector<double> rates, times, cores, per_core, cpu_times;
  for (int r = 0; r < rounds + 1; ++r) {
    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::vector<uint8_t>& m : matrices) {
      const absl::Status status = cpu::MatMul(WeightMatrix{type, m.data(), kRows, kCols}, x.data(), out.data(),
                                              n_tokens, exec);
      if (!status.ok()) {
        std::fprintf(stderr, "MatMul: %s\n", std::string(status.message()).c_str());
        std::exit(1);
      }
    }
    const double s = Seconds(t0, std::chrono::steady_clock::now());
    const double cpu = CpuSeconds() - cpu0;
    if (r == 0) continue;  // warm-up: page faults, scratch growth
    const double bytes = static_cast<double>(matrix_bytes) * copies;
    rates.push_back(bytes / s / 1e9);
    times.push_back(s / copies * 1e3);
    cores.push_back(cpu / s);
    per_core.push_back(bytes / cpu / 1e9);
    cpu_times.push_back(cpu / copies * 1e3);
  }
  return Result{Median(rates), Median(times), Median(cores), Median(per_core), matrix_bytes, Median(cpu_times)};
}

int Main(int argc, char** argv) {
  int threads = 0;  // one per core
  std::vector<int> token_counts = {1, 4, 8, 16};
  int rounds = 7;
  bool cached = false;
  cpu::Simd simd = cpu::DetectSimd();
  std::vector<GgmlType> types;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--tokens" && i + 1 < argc) {
      token_counts.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        token_counts.push_back(std::max(1, std::atoi(p)));
        while (*p != '\0' && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--cached") {
      cached = true;
      rounds = std::max(rounds, 50);
    } else if (arg == "--portable") {
      simd = cpu::Simd::kPortable;
    } else {
      const absl::StatusOr<GgmlTypeInfo> info = LookupGgmlTypeByName(arg);
      if (!info.ok()) {
        std::fprintf(stderr, "unknown argument or type: %s\n", arg.c_str());
        return 2;
      }
      types.push_back(info->type);
    }
  }
  if (types.empty()) types = {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};

  cpu::ThreadPool pool(threads);
  const cpu::Exec exec{&pool, simd};
  std::printf("MatMul %lld x %lld, %d threads, %s; %s, %d rounds\n", static_cast<long long>(kRows),
              static_cast<long long>(kCols), pool.size(), cpu::SimdName(simd),
              cached ? "one matrix (cache-resident)" : ">= 256 MiB of weights per type", rounds);

  struct Row {
    GgmlType type;
    int n_tokens;
    Result result;
  };
  std::vector<double> memcpy_rates = {MemcpyGbps(rounds)};
  std::vector<Row> rows;
  for (GgmlType type : types) {
    for (int n_tokens : token_counts) {
      rows.push_back(Row{type, n_tokens, BenchType(type, n_tokens, rounds, cached, exec)});
    }
    memcpy_rates.push_back(MemcpyGbps(rounds));
  }
  const double memcpy_gbps = Median(memcpy_rates);
  std::printf("memcpy %.2f GB/s (median; per measurement:", memcpy_gbps);
  for (double r : memcpy_rates) std::printf(" %.2f", r);
  std::printf(")\n\n%-7s %6s %10s %10s %12s %7s %7s %14s %8s %6s %12s\n", "type", "tokens", "MB/matrix", "ms/MatMul",
              "weight GB/s", "ratio", "cores", "GB/s per core", "tok/ms", "x b1", "GMAC/s/core");
  for (const Row& row : rows) {
    const Result& r = row.result;
    const double tok_per_ms = row.n_tokens / r.ms_per_matmul;
    std::string times_one = "-";  // needs the type's 1-token row
    for (const Row& one : rows) {
      if (one.type == row.type && one.n_tokens == 1) {
        times_one = absl::StrFormat("%.2f", tok_per_ms * one.result.ms_per_matmul);
      }
    }
    const double gmac_per_core = static_cast<double>(kRows * kCols) * row.n_tokens / (r.cpu_ms_per_matmul * 1e6);
    std::printf("%-7s %6d %10.2f %10.3f %12.2f %7.2f %7.2f %14.2f %8.2f %6s %12.1f\n",
                std::string(GgmlTypeName(row.type)).c_str(), row.n_tokens, static_cast<double>(r.matrix_bytes) / 1e6,
                r.ms_per_matmul, r.gbps, r.gbps / memcpy_gbps, r.cores, r.gbps_per_core, tok_per_ms,
                times_one.c_str(), gmac_per_core);
  }
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) { return octo::Main(argc, argv); }
