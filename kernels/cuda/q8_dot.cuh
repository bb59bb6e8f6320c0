// The integer dot products of cuda::MatMul's decode path: one 32-element
// chunk of a weight row, in its GGUF block encoding, against the same chunk
// of 8-bit activations (kernels/cuda/act_q8.h).
//
// Q8Weights<type>::Unpack(block, chunk) spells the chunk's 32 quants as
// eight int32 words of four signed bytes (element 4w + b in byte b of word
// w), with the scale d and the subtracted minimum m of each 16-element half:
// element e stands for d[e / 16] * q_e - m[e / 16]. Q8Dot then takes
//   dx * (d * sum(q_e * xq_e) - m * sum(xq_e))
// per half with __dp4a, exactly in integers until the scales. Types whose
// scale covers all 32 (kHalves false) or that have no minimum (kMins false)
// skip that work. Each byte position follows kernels/cpu/quant_blocks.h's
// element order, and the element values are those of kernels/block_decode.h
// (tests/kernels/cuda/matmul_cuda_test.cc checks every type).
//
// Where the block is: Q4_K and Q5_K are unpacked straight from global
// memory, in 16-byte units (LoadUnit); every other type from a copy the
// row's lanes staged in shared memory (kernels/cuda/weight_stage.cuh), so
// their field reads (Load4's halves, single bytes) never reach global memory.
#pragma once

#include <cstdint>

#include "kernels/block_decode.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cuda/common.cuh"
#include "storage/ggml_type.h"

namespace octo::cuda::q8 {

struct Chunk {
  int q[8];
  float d[2];
  float m[2];
};

// 4 bytes at a 2-byte aligned address (every GGUF block field), little-endian:
// in shared memory, where the decode path stages these blocks.
__device__ __forceinline__ uint32_t Load4(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
}
__device__ __forceinline__ float Half(const uint8_t* p) {
  return block_decode::HalfBits(*reinterpret_cast<const uint16_t*>(p));
}
// Each byte b (0 <= b < 128) becomes the signed byte b - n: with the top bit
// set no byte borrows from its neighbour.
__device__ __forceinline__ int SubBytes(uint32_t w, uint32_t n) {
  return static_cast<int>(((w | 0x80808080u) - n * 0x01010101u) ^ 0x80808080u);
}
// Bits 0..3 of `bits` to bit 4 of bytes 0..3 (the 5th bit of four quants).
__device__ __forceinline__ uint32_t FifthBits(uint32_t bits) {
  return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}
// Four 4-bit IQ4 indices (the low nibbles of w's bytes) to their int8 levels.
__device__ __forceinline__ int Iq4Levels(uint32_t w) {
  uint32_t out = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    out |= static_cast<uint32_t>(static_cast<uint8_t>(block_decode::Iq4NlLevel((w >> (8 * b)) & 0xF))) << (8 * b);
  }
  return static_cast<int>(out);
}
// A 32-element nibble block (Q4_0/Q4_1/IQ4 layout: byte j holds element j
// in its low nibble, j + 16 in its high one) into c.q, each word of four
// nibbles passed through `word` (the type's offset or level table).
template <typename F>
__device__ __forceinline__ void NibbleQuants(const uint8_t* qs, F word, Chunk* c) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t v = Load4(qs + 4 * w);
    c->q[w] = word(v & 0x0F0F0F0Fu);
    c->q[4 + w] = word((v >> 4) & 0x0F0F0F0Fu);
  }
}
__device__ __forceinline__ int Plain(uint32_t w) { return static_cast<int>(w); }

template <GgmlType T>
struct Q8Weights;

template <>
struct Q8Weights<GgmlType::kQ4_0> {
  static constexpr int kChunks = 1, kBytes = 18;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c{};
    NibbleQuants(b + 2, [](uint32_t w) { return SubBytes(w, 8); }, &c);
    c.d[0] = c.d[1] = Half(b);
    return c;
  }
};

template <>
struct Q8Weights<GgmlType::kQ4_1> {
  static constexpr int kChunks = 1, kBytes = 20;
  static constexpr bool kHalves = false, kMins = true;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c{};
    NibbleQuants(b + 4, Plain, &c);
    c.d[0] = c.d[1] = Half(b);
    c.m[0] = c.m[1] = -Half(b + 2);  // x = d * q + m
    return c;
  }
};

