// The sampler's random numbers, specified to the bit so that a seed gives the
// same tokens on every machine and standard library. (std::mt19937_64 is
// specified too, but the std::uniform_*_distribution that turn its bits into
// numbers are not; and mt19937's 2.5 KB of state is more than we need.)
//
// SplitMix64 (Steele, Lea, Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA 2014; the generator Vigna recommends for seeding
// xoshiro): the state advances by the golden-ratio constant and each output
// is the state passed through a 64-bit finalizer. Period 2^64, passes
// BigCrush. Every seed, 0 included, is a good one.
#pragma once

#include <cstdint>

namespace octo {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  // The next 64 random bits.
  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1): the top 53 bits of Next() times 2^-53, so every
  // double of the form k / 2^53 is equally likely and 1.0 never occurs.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace octo
