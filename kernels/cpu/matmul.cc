// MatMul on the CPU: out (n_tokens, rows) = x (n_tokens, cols) · w^T, straight
// from w's block bytes. Semantics and preconditions: kernels/ops.h.
//
// 1. Each row of x is encoded once into the activation type of w's type
//    (quantize_activation.h), into a scratch buffer owned by the calling
//    thread (grown as needed, kept for the next call: no allocation in the
//    steady state).
// 2. The rows of w are cut into chunks, one pool task each. A task computes
//    out[t][r] for every token t and every row r of its chunk, tokens in the
//    outer loop, so for a batch (prefill) the chunk's weight bytes are read
//    from memory once and then served from cache for every further token.
//
// out[t][r] is always the one dot product of w's row r with x[t]'s encoding,
// by the same function: it depends on neither n_tokens, nor the chunking,
// nor the thread that ran it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/ops.h"
#include "storage/status_macros.h"

namespace octo::cpu {
namespace {

// In a batch, a chunk of about this many weight bytes is reused across the
// tokens: well inside a core's L2 (512 KiB or more on current x86), leaving
// room for the activation rows streaming past it.
constexpr int64_t kBatchChunkBytes = 128 << 10;
// Tasks per pool thread, so a slow thread does not hold up the call.
constexpr int64_t kTasksPerThread = 4;

bool Overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a);
  const auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

int64_t RowsPerChunk(int64_t rows, int64_t row_bytes, int n_tokens, int n_threads) {
  const int64_t for_balance = (rows + n_threads * kTasksPerThread - 1) / (n_threads * kTasksPerThread);
  if (n_tokens == 1) return std::max<int64_t>(1, for_balance);
  const int64_t for_cache = std::max<int64_t>(1, kBatchChunkBytes / row_bytes);
  return std::max<int64_t>(1, std::min(for_balance, for_cache));
}

}  // namespace

absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec) {
  OCTO_ASSIGN_OR_RETURN(const CheckedWeights checked, CheckWeightMatrix("MatMul", w));
  if (x == nullptr) return absl::InvalidArgumentError("MatMul: x is null");
  if (out == nullptr) return absl::InvalidArgumentError("MatMul: out is null");
  if (n_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: n_tokens (%d) must be positive", n_tokens));
  }
  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  if (Overlaps(x, n_tokens * cols * 4, out, n_tokens * rows * 4)) {
    return absl::InvalidArgumentError("MatMul: out overlaps x");
  }

  const TypeKernels& kernels = *checked.kernels;
  const VecDotFn dot = SelectDot(kernels, exec.simd);
  const int n_threads = exec.pool != nullptr ? exec.pool->size() : 1;

  // 1. Encode the activations (F32 weights read x as it is).
  const void* x_enc = x;
  int64_t x_stride = cols * 4;
  if (kernels.act != ActType::kF32) {
    thread_local std::vector<uint8_t> scratch;
    x_stride = ActRowBytes(kernels.act, cols);
    if (static_cast<int64_t>(scratch.size()) < n_tokens * x_stride) scratch.resize(n_tokens * x_stride);
    uint8_t* enc = scratch.data();
    auto encode = [&](int64_t t) {
      QuantizeActivationRow(kernels.act, x + t * cols, cols, enc + t * x_stride, exec.simd);
    };
    if (exec.pool != nullptr && n_tokens > 1) {
      exec.pool->ParallelFor(n_tokens, encode);
    } else {
      for (int t = 0; t < n_tokens; ++t) encode(t);
    }
    x_enc = enc;
  }

  // 2. Rows in chunks, tokens inside a chunk.
  const auto* w_bytes = static_cast<const uint8_t*>(w.data);
  const auto* x_bytes = static_cast<const uint8_t*>(x_enc);
  const int64_t rows_per_chunk = RowsPerChunk(rows, checked.row_bytes, n_tokens, n_threads);
  const int64_t n_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  auto run_chunk = [&](int64_t chunk) {
    const int64_t r0 = chunk * rows_per_chunk;
    const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* x_row = x_bytes + t * x_stride;
      float* out_row = out + t * rows;
      for (int64_t r = r0; r < r1; ++r) out_row[r] = dot(w_bytes + r * checked.row_bytes, x_row, cols);
    }
  };
  if (exec.pool != nullptr) {
    exec.pool->ParallelFor(n_chunks, run_chunk);
  } else {
    for (int64_t c = 0; c < n_chunks; ++c) run_chunk(c);
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
