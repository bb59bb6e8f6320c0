#include "tests/daemon/engine/reference_gguf.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/status_macros.h"

namespace octo::testing {

absl::StatusOr<double> ReferenceNumber(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return absl::InvalidArgumentError("missing metadata key " + key);
  return v->AsDouble();
}

absl::StatusOr<std::vector<double>> ReferenceTensor(const GgufFile& g, const std::string& name,
                                                    const std::vector<uint64_t>& shape) {
  const GgufTensorInfo* t = g.FindTensor(name);
  if (t == nullptr) return absl::InvalidArgumentError("missing tensor " + name);
  if (t->type.type != GgmlType::kF32) return absl::InvalidArgumentError(name + " is not F32");
  if (t->dims != shape) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has shape [", absl::StrJoin(t->dims, ", "),
                                                   "], expected [", absl::StrJoin(shape, ", "), "]"));
  }
  std::vector<uint8_t> bytes(t->n_bytes);
  OCTO_RETURN_IF_ERROR(g.ReadTensorData(*t, 0, bytes));
  std::vector<double> out(t->n_elements);
  for (uint64_t i = 0; i < t->n_elements; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + i * sizeof f, sizeof f);
    out[i] = f;
  }
  return out;
}

}  // namespace octo::testing
