// Constants of the layer directory format (see storage/FORMAT.md, which
// describes every byte; keep the two in step and bump kFormatVersion on any
// change a reader would notice).
#pragma once

#include <cstdint>

namespace octo {

// Version 2 lays each MoE layer file out in per-expert blocks (see
// FORMAT.md); readers still accept version 1 directories.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr char kManifestName[] = "manifest.json";
inline constexpr char kManifestFormatName[] = "octo-model-dir";

// Every tensor starts at a multiple of this and every file's size is one, so
// a layer file can be read with O_DIRECT straight into a ring slot (which
// needs 512 B or 4 KiB aligned offsets, lengths and buffers) and copied to
// the GPU as one contiguous block.
inline constexpr uint64_t kAlignment = 4096;

// Each file opens with one header page; tensors follow it.
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr char kFileMagic[8] = {'O', 'C', 'T', 'O', 'L', 'Y', 'R', '1'};

// Header field offsets (little-endian).
inline constexpr uint64_t kHeaderMagicOffset = 0;          // 8 bytes
inline constexpr uint64_t kHeaderVersionOffset = 8;        // u32 format version
inline constexpr uint64_t kHeaderKindOffset = 12;          // u32 FileKind
inline constexpr uint64_t kHeaderLayerOffset = 16;         // u32 layer index, kNoLayer otherwise
inline constexpr uint64_t kHeaderTensorCountOffset = 20;   // u32
inline constexpr uint64_t kHeaderFileSizeOffset = 24;      // u64 whole file, header included
inline constexpr uint64_t kHeaderChecksumOffset = 32;      // u64 XXH64 of bytes [0, 32)
inline constexpr uint64_t kHeaderUsedBytes = 40;           // the rest of the page is zero
inline constexpr uint32_t kNoLayer = 0xFFFFFFFFu;

// What a file holds. Values are stored in headers: never renumber.
enum class FileKind : uint32_t {
  kEmbed = 1,      // embed.bin: token_embd.weight
  kLayer = 2,      // layer_NNN.bin: every blk.NNN.* tensor, experts included
  kLmHead = 3,     // lm_head.bin: output.weight (absent when tied to the embedding)
  kFinalNorm = 4,  // final_norm.bin: output_norm.weight
  kExtra = 5,      // extra.bin: other whole-model tensors (e.g. rope_freqs.weight)
};

// Limits a manifest reader enforces on hostile input.
inline constexpr uint64_t kMaxManifestBytes = 512ull << 20;
inline constexpr uint32_t kMaxLayers = 4096;
inline constexpr uint32_t kMaxTensorsPerFile = 65536;
inline constexpr uint32_t kMaxExperts = 1024;  // per MoE layer

}  // namespace octo
