// libFuzzer target for the GGUF parser and what runs on its output.
//
// Parses the input as a GGUF file held in memory. When it parses, plans the
// layer directory, and when that succeeds, checks that the manifest it would
// write parses back with the same files and tensors: a manifest decompose
// writes must always be one the daemon can read.
//
// Built and run as tests/fuzz/CMakeLists.txt and run_long.sh say.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "storage/byte_source.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "storage/manifest.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "gguf_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = octo::GgufFile::Parse(std::make_unique<octo::MemorySource>(std::vector<uint8_t>(data, data + size)));
  if (!file.ok()) {
    Check(!file.status().message().empty(), "an error names its defect");
    Check(file.status().message().size() < 4096, "an error quotes a short prefix at most");
    return 0;
  }
  for (const octo::GgufTensorInfo& t : file->tensors()) {
    Check(t.offset >= file->data_offset() && t.offset <= size && t.n_bytes <= size - t.offset,
          "every tensor lies inside the file");
  }
  auto plan = octo::PlanLayerDirectory(*file, "fuzz.gguf");
  if (!plan.ok()) {
    Check(plan.status().message().size() < 4096, "a refused model's error quotes a short prefix at most");
    return 0;
  }
  auto again = octo::ParseManifest(octo::ManifestToJson(*plan));
  if (!again.ok()) std::fprintf(stderr, "%s\n", again.status().ToString().c_str());
  Check(again.ok(), "a planned manifest parses back");
  Check(again->files.size() == plan->files.size(), "the round trip keeps every file");
  for (size_t i = 0; i < plan->files.size(); ++i) {
    Check(again->files[i].name == plan->files[i].name, "file names survive the round trip");
    Check(again->files[i].tensors.size() == plan->files[i].tensors.size(), "tensor lists survive the round trip");
  }
  return 0;
}
