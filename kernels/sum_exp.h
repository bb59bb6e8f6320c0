// The order a logits row's exps are summed in, written down once: by
// cuda::TopLogits on the device (a block's threads and its reduction), and
// on the host by cpu::TopLogits and daemon/sampling/logprobs.cc's LogSumExp.
// One order everywhere, so a logprob from a row's candidates is the whole
// row's bit for bit wherever exp is the host's (the CPU backend, the
// executor); on a GPU only the device's exp differs (CUDA documents double
// exp to 1 ulp): the sums then agree within 1e-12 relative with room to
// spare (each term within 1 ulp, at most 1024 / 32 + 10 roundings deep
// after the lanes' own).
//
// The order: the row is dealt round-robin to SumExpLanes(n) lanes (lane t
// gets ids t, t + lanes, t + 2 lanes, ... and sums them in that order,
// starting from 0); then the lanes are summed as a CUDA block reduces them:
// each warp of 32 by the xor butterfly (offsets 16, 8, 4, 2, 1, every lane
// adding its partner's value), then the warps' sums, padded with 0 to 32,
// by the same butterfly. Host code only.
#pragma once

#include <cmath>
#include <cstddef>

namespace octo {

inline constexpr int kSumExpMaxLanes = 1024;
inline constexpr int kSumExpWarp = 32;

// The lanes for a row of n: a whole number of warps, at most 1024 (a block).
inline int SumExpLanes(size_t n) {
  return n >= kSumExpMaxLanes ? kSumExpMaxLanes : static_cast<int>((n + kSumExpWarp - 1) / kSumExpWarp) * kSumExpWarp;
}

// sum over i of exp((double)x[i] - (double)max), in the order above.
inline double SumExpInOrder(const float* x, size_t n, float max) {
  const int lanes = SumExpLanes(n);
  // Each lane's terms in id order; the row read once, front to back.
  double lane_sums[kSumExpMaxLanes] = {};
  for (size_t i = 0, lane = 0; i < n; ++i, lane = lane + 1 == static_cast<size_t>(lanes) ? 0 : lane + 1) {
    lane_sums[lane] += std::exp(static_cast<double>(x[i]) - static_cast<double>(max));
  }
  // The butterfly over 32 values; every lane ends with the same sum.
  auto butterfly = [](double* v) {
    for (int offset = kSumExpWarp / 2; offset > 0; offset /= 2) {
      double next[kSumExpWarp];
      for (int j = 0; j < kSumExpWarp; ++j) next[j] = v[j] + v[j ^ offset];
      for (int j = 0; j < kSumExpWarp; ++j) v[j] = next[j];
    }
    return v[0];
  };
  double warp_sums[kSumExpWarp] = {};
  for (int w = 0; w < lanes / kSumExpWarp; ++w) warp_sums[w] = butterfly(lane_sums + w * kSumExpWarp);
  return butterfly(warp_sums);
}

}  // namespace octo
