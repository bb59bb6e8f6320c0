// `octo-ctl inspect`: a readable dump of a GGUF file (like gguf-dump) or of
// a layer directory's manifest.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace octo {

// Prints header, metadata and a tensor table. Arrays show their first
// `max_array_elements` elements.
absl::Status InspectGguf(const std::string& path, int max_array_elements, std::ostream& out);

// Prints the config, tokenizer summary and a table of files and tensors.
absl::Status InspectModelDir(const std::string& dir, int max_array_elements, std::ostream& out);

}  // namespace octo
