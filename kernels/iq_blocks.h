// The IQ1-IQ3 block encodings (GGUF types IQ2_XXS 16, IQ2_XS 17, IQ3_XXS
// 18, IQ1_S 19, IQ3_S 21, IQ2_S 22, IQ1_M 29) and their decoding, for the
// CPU kernels and, through OCTO_HD, the CUDA ones.
//
// Every one of them is 256 weights in 32 groups of 8. A group's weights are
// integer levels L[0..8) (a grid entry's magnitudes with signs, or for IQ1
// 8 * (-1, 0, +1) plus or minus 1, the shared +-1/8 shift in eighths), an
// integer scale ls for its group (2s + 1 forms, per 32 or per 16 weights),
// a block scale d, and a constant factor per type:
//   weight = ((d * ls) * factor) * L
// which is, float operation for float operation, what ggml's dequantizers
// compute (d * (0.5 + s) * 0.25 is d * (2s + 1) * 0.125 exactly, and a
// sign flip or a power of two commutes with the rounding). The dot products
// sum ls * sum(L * q8) in integers per block, as ggml's do.
//
// Traits per type (Iq2XxsTraits, ...): Block, kFactor, kFactorPerBlock
// (the factor applied per block, as ggml's IQ1 dots do, or once at the
// end), DBits(block) (the fp16 bits of d), Levels(block, g, L) and
// Scale(block, g); IQ1's also Shift(block, g), the +-1 in its levels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/iq_grids.h"