// Q5_0 / Q5_1: the nibbles plus bit e of the 32-bit qh as bit 4.
template <bool kMin>
__device__ __forceinline__ Chunk UnpackQ5(const uint8_t* qh_bytes, const uint8_t* qs) {
  Chunk c{};
  NibbleQuants(qs, Plain, &c);
  const uint32_t qh = Load4(qh_bytes);
  for (int w = 0; w < 8; ++w) {
    // Word w holds elements 4w .. 4w + 3 (w < 4) or 16 + 4(w - 4) ..: qh bits 4w ...
    const uint32_t q = static_cast<uint32_t>(c.q[w]) | FifthBits(qh >> (w < 4 ? 4 * w : 16 + 4 * (w - 4)));
    c.q[w] = kMin ? static_cast<int>(q) : SubBytes(q, 16);
  }
  return c;
}

template <>
struct Q8Weights<GgmlType::kQ5_0> {
  static constexpr int kChunks = 1, kBytes = 22;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c = UnpackQ5<false>(b + 2, b + 6);
    c.d[0] = c.d[1] = Half(b);
    return c;
  }
};

template <>
struct Q8Weights<GgmlType::kQ5_1> {
  static constexpr int kChunks = 1, kBytes = 24;
  static constexpr bool kHalves = false, kMins = true;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c = UnpackQ5<true>(b + 4, b + 8);
    c.d[0] = c.d[1] = Half(b);
    c.m[0] = c.m[1] = -Half(b + 2);
    return c;
  }
};

template <>
struct Q8Weights<GgmlType::kQ8_0> {
  static constexpr int kChunks = 1, kBytes = 34;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c{};
    for (int w = 0; w < 8; ++w) c.q[w] = static_cast<int>(Load4(b + 2 + 4 * w));
    c.d[0] = c.d[1] = Half(b);
    return c;
  }
};

template <>
struct Q8Weights<GgmlType::kIQ4_NL> {
  static constexpr int kChunks = 1, kBytes = 18;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c{};
    NibbleQuants(b + 2, Iq4Levels, &c);
    c.d[0] = c.d[1] = Half(b);
    return c;
  }
};

// Q2_K: chunk c is sub-blocks 2c, 2c + 1; its 32 quants are bits 2 * (c % 4)
// of qs bytes 32 * (c / 4) ..; scales byte s: scale low nibble, min high.
template <>
struct Q8Weights<GgmlType::kQ2_K> {
  static constexpr int kChunks = 8, kBytes = 84;
  static constexpr bool kHalves = true, kMins = true;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    const uint8_t* scales = b;
    const uint8_t* qs = b + 16 + 32 * (chunk / 4);
    const int shift = 2 * (chunk % 4);
    Chunk c{};
    for (int w = 0; w < 8; ++w) c.q[w] = static_cast<int>((Load4(qs + 4 * w) >> shift) & 0x03030303u);
    const float d = Half(b + 80), dmin = Half(b + 82);
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * chunk + h;
      c.d[h] = d * static_cast<float>(scales[s] & 0xF);
      c.m[h] = dmin * static_cast<float>(scales[s] >> 4);
    }
    return c;
  }
};

// Q3_K: 2 low bits at bits 2 * (c % 4) of qs bytes 32 * (c / 4) .., the
// third from hmask bit c; q = low + 4 * high - 4.
template <>
struct Q8Weights<GgmlType::kQ3_K> {
  static constexpr int kChunks = 8, kBytes = 110;
  static constexpr bool kHalves = true, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32 + 32 * (chunk / 4);
    const int shift = 2 * (chunk % 4);
    Chunk c{};
    for (int w = 0; w < 8; ++w) {
      const uint32_t low = (Load4(qs + 4 * w) >> shift) & 0x03030303u;
      const uint32_t high = (Load4(hmask + 4 * w) >> chunk) & 0x01010101u;
      c.q[w] = SubBytes(low | (high << 2), 4);
    }
    const float d = Half(b + 108);
    for (int h = 0; h < 2; ++h) c.d[h] = d * static_cast<float>(cpu::UnpackQ3KScale(b + 96, 2 * chunk + h));
    return c;
  }
};

