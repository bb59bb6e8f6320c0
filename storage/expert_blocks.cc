#include "storage/expert_blocks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

// A programmer error (a caller broke a documented precondition): abort with file:line.
void Require(bool condition, const char* what, int line) {
  if (condition) return;
  std::fprintf(stderr, "%s:%d: precondition failed: %s\n", __FILE__, line, what);
  std::abort();
}

absl::Status FileError(const ManifestFile& file, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file.name, ": ", message));
}

absl::Status TensorError(const ManifestFile& file, const ManifestTensor& t, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file.name, ": tensor ", t.name, ": ", message));
}

}  // namespace

ByteRange DenseRange(const ManifestFile& file) {
  if (!file.experts.has_value()) return {0, file.size};
  return {0, file.experts->offset};
}

ByteRange ExpertRange(const ManifestFile& file, uint32_t expert) {
  Require(file.experts.has_value(), "ExpertRange: the file has no expert blocks", __LINE__);
  Require(expert < file.experts->count, "ExpertRange: expert index past experts->count", __LINE__);
  return {file.experts->offset + uint64_t{expert} * file.experts->stride, file.experts->stride};
}

bool IsStackedExpertTensor(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "blk.")) return false;
  const size_t dot = name.find('.');
  if (dot == 0 || dot == absl::string_view::npos) return false;
  if (name.substr(0, dot).find_first_not_of("0123456789") != absl::string_view::npos) return false;
  const absl::string_view rest = name.substr(dot + 1);
  return std::find(std::begin(kStackedExpertSuffixes), std::end(kStackedExpertSuffixes), rest) !=
         std::end(kStackedExpertSuffixes);
}

absl::Status CheckExpertBlocks(const ManifestFile& file, uint32_t n_experts, uint32_t format_version) {
  const bool moe_layer = file.kind == FileKind::kLayer && n_experts > 0;
  if (!file.experts.has_value()) {
    if (format_version >= 2 && moe_layer) {
      return FileError(file, "\"experts\" is missing: in format 2 a layer file of a mixture-of-experts model "
                             "keeps its experts in blocks");
    }
    for (const ManifestTensor& t : file.tensors) {
      if (t.expert_stride != 0) return TensorError(file, t, "has an expert_stride but the file has no \"experts\"");
    }
    return absl::OkStatus();
  }
  if (format_version < 2) {
    return FileError(file, absl::StrCat("has \"experts\", which format version ", format_version, " does not have"));
  }
  if (!moe_layer) {
    return FileError(file,
                     "has \"experts\", but only the layer files of a mixture-of-experts model have expert blocks");
  }
  const ExpertBlocks& x = *file.experts;
  if (x.count != n_experts) {
    return FileError(file, absl::StrCat("experts.count is ", x.count, " but the model has ", n_experts, " experts"));
  }
  if (x.offset % kAlignment != 0 || x.offset < kHeaderBytes) {
    return FileError(file, absl::StrCat("experts.offset ", x.offset, " is not a multiple of ", kAlignment,
                                        " past the header page"));
  }
  if (x.stride == 0 || x.stride % kAlignment != 0) {
    return FileError(file, absl::StrCat("experts.stride ", x.stride, " is not a positive multiple of ", kAlignment));
  }
  uint64_t blocks_bytes = 0, end = 0;
  if (__builtin_mul_overflow(uint64_t{x.count}, x.stride, &blocks_bytes) ||
      __builtin_add_overflow(x.offset, blocks_bytes, &end) || end != file.size) {
    return FileError(file, absl::StrCat("experts: ", x.count, " blocks of ", x.stride, " bytes from offset ", x.offset,
                                        " do not end at the file size ", file.size));
  }
  if (x.checksums.size() != x.count) {
    return FileError(file, absl::StrCat("experts: ", x.checksums.size(), " checksums for ", x.count, " experts"));
  }
  for (const ManifestTensor& t : file.tensors) {
    if (IsStackedExpertTensor(t.name) && t.expert_stride != x.stride) {
      return TensorError(file, t,
                         absl::StrCat("expert_stride is ", t.expert_stride, " but experts.stride is ", x.stride));
    }
    if (!IsStackedExpertTensor(t.name) && t.expert_stride != 0) {
      return TensorError(file, t, "has an expert_stride but is not a stacked expert tensor");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStridedTensor(const ManifestFile& file, const ManifestTensor& t) {
  const ExpertBlocks& x = *file.experts;
  if (t.bytes % x.count != 0) {
    return TensorError(file, t, absl::StrCat(t.bytes, " bytes do not split into ", x.count, " equal expert slices"));
  }
  if (t.offset < x.offset) {
    return TensorError(file, t, absl::StrCat("offset ", t.offset, " is before the expert blocks (experts.offset ",
                                             x.offset, ")"));
  }
  const uint64_t in_block = t.offset - x.offset;
  const uint64_t slice = t.bytes / x.count;
  if (in_block % kAlignment != 0 || in_block > x.stride || slice > x.stride - in_block) {
    return TensorError(file, t, absl::StrCat("expert slice [", in_block, ", +", slice, ") is not a ", kAlignment,
                                             "-aligned range inside the ", x.stride, "-byte expert block"));
  }
  return absl::OkStatus();
}

uint64_t TensorExtent(const ManifestFile& file, const ManifestTensor& t) {
  if (t.expert_stride == 0) return t.bytes;
  const ExpertBlocks& x = *file.experts;
  // Cannot overflow: CheckExpertBlocks found count * stride to fit.
  return uint64_t{x.count - 1} * x.stride + t.bytes / x.count;
}

absl::Status CheckExpertSlices(const ManifestFile& file) {
  if (!file.experts.has_value()) return absl::OkStatus();
  const ExpertBlocks& x = *file.experts;
  std::vector<const ManifestTensor*> stacked;
  for (const ManifestTensor& t : file.tensors) {
    if (t.expert_stride != 0) {
      stacked.push_back(&t);
    } else if (t.offset + t.bytes > x.offset) {
      return TensorError(file, t, absl::StrCat("ends at ", t.offset + t.bytes, ", past the dense part (experts.offset ",
                                               x.offset, ")"));
    }
  }
  std::sort(stacked.begin(), stacked.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < stacked.size(); ++i) {
    if (stacked[i]->offset < stacked[i - 1]->offset + stacked[i - 1]->bytes / x.count) {
      return TensorError(file, *stacked[i],
                         absl::StrCat("expert slice overlaps that of tensor ", stacked[i - 1]->name));
    }
  }
  return absl::OkStatus();
}

std::vector<ByteRange> ExpertChecksumRanges(const ManifestFile& file) {
  std::vector<ByteRange> ranges;
  if (!file.experts.has_value()) return ranges;
  ranges.push_back(DenseRange(file));
  for (uint32_t e = 0; e < file.experts->count; ++e) ranges.push_back(ExpertRange(file, e));
  return ranges;
}

}  // namespace octo
