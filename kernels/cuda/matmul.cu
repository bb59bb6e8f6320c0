// cuda::MatMul (kernels/ops.h): checks the arguments, then takes the decode
// path (matmul_decode.cu, kMaxDecodeTokens tokens per launch) for up to
// kMaxDecodePathTokens tokens and the prefill path (matmul_prefill.cu)
// beyond.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {

size_t MatMulScratchBytes(const WeightMatrix& w, int n_tokens) {
  if (n_tokens <= kMaxDecodePathTokens) {
    return matmul::DecodeScratchBytes(w.type, w.cols, n_tokens < kMaxDecodeTokens ? n_tokens : kMaxDecodeTokens);
  }
  return matmul::PrefillScratchBytes(w.type, w.rows, w.cols, n_tokens);
}

absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape("MatMul", w);
  if (!row_bytes.ok()) return row_bytes.status();
  if (absl::Status null = CheckNotNull("MatMul", {{"x", x}, {"out", out}}); !null.ok()) return null;
  if (n_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: n_tokens (%d) must be positive", n_tokens));
  }
  if (w.rows > INT32_MAX || w.cols > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: w (%d x %d) has more than 2^31 rows or columns", w.rows, w.cols));
  }
  if (Overlaps(x, int64_t{n_tokens} * w.cols * 4, out, int64_t{n_tokens} * w.rows * 4)) {
    return absl::InvalidArgumentError("MatMul: out overlaps x");
  }
  const size_t scratch = MatMulScratchBytes(w, n_tokens);
  if (exec.scratch_bytes < scratch || (scratch > 0 && exec.scratch == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMul: exec.scratch holds %d bytes, this call needs %d (MatMulScratchBytes)", exec.scratch_bytes, scratch));
  }
  if (n_tokens <= kMaxDecodePathTokens) {
    // Launches of kMaxDecodeTokens tokens, in order on one stream (so they
    // share the scratch).
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxDecodeTokens) {
      const int n = n_tokens - t0 < kMaxDecodeTokens ? n_tokens - t0 : kMaxDecodeTokens;
      absl::Status s = matmul::Decode(w, *row_bytes, x + int64_t{t0} * w.cols, out + int64_t{t0} * w.rows, n, exec);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (exec.blas == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMul: exec.blas is null; %d tokens (more than %d) take the cuBLAS path", n_tokens, kMaxDecodePathTokens));
  }
  return matmul::Prefill(w, *row_bytes, x, out, n_tokens, exec);
}

}  // namespace octo::cuda