// Q4_K / Q5_K: chunk c is sub-block c: the low (c even) or high nibbles of qs
// bytes 32 * (c / 2) ..; Q5_K's 5th bit is qh bit c. Their 144- and 176-byte
// blocks are whole 16-byte units, so a tensor that starts 16-byte aligned
// (matmul::WeightAlignment; every layer file tensor starts at 4096) is read in
// aligned loads: the block's head (d, dmin and the 12 scale bytes), Q5_K's
// 32 qh bytes, the chunk pair's 32 qs bytes (LoadUnit, then UnpackLoaded).
template <bool kFifth>
struct Q8WeightsQ45K {
  static constexpr int kChunks = 8, kBytes = kFifth ? 176 : 144;
  static constexpr bool kHalves = false, kMins = true;
  // A lane unpacks a nibble pair, chunks 2p and 2p + 1, which share their
  // quant bytes: 3 loads (Q5_K 5) for two chunks.
  static constexpr int kChunksPerUnit = 2;
  // Byte k of word w.
  __device__ __forceinline__ static uint32_t Byte(uint32_t w, int k) { return (w >> (8 * k)) & 0xFFu; }
  // Four 16-byte words as eight 32-bit ones.
  __device__ __forceinline__ static void Words(const uint4* p, uint32_t* out) {
    const uint4 lo = p[0], hi = p[1];
    const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    for (int w = 0; w < 8; ++w) out[w] = words[w];
  }
  // Chunk `chunk` from the block's head and the chunk pair's quant (and
  // Q5_K qh) words.
  __device__ __forceinline__ static Chunk FromWords(const uint4& head, const uint32_t* q_words,
                                                    const uint32_t* h_words, int chunk) {
    const int shift = 4 * (chunk % 2);
    Chunk c{};
    for (int w = 0; w < 8; ++w) {
      uint32_t q = (q_words[w] >> shift) & 0x0F0F0F0Fu;
      if (kFifth) q |= ((h_words[w] >> chunk) & 0x01010101u) << 4;
      c.q[w] = static_cast<int>(q);
    }
    // Sub-block j's 6-bit scale and min (cpu::UnpackQ4KScaleMin), from the
    // head's scale words: bytes 0-3 (s0), 4-7 (s1), 8-11 (s2) of the 12.
    const uint32_t s0 = head.y, s1 = head.z, s2 = head.w;
    const int j = chunk % 4;
    const uint32_t sc = chunk < 4 ? Byte(s0, j) & 63 : (Byte(s2, j) & 0xF) | ((Byte(s0, j) >> 6) << 4);
    const uint32_t m = chunk < 4 ? Byte(s1, j) & 63 : (Byte(s2, j) >> 4) | ((Byte(s1, j) >> 6) << 4);
    c.d[0] = c.d[1] = block_decode::HalfBits(static_cast<uint16_t>(head.x & 0xFFFFu)) * static_cast<float>(sc);
    c.m[0] = c.m[1] = block_decode::HalfBits(static_cast<uint16_t>(head.x >> 16)) * static_cast<float>(m);
    return c;
  }
  // What one lane loads of its chunk pair `pair`: its word of the block's
  // 16-byte head, the pair's 32 qs bytes and (Q5_K) its 8 of the 32 qh
  // bytes. Apart from the unpack, so that the decode loop can have the next
  // pair's loads in flight while it sums this one (Q8Dots).
  struct Loaded {
    uint32_t head_word;
    uint4 qs[2];
    uint2 qh;
  };
  __device__ __forceinline__ static Loaded LoadUnit(const uint8_t* b, int pair) {
    Loaded l;
    l.head_word = reinterpret_cast<const uint32_t*>(b)[pair];
    const auto* qs = reinterpret_cast<const uint4*>(b + (kFifth ? 48 : 16) + 32 * pair);
    l.qs[0] = qs[0];
    l.qs[1] = qs[1];
    l.qh = uint2{};
    if constexpr (kFifth) l.qh = reinterpret_cast<const uint2*>(b + 16)[pair];
    return l;
  }
  // Chunks 2 * pair and 2 * pair + 1 into out[0], out[1] from LoadUnit's
  // loads. Called by the 4 lanes 4m .. 4m + 3 of a warp at once, lane 4m + p
  // holding pair p of the same block (the decode loop's order: a row's lanes
  // are a multiple of 4, its units go round-robin over them). They share
  // what every pair needs -- the 16-byte head, and Q5_K's 32 qh bytes --
  // each having loaded a quarter and taking the rest from the others by
  // shuffles, so each byte of the block is loaded once, in 4-byte (head),
  // 8-byte (qh) and 16-byte (qs) loads.
  __device__ __forceinline__ static void UnpackLoaded(const Loaded& l, int pair, Chunk* out) {
    const int base = static_cast<int>(threadIdx.x % 32) & ~3;  // the group's first lane
    const unsigned group = 0xFu << base;
    uint4 head;
    head.x = __shfl_sync(group, l.head_word, base);
    head.y = __shfl_sync(group, l.head_word, base + 1);
    head.z = __shfl_sync(group, l.head_word, base + 2);
    head.w = __shfl_sync(group, l.head_word, base + 3);
    uint32_t q_words[8], h_words[8] = {};
    Words(l.qs, q_words);
    if constexpr (kFifth) {
      for (int k = 0; k < 4; ++k) {
        h_words[2 * k] = __shfl_sync(group, l.qh.x, base + k);
        h_words[2 * k + 1] = __shfl_sync(group, l.qh.y, base + k);
      }
    }
    out[0] = FromWords(head, q_words, h_words, 2 * pair);
    out[1] = FromWords(head, q_words, h_words, 2 * pair + 1);
  }
};
template <>
struct Q8Weights<GgmlType::kQ4_K> : Q8WeightsQ45K<false> {};
template <>
struct Q8Weights<GgmlType::kQ5_K> : Q8WeightsQ45K<true> {};

