#include "client/inspect.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/progress.h"
#include "storage/gguf.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {
namespace {

std::string Shape(const std::vector<uint64_t>& dims) { return "[" + absl::StrJoin(dims, ", ") + "]"; }

void PrintMetadata(const MetadataList& list, int max_elements, std::ostream& out) {
  for (const auto& [key, value] : list) {
    out << absl::StrFormat("  %-44s %-4s %s\n", key, GgufValueTypeName(value.type),
                           GgufValueToDisplay(value, max_elements));
  }
}

}  // namespace

absl::Status InspectGguf(const std::string& path, int max_elements, std::ostream& out) {
  OCTO_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
  out << absl::StrFormat("%s: GGUF version %u, %s (%u bytes), alignment %u, tensor data at offset %u\n", path,
                         gguf.version(), Progress::FormatBytes(gguf.file_size()), gguf.file_size(), gguf.alignment(),
                         gguf.data_offset());
  out << absl::StrFormat("\nmetadata: %u keys\n", gguf.metadata().size());
  PrintMetadata(gguf.metadata(), max_elements, out);
  out << absl::StrFormat("\ntensors: %u\n", gguf.tensors().size());
  out << absl::StrFormat("  %5s  %-36s %-6s %-24s %14s %14s\n", "#", "name", "type", "shape", "offset", "bytes");
  uint64_t total = 0;
  for (size_t i = 0; i < gguf.tensors().size(); ++i) {
    const GgufTensorInfo& t = gguf.tensors()[i];
    out << absl::StrFormat("  %5u  %-36s %-6s %-24s %14u %14u\n", i, t.name, t.type.name, Shape(t.dims), t.offset,
                           t.n_bytes);
    total += t.n_bytes;
  }
  out << absl::StrFormat("  total tensor data: %s\n", Progress::FormatBytes(total));
  return absl::OkStatus();
}

absl::Status InspectModelDir(const std::string& dir, int max_elements, std::ostream& out) {
  OCTO_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  const ModelConfig& c = m.config;
  out << absl::StrFormat("%s: Octo model directory (format %u), from %s (GGUF v%u, %u bytes)\n", dir,
                         m.format_version, m.source_name, m.source_gguf_version, m.source_bytes);
  out << absl::StrFormat(
      "\nconfig: %s \"%s\"\n  dim %u, hidden_dim %u, layers %u, heads %u, kv heads %u, head_dim %u\n"
      "  vocab %u, context %u, rope %s dim %u theta %g, norm eps %g, %s embeddings\n",
      c.architecture, c.name, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size,
      c.context_length, c.rope_style == RopeStyle::kNormal ? "normal" : "neox", c.rope_dim, c.rope_theta, c.norm_eps,
      c.tied_embeddings ? "tied" : "separate");
  if (c.n_experts > 0) {
    out << absl::StrFormat("  experts %u, used per token %u, expert hidden_dim %u\n", c.n_experts, c.n_experts_used,
                           c.expert_hidden_dim);
  }
  if (IsHybridArchitecture(c.architecture)) {
    uint32_t deltanet = 0;
    for (uint32_t l = 0; l < c.n_layers; ++l) deltanet += IsDeltaNetLayer(c, l);
    out << absl::StrFormat(
        "  gated DeltaNet in %u of %u layers (attention every %u), heads %u qk / %u v of %u, conv %u\n", deltanet,
        c.n_layers, c.full_attention_interval, c.ssm_k_heads, c.ssm_v_heads, c.ssm_head_dim, c.ssm_conv_kernel);
  }
  out << absl::StrFormat("\ntokenizer: %u keys\n", m.tokenizer.size());
  PrintMetadata(m.tokenizer, max_elements, out);
  out << absl::StrFormat("\nfiles: %u\n", m.files.size());
  uint64_t total = 0;
  for (const ManifestFile& f : m.files) {
    out << absl::StrFormat("  %-16s %12u bytes  %s  %u tensors\n", f.name, f.size, FormatChecksum(f.checksum),
                           f.tensors.size());
    for (const ManifestTensor& t : f.tensors) {
      out << absl::StrFormat("      %-36s %-6s %-24s offset %12u  %12u bytes\n", t.name, t.type.name, Shape(t.shape),
                             t.offset, t.bytes);
    }
    total += f.size;
  }
  out << absl::StrFormat("  total: %s\n", Progress::FormatBytes(total));
  return absl::OkStatus();
}

}  // namespace octo
