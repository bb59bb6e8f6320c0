// libFuzzer target for manifest.json, the file octod trusts to describe a
// model directory (storage/manifest.h).
//
// Parses the input as manifest.json. A manifest that parses must write back
// (ManifestToJson) to text that parses to the same files and tensors, as
// decompose's own manifests do; one that fails must say why, briefly.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "storage/manifest.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "manifest_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::StatusOr<octo::Manifest> manifest =
      octo::ParseManifest(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!manifest.ok()) {
    Check(!manifest.status().message().empty(), "an error names its defect");
    Check(manifest.status().message().size() < 4096, "an error quotes a short prefix at most");
    return 0;
  }
  const absl::StatusOr<octo::Manifest> again = octo::ParseManifest(octo::ManifestToJson(*manifest));
  if (!again.ok()) std::fprintf(stderr, "%s\n", again.status().ToString().c_str());
  Check(again.ok(), "a manifest that parsed writes back to one that parses");
  Check(again->files.size() == manifest->files.size(), "the round trip keeps every file");
  for (size_t i = 0; i < manifest->files.size(); ++i) {
    Check(again->files[i].name == manifest->files[i].name, "file names survive the round trip");
    Check(again->files[i].checksum == manifest->files[i].checksum, "checksums survive the round trip");
    Check(again->files[i].tensors.size() == manifest->files[i].tensors.size(), "tensor lists survive the round trip");
  }
  return 0;
}