// Q6_K: chunk c = 32 * k + l of half c / 4 (k = c % 4): low nibble (k < 2)
// or high nibble of ql bytes 64 * half + 32 * (k % 2) + l, top 2 bits at
// bits 2k of qh bytes 32 * half + l; q - 32; scale 8 * half + 2k + l / 16.
template <>
struct Q8Weights<GgmlType::kQ6_K> {
  static constexpr int kChunks = 8, kBytes = 210;
  static constexpr bool kHalves = true, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    const int half = chunk / 4, k = chunk % 4;
    const uint8_t* ql = b + 64 * half + 32 * (k % 2);
    const uint8_t* qh = b + 128 + 32 * half;
    Chunk c{};
    for (int w = 0; w < 8; ++w) {
      const uint32_t low = (Load4(ql + 4 * w) >> (k < 2 ? 0 : 4)) & 0x0F0F0F0Fu;
      const uint32_t high = ((Load4(qh + 4 * w) >> (2 * k)) & 0x03030303u) << 4;
      c.q[w] = SubBytes(low | high, 32);
    }
    const float d = Half(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h) c.d[h] = d * static_cast<float>(scales[8 * half + 2 * k + h]);
    return c;
  }
};

// IQ4_XS: chunk c is sub-block c, an IQ4_NL block's nibbles at qs + 16c.
template <>
struct Q8Weights<GgmlType::kIQ4_XS> {
  static constexpr int kChunks = 8, kBytes = 136;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    Chunk c{};
    NibbleQuants(b + 8 + 16 * chunk, Iq4Levels, &c);
    const int scale = cpu::UnpackIq4XsScale(*reinterpret_cast<const cpu::BlockIq4Xs*>(b), chunk) - 32;
    c.d[0] = c.d[1] = Half(b) * static_cast<float>(scale);
    return c;
  }
};

// MXFP4: 17-byte blocks sit at any address, so bytes are read one by one
// (from the staged copy);
// the nibbles as Q4_0's, through the doubled E2M1 values.
template <>
struct Q8Weights<GgmlType::kMXFP4> {
  static constexpr int kChunks = 1, kBytes = 17;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int) {
    Chunk c{};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t low = 0, high = 0;
      for (int k = 0; k < 4; ++k) {
        const uint8_t byte = b[1 + 4 * w + k];
        low |= static_cast<uint32_t>(static_cast<uint8_t>(block_decode::Mxfp4Level(byte & 0xF))) << (8 * k);
        high |= static_cast<uint32_t>(static_cast<uint8_t>(block_decode::Mxfp4Level(byte >> 4))) << (8 * k);
      }
      c.q[w] = static_cast<int>(low);
      c.q[4 + w] = static_cast<int>(high);
    }
    c.d[0] = c.d[1] = block_decode::FloatBits(cpu::E8M0HalfBits(b[0]));
    return c;
  }
};