namespace octo::cpu {

struct BlockIq2Xxs {  // 2.0625 bits per weight
  uint16_t d;
  uint16_t qs[32];  // per 32 weights: 4 grid indices (bytes), then 4 x 7 sign bits and a 4-bit scale
};
static_assert(sizeof(BlockIq2Xxs) == 66);

struct BlockIq2Xs {  // 2.3125
  uint16_t d;
  uint16_t qs[32];    // per group: a 9-bit grid index and 7 sign bits
  uint8_t scales[8];  // per 32 weights: two 4-bit scales, one per 16
};
static_assert(sizeof(BlockIq2Xs) == 74);

struct BlockIq2S {  // 2.5625
  uint16_t d;
  uint8_t qs[64];     // 32 grid index low bytes, then 32 sign bytes
  uint8_t qh[8];      // per 32 weights: the index's top 2 bits of its 4 groups
  uint8_t scales[8];  // as IQ2_XS
};
static_assert(sizeof(BlockIq2S) == 82);

struct BlockIq3Xxs {  // 3.0625
  uint16_t d;
  uint8_t qs[96];  // 64 grid indices (two per group, 4 weights each), then per 32 weights 4 x 7 sign bits and a 4-bit scale
};
static_assert(sizeof(BlockIq3Xxs) == 98);

struct BlockIq3S {  // 3.4375
  uint16_t d;
  uint8_t qs[64];     // grid index low bytes, two per group
  uint8_t qh[8];      // per 32 weights: the indices' 9th bits
  uint8_t signs[32];  // a sign byte per group
  uint8_t scales[4];  // per 64 weights: two 4-bit scales, one per 32
};
static_assert(sizeof(BlockIq3S) == 110);

struct BlockIq1S {  // 1.5625
  uint16_t d;
  uint8_t qs[32];   // grid index low bytes
  uint16_t qh[8];   // per 32 weights: 4 x 3 index bits, a 3-bit scale, the shift's sign
};
static_assert(sizeof(BlockIq1S) == 50);

struct BlockIq1M {  // 1.75: no d field; its fp16 bits are the top nibbles of the four scale words
  uint8_t qs[32];      // grid index low bytes
  uint8_t qh[16];      // per 16 weights: 2 x (3 index bits and the shift's sign)
  uint8_t scales[8];   // per 16 weights a 3-bit scale
};
static_assert(sizeof(BlockIq1M) == 56);

namespace iq {

inline constexpr uint16_t kIq2XxsGrid[256] = {OCTO_IQ2XXS_GRID_CODES};
inline constexpr uint16_t kIq2XsGrid[512] = {OCTO_IQ2XS_GRID_CODES};
inline constexpr uint16_t kIq2SGrid[1024] = {OCTO_IQ2S_GRID_CODES};
inline constexpr uint16_t kIq3XxsGrid[256] = {OCTO_IQ3XXS_GRID_CODES};
inline constexpr uint16_t kIq3SGrid[512] = {OCTO_IQ3S_GRID_CODES};
inline constexpr uint16_t kIq1SGrid[2048] = {OCTO_IQ1S_GRID_CODES};
#if defined(__CUDACC__)
// The device's copies (a kernel cannot read a host array).
static __device__ const uint16_t kIq2XxsGridDevice[256] = {OCTO_IQ2XXS_GRID_CODES};
static __device__ const uint16_t kIq2XsGridDevice[512] = {OCTO_IQ2XS_GRID_CODES};
static __device__ const uint16_t kIq2SGridDevice[1024] = {OCTO_IQ2S_GRID_CODES};
static __device__ const uint16_t kIq3XxsGridDevice[256] = {OCTO_IQ3XXS_GRID_CODES};
static __device__ const uint16_t kIq3SGridDevice[512] = {OCTO_IQ3S_GRID_CODES};
static __device__ const uint16_t kIq1SGridDevice[2048] = {OCTO_IQ1S_GRID_CODES};
#endif

// Entry i of grid `name`: the host's array, or in device code its copy.
#if defined(__CUDA_ARCH__)
#define OCTO_IQ_ENTRY(name, i) (name##Device[i])
#else
#define OCTO_IQ_ENTRY(name, i) (name[i])
#endif

// The 8 sign bits of a 7-bit sign index: the 8th makes the count even (the
// formats store 7 and imply the 8th).
OCTO_HD inline int EvenSigns(int seven) {
#if defined(__CUDA_ARCH__)
  const int parity = __popc(seven) & 1;
#else
  const int parity = __builtin_parity(static_cast<unsigned>(seven));
#endif
  return seven | (parity << 7);
}

// An IQ2 grid entry's level j (8, 25 or 43), signed by bit j of `signs`.
OCTO_HD inline int Iq2Level(uint16_t code, int signs, int j) {
  const int magnitude = (0x2B1908 >> (8 * ((code >> (2 * j)) & 3))) & 0xFF;  // 8, 25, 43
  return magnitude * (1 - 2 * ((signs >> j) & 1));
}

OCTO_HD inline int Iq3XxsLevel(uint16_t code, int j) {
  const int k = (code >> (3 * j)) & 7;
  return k == 7 ? 62 : 4 + 8 * k;
}

OCTO_HD inline int Iq3SLevel(uint16_t code, int j) { return 2 * ((code >> (3 * j)) & 7) + 1; }

// IQ2_XS/IQ2_S: a 4-bit scale per 16 weights, two to a byte per 32.
OCTO_HD inline int Scale16(const uint8_t* scales, int g) { return 2 * ((scales[g / 4] >> (4 * ((g % 4) / 2))) & 0xF) + 1; }

// IQ3: a group's two grid entries of 4 levels, signed by `signs`.
template <typename Level>
OCTO_HD void SignedPairLevels(uint16_t first, uint16_t second, int signs, Level level, int* L) {
  for (int j = 0; j < 8; ++j) {
    const int magnitude = j < 4 ? level(first, j) : level(second, j - 4);
    L[j] = magnitude * (1 - 2 * ((signs >> j) & 1));
  }
}

OCTO_HD inline uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

struct Iq2XxsTraits {
  using Block = BlockIq2Xxs;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kFactorPerBlock = false;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  // Group g: sub-block g / 4's first word holds the 4 grid indices (byte
  // g % 4), its second the signs (7 bits at 7 * (g % 4)) and the scale (top 4).
  OCTO_HD static uint32_t Aux(const Block& b, int g, int word) {
    const int base = 4 * (g / 4) + 2 * word;
    return static_cast<uint32_t>(b.qs[base]) | (static_cast<uint32_t>(b.qs[base + 1]) << 16);
  }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    const uint16_t code = OCTO_IQ_ENTRY(kIq2XxsGrid, (Aux(b, g, 0) >> (8 * (g % 4))) & 0xFF);
    const int signs = EvenSigns((Aux(b, g, 1) >> (7 * (g % 4))) & 127);
    for (int j = 0; j < 8; ++j) L[j] = Iq2Level(code, signs, j);
  }
  OCTO_HD static int Scale(const Block& b, int g) { return 2 * static_cast<int>(Aux(b, g, 1) >> 28) + 1; }
};

struct Iq2XsTraits {
  using Block = BlockIq2Xs;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kFactorPerBlock = false;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    const uint16_t q = b.qs[g];
    const uint16_t code = OCTO_IQ_ENTRY(kIq2XsGrid, q & 511);
    const int signs = EvenSigns(q >> 9);
    for (int j = 0; j < 8; ++j) L[j] = Iq2Level(code, signs, j);
  }
  OCTO_HD static int Scale(const Block& b, int g) { return Scale16(b.scales, g); }
};

struct Iq2STraits {
  using Block = BlockIq2S;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kFactorPerBlock = false;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    const int index = b.qs[g] | ((b.qh[g / 4] << (8 - 2 * (g % 4))) & 0x300);
    const uint16_t code = OCTO_IQ_ENTRY(kIq2SGrid, index);
    const int signs = b.qs[32 + g];
    for (int j = 0; j < 8; ++j) L[j] = Iq2Level(code, signs, j);
  }
  OCTO_HD static int Scale(const Block& b, int g) { return Scale16(b.scales, g); }
};

