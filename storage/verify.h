// Verification of a layer directory: the manifest parses and is consistent,
// and every file it lists exists with the right size, header and checksum.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "storage/manifest.h"

namespace octo {

struct VerifyProblem {
  std::string file;     // "manifest.json", "layer_003.bin", ...
  std::string message;  // what is wrong with it
};

struct VerifyReport {
  std::vector<std::string> files_ok;
  std::vector<VerifyProblem> problems;
  std::vector<std::string> notes;  // not failures, e.g. files the manifest does not list
  uint64_t bytes_checked = 0;
  bool ok() const { return problems.empty(); }
};

// Checks everything; never stops at the first problem in a data file (each
// bad file is named), but stops after a manifest problem since nothing else
// can be trusted then. `progress` gets (bytes hashed, bytes total).
VerifyReport VerifyModelDir(const std::string& dir,
                            const std::function<void(uint64_t, uint64_t)>& progress = {});

// Checks one file against its manifest entry: size, header (format version
// kOldestFormatVersion .. kFormatVersion) and the whole file's checksum; for
// a format-2 MoE layer file also the dense part's and each expert block's,
// naming each part that does not match ("expert 5 of layer 3: checksum
// mismatch (...)", "dense part: ..."). DATA_LOSS naming the defect.
// `entry` must be one ValidateManifestLayout accepts (as from ReadManifest).
absl::Status VerifyModelFile(const std::string& path, const ManifestFile& entry,
                             const std::function<void(uint64_t)>& on_bytes = {});

}  // namespace octo