// TQ2_0: chunk c is bit pair c % 4 of the 32 bytes of half c / 4; each
// pair less 1 is the trit.
template <>
struct Q8Weights<GgmlType::kTQ2_0> {
  static constexpr int kChunks = 8, kBytes = 66;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    Chunk c{};
    const uint8_t* qs = b + 32 * (chunk / 4);
#pragma unroll
    for (int w = 0; w < 8; ++w) c.q[w] = SubBytes((Load4(qs + 4 * w) >> (2 * (chunk % 4))) & 0x03030303u, 1);
    c.d[0] = c.d[1] = Half(b + 64);
    return c;
  }
};

// TQ1_0: the chunk's 32 trits by element (quant_blocks.h's base-3 digits).
template <>
struct Q8Weights<GgmlType::kTQ1_0> {
  static constexpr int kChunks = 8, kBytes = 54;
  static constexpr bool kHalves = false, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    Chunk c{};
    const auto& block = *reinterpret_cast<const cpu::BlockTq1_0*>(b);
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      uint32_t word = 0;
      for (int k = 0; k < 4; ++k) {
        word |= static_cast<uint32_t>(static_cast<uint8_t>(cpu::Tq1Trit(block, 32 * chunk + 4 * w + k))) << (8 * k);
      }
      c.q[w] = static_cast<int>(word);
    }
    c.d[0] = c.d[1] = Half(b + 52);
    return c;
  }
};

// IQ1-IQ3 (kernels/iq_blocks.h): chunk c is groups 4c..4c+3, each half two
// groups of one scale; q the groups' integer levels, d[h] = (d * ls) * factor.
template <typename T>
struct IqQ8Weights {
  static constexpr int kChunks = 8, kBytes = sizeof(typename T::Block);
  static constexpr bool kHalves = true, kMins = false;
  __device__ __forceinline__ static Chunk Unpack(const uint8_t* b, int chunk) {
    Chunk c{};
    const auto& block = *reinterpret_cast<const typename T::Block*>(b);
    const float d = block_decode::HalfBits(T::DBits(block));
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      int L[8];
      T::Levels(block, 4 * chunk + g, L);
      for (int w = 0; w < 2; ++w) {
        uint32_t word = 0;
        for (int k = 0; k < 4; ++k) word |= static_cast<uint32_t>(static_cast<uint8_t>(L[4 * w + k])) << (8 * k);
        c.q[2 * g + w] = static_cast<int>(word);
      }
    }
    for (int h = 0; h < 2; ++h) c.d[h] = (d * static_cast<float>(T::Scale(block, 4 * chunk + 2 * h))) * T::kFactor;
    return c;
  }
};
template <>
struct Q8Weights<GgmlType::kIQ2_XXS> : IqQ8Weights<cpu::iq::Iq2XxsTraits> {};
template <>
struct Q8Weights<GgmlType::kIQ2_XS> : IqQ8Weights<cpu::iq::Iq2XsTraits> {};
template <>
struct Q8Weights<GgmlType::kIQ2_S> : IqQ8Weights<cpu::iq::Iq2STraits> {};
template <>
struct Q8Weights<GgmlType::kIQ3_XXS> : IqQ8Weights<cpu::iq::Iq3XxsTraits> {};
template <>
struct Q8Weights<GgmlType::kIQ3_S> : IqQ8Weights<cpu::iq::Iq3STraits> {};
template <>
struct Q8Weights<GgmlType::kIQ1_S> : IqQ8Weights<cpu::iq::Iq1STraits> {};
template <>
struct Q8Weights<GgmlType::kIQ1_M> : IqQ8Weights<cpu::iq::Iq1MTraits> {};

