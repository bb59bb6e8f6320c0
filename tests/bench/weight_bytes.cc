#include "tests/bench/weight_bytes.h"

#include "absl/strings/match.h"

namespace octo::bench {
namespace {

uint64_t Elements(const ManifestTensor& t) {
  uint64_t n = 1;
  for (uint64_t d : t.shape) n *= d;
  return n;
}

// A matrix (not a norm or bias vector): what MatMul multiplies by.
bool IsMatrix(const ManifestTensor& t) { return t.shape.size() >= 2; }

}  // namespace

WeightBytes WeightBytesPerToken(const Manifest& manifest) {
  const ModelConfig& c = manifest.config;
  WeightBytes w;
  for (const ManifestFile& f : manifest.files) {
    switch (f.kind) {
      case FileKind::kLayer:
        for (const ManifestTensor& t : f.tensors) {
          // Stacked experts: a token reads n_experts_used of them.
          const bool experts = absl::StrContains(t.name, "_exps.");
          const uint64_t num = experts ? c.n_experts_used : 1;
          const uint64_t den = experts ? c.n_experts : 1;
          w.layers += t.bytes * num / den;
          if (IsMatrix(t)) {
            w.matmul_elements += Elements(t) * num / den;
            w.matrix_bytes_by_type[std::string(t.type.name)] += t.bytes * num / den;
          }
        }
        break;
      case FileKind::kLmHead:
        for (const ManifestTensor& t : f.tensors) {
          w.lm_head += t.bytes;
          w.matmul_elements += Elements(t);
          w.matrix_bytes_by_type[std::string(t.type.name)] += t.bytes;
        }
        break;
      case FileKind::kEmbed:
        for (const ManifestTensor& t : f.tensors) {
          // One row per token, plus the whole matrix as the lm_head when tied.
          w.other += t.bytes / t.shape.back();
          if (c.tied_embeddings && t.name == "token_embd.weight") {
            w.lm_head += t.bytes;
            w.matmul_elements += Elements(t);
            w.matrix_bytes_by_type[std::string(t.type.name)] += t.bytes;
          }
        }
        break;
      case FileKind::kFinalNorm:
      case FileKind::kExtra:
        for (const ManifestTensor& t : f.tensors) w.other += t.bytes;
        break;
    }
  }
  return w;
}

}  // namespace octo::bench
