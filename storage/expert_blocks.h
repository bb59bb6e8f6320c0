// Format 2's expert blocks (storage/FORMAT.md, "MoE layer files"): which
// tensors they hold, what a reader checks of them, and the byte ranges their
// checksums cover. Used by the manifest reader, decompose and verify.
// DenseRange and ExpertRange, declared in manifest.h, live here too.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/manifest.h"

namespace octo {

// The stacked expert tensors, in the order a block holds their slices.
inline constexpr absl::string_view kStackedExpertSuffixes[] = {
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_down_exps.weight",
};

// True for blk.N.ffn_{gate,up,down}_exps.weight.
bool IsStackedExpertTensor(absl::string_view name);

// The first checks of `file`'s expert blocks, before its tensors are looked
// at: a format 2 layer file of a MoE model (n_experts > 0) has `experts` and
// no other file does (format 1 never); count, alignment, size and number of
// checksums agree; exactly the stacked tensors have an expert_stride, equal
// to experts->stride. INVALID_ARGUMENT naming the file and the defect.
absl::Status CheckExpertBlocks(const ManifestFile& file, uint32_t n_experts, uint32_t format_version);

// A strided tensor `t` of `file` (expert_stride != 0; CheckExpertBlocks has
// passed): its bytes split into `count` equal slices, and its slice lies at
// an aligned offset inside the expert block. INVALID_ARGUMENT naming the
// file and tensor.
absl::Status CheckStridedTensor(const ManifestFile& file, const ManifestTensor& t);

// How far tensor `t` reaches from its offset: its bytes when packed; the last
// expert's slice end, (count - 1) * stride + bytes / count, when strided.
// Only after CheckExpertBlocks(file) has passed.
uint64_t TensorExtent(const ManifestFile& file, const ManifestTensor& t);

// The checks across tensors, once each lies inside the file: the packed
// tensors end within the dense part and no two expert slices overlap.
// INVALID_ARGUMENT naming the file and tensor. No-op without experts.
absl::Status CheckExpertSlices(const ManifestFile& file);

// What the per-part checksums of `file` cover, in file order: the dense
// part, then expert 0's block, expert 1's, ...; empty without experts.
std::vector<ByteRange> ExpertChecksumRanges(const ManifestFile& file);

}  // namespace octo