// dx * sum over the chunk of (d * q - m) * xq, with xq the chunk's 32
// activation quants as eight words.
template <typename W>
__device__ __forceinline__ float Dot(const Chunk& c, const int* xq, float dx) {
  int sum_lo = 0, sum_hi = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    sum_lo = __dp4a(c.q[w], xq[w], sum_lo);
    sum_hi = __dp4a(c.q[4 + w], xq[4 + w], sum_hi);
  }
  float r;
  if constexpr (W::kHalves) {
    r = c.d[0] * static_cast<float>(sum_lo) + c.d[1] * static_cast<float>(sum_hi);
  } else {
    r = c.d[0] * static_cast<float>(sum_lo + sum_hi);
  }
  if constexpr (W::kMins) {
    int x_lo = 0, x_hi = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      x_lo = __dp4a(0x01010101, xq[w], x_lo);
      x_hi = __dp4a(0x01010101, xq[4 + w], x_hi);
    }
    if constexpr (W::kHalves) {
      r -= c.m[0] * static_cast<float>(x_lo) + c.m[1] * static_cast<float>(x_hi);
    } else {
      r -= c.m[0] * static_cast<float>(x_lo + x_hi);
    }
  }
  return dx * r;
}

// The chunks one lane unpacks at a time (W::kChunksPerUnit where a type
// shares bytes between chunks, else 1), and that unpack: unit u of a block
// is its chunks u * n .. u * n + n - 1.
template <typename W>
__host__ __device__ constexpr int ChunksPerUnit() {
  if constexpr (requires { W::kChunksPerUnit; }) {
    return W::kChunksPerUnit;
  } else {
    return 1;
  }
}
template <typename W>
__device__ __forceinline__ void UnpackUnit(const uint8_t* b, int unit, Chunk* out) {
  if constexpr (ChunksPerUnit<W>() > 1) {
    W::UnpackLoaded(W::LoadUnit(b, unit), unit, out);
  } else {
    out[0] = W::Unpack(b, unit);
  }
}

// f(Q8Weights<type>{}) for the quantized types, `other` for F32/F16/BF16
// and unknown values: the one switch over the types for the decode path.
template <typename R, typename F>
R WithQ8Weights(GgmlType type, R other, F&& f) {
  switch (type) {
    case GgmlType::kQ4_0: return f(Q8Weights<GgmlType::kQ4_0>{});
    case GgmlType::kQ4_1: return f(Q8Weights<GgmlType::kQ4_1>{});
    case GgmlType::kQ5_0: return f(Q8Weights<GgmlType::kQ5_0>{});
    case GgmlType::kQ5_1: return f(Q8Weights<GgmlType::kQ5_1>{});
    case GgmlType::kQ8_0: return f(Q8Weights<GgmlType::kQ8_0>{});
    case GgmlType::kIQ4_NL: return f(Q8Weights<GgmlType::kIQ4_NL>{});
    case GgmlType::kQ2_K: return f(Q8Weights<GgmlType::kQ2_K>{});
    case GgmlType::kQ3_K: return f(Q8Weights<GgmlType::kQ3_K>{});
    case GgmlType::kQ4_K: return f(Q8Weights<GgmlType::kQ4_K>{});
    case GgmlType::kQ5_K: return f(Q8Weights<GgmlType::kQ5_K>{});
    case GgmlType::kQ6_K: return f(Q8Weights<GgmlType::kQ6_K>{});
    case GgmlType::kIQ4_XS: return f(Q8Weights<GgmlType::kIQ4_XS>{});
    case GgmlType::kMXFP4: return f(Q8Weights<GgmlType::kMXFP4>{});
    case GgmlType::kTQ1_0: return f(Q8Weights<GgmlType::kTQ1_0>{});
    case GgmlType::kTQ2_0: return f(Q8Weights<GgmlType::kTQ2_0>{});
    case GgmlType::kIQ2_XXS: return f(Q8Weights<GgmlType::kIQ2_XXS>{});
    case GgmlType::kIQ2_XS: return f(Q8Weights<GgmlType::kIQ2_XS>{});
    case GgmlType::kIQ2_S: return f(Q8Weights<GgmlType::kIQ2_S>{});
    case GgmlType::kIQ3_XXS: return f(Q8Weights<GgmlType::kIQ3_XXS>{});
    case GgmlType::kIQ3_S: return f(Q8Weights<GgmlType::kIQ3_S>{});
    case GgmlType::kIQ1_S: return f(Q8Weights<GgmlType::kIQ1_S>{});
    case GgmlType::kIQ1_M: return f(Q8Weights<GgmlType::kIQ1_M>{});
    default: return other;
  }
}

}  // namespace octo::cuda::q8