struct Iq3XxsTraits {
  using Block = BlockIq3Xxs;
  static constexpr float kFactor = 0.25f;
  static constexpr bool kFactorPerBlock = false;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  OCTO_HD static uint32_t Aux(const Block& b, int g) { return LoadU32(b.qs + 64 + 4 * (g / 4)); }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    const uint16_t first = OCTO_IQ_ENTRY(kIq3XxsGrid, b.qs[2 * g]);
    const uint16_t second = OCTO_IQ_ENTRY(kIq3XxsGrid, b.qs[2 * g + 1]);
    SignedPairLevels(first, second, EvenSigns((Aux(b, g) >> (7 * (g % 4))) & 127), Iq3XxsLevel, L);
  }
  OCTO_HD static int Scale(const Block& b, int g) { return 2 * static_cast<int>(Aux(b, g) >> 28) + 1; }
};

struct Iq3STraits {
  using Block = BlockIq3S;
  static constexpr float kFactor = 1.0f;
  static constexpr bool kFactorPerBlock = false;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    const int ib = g / 4, l = g % 4;
    const int high = b.qh[ib];
    const uint16_t first = OCTO_IQ_ENTRY(kIq3SGrid, b.qs[2 * g] | ((high << (8 - 2 * l)) & 256));
    const uint16_t second = OCTO_IQ_ENTRY(kIq3SGrid, b.qs[2 * g + 1] | ((high << (7 - 2 * l)) & 256));
    SignedPairLevels(first, second, b.signs[g], Iq3SLevel, L);
  }
  OCTO_HD static int Scale(const Block& b, int g) { return 2 * ((b.scales[g / 8] >> (4 * ((g / 4) % 2))) & 0xF) + 1; }
};

// IQ1: level 8 * t (t = -1, 0, +1 from the grid) plus the group's shift in
// eighths (+-1); factor 1/8.
OCTO_HD inline void Iq1Levels(uint16_t code, int shift, int* L) {
  for (int j = 0; j < 8; ++j) L[j] = 8 * (static_cast<int>((code >> (2 * j)) & 3) - 1) + shift;
}

struct Iq1STraits {
  using Block = BlockIq1S;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kFactorPerBlock = true;
  OCTO_HD static uint16_t DBits(const Block& b) { return b.d; }
  // Group g's entry of kIq1SGrid (11 bits).
  OCTO_HD static int GridIndex(const Block& b, int g) { return b.qs[g] | (((b.qh[g / 4] >> (3 * (g % 4))) & 7) << 8); }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    Iq1Levels(OCTO_IQ_ENTRY(kIq1SGrid, GridIndex(b, g)), Shift(b, g), L);
  }
  OCTO_HD static int Shift(const Block& b, int g) { return b.qh[g / 4] & 0x8000 ? -1 : 1; }
  OCTO_HD static int Scale(const Block& b, int g) { return 2 * ((b.qh[g / 4] >> 12) & 7) + 1; }
};

struct Iq1MTraits {
  using Block = BlockIq1M;
  static constexpr float kFactor = 0.125f;
  static constexpr bool kFactorPerBlock = true;
  OCTO_HD static int ScaleWord(const Block& b, int k) { return b.scales[2 * k] | (b.scales[2 * k + 1] << 8); }
  OCTO_HD static uint16_t DBits(const Block& b) {
    return static_cast<uint16_t>((ScaleWord(b, 0) >> 12) | ((ScaleWord(b, 1) >> 8) & 0x00F0) |
                                 ((ScaleWord(b, 2) >> 4) & 0x0F00) | (ScaleWord(b, 3) & 0xF000));
  }
  // Writes d's fp16 bits into the scale words' top nibbles (DBits' inverse;
  // for blocks made by hand or at random).
  static void SetDBits(uint8_t* block, uint16_t bits) {
    uint8_t* scales = block + offsetof(Block, scales);
    for (int k = 0; k < 4; ++k) {
      scales[2 * k + 1] = static_cast<uint8_t>((scales[2 * k + 1] & 0x0F) | (((bits >> (4 * k)) & 0xF) << 4));
    }
  }
  // Group g's entry of kIq1SGrid (11 bits).
  OCTO_HD static int GridIndex(const Block& b, int g) {
    const int qh = b.qh[2 * (g / 4) + (g % 4) / 2];
    const bool upper = (g % 2) == 1;  // the byte's high nibble
    return b.qs[g] | (((upper ? qh >> 4 : qh) << 8) & 0x700);
  }
  OCTO_HD static void Levels(const Block& b, int g, int* L) {
    Iq1Levels(OCTO_IQ_ENTRY(kIq1SGrid, GridIndex(b, g)), Shift(b, g), L);
  }
  OCTO_HD static int Shift(const Block& b, int g) {
    return b.qh[2 * (g / 4) + (g % 4) / 2] & ((g % 2) == 1 ? 0x80 : 0x08) ? -1 : 1;
  }
  OCTO_HD static int Scale(const Block& b, int g) {
    const int ib = g / 4;
    return 2 * ((ScaleWord(b, ib / 2) >> (6 * (ib % 2) + 3 * ((g % 4) / 2))) & 7) + 1;
  }
};

}  // namespace iq
}  // namespace octo::cpu
