// MatMul on the CPU: out (n_tokens, rows) = x (n_tokens, cols) · w^T, straight
// from w's block bytes. Semantics and preconditions: kernels/ops.h.
//
// 1. Each row of x is encoded once into the activation type of w's type
//    (quantize_activation.h), into a scratch buffer owned by the calling
//    thread (grown as needed, kept for the next call: no allocation in the
//    steady state).
//    In a batch, where w's type has a tile dot (type_kernels.h), the encoded
//    rows are also packed into token tiles of up to kMaxTileTokens tokens
//    (act_tile.h).
// 2. The rows of w are cut into chunks, one pool task each. A task computes
//    out[t][r] for every token t and every row r of its chunk, tokens in the
//    outer loop, so for a batch (prefill) the chunk's weight bytes are read
//    from memory once and then served from cache for every further token.
//    With tiles the outer loop is over the tiles, and each row is unpacked
//    once per tile rather than once per token.
//
// out[t][r] is always the one dot product of w's row r with x[t]'s encoding,
// computed as the type's one-token dot computes it (the tile dots give the
// same bits): it depends on neither n_tokens, nor the tiling, nor the
// chunking, nor the thread that ran it.
#include <algorithm>
#include <array>
#include <span>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/act_tile.h"
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

// passes: how many times a task reads its chunk's weights (once per token,
// or once per tile).
int64_t RowsPerChunk(int64_t rows, int64_t row_bytes, int64_t passes, int n_threads) {
  const int64_t for_balance = (rows + n_threads * kTasksPerThread - 1) / (n_threads * kTasksPerThread);
  if (passes == 1) return std::max<int64_t>(1, for_balance);
  const int64_t for_cache = std::max<int64_t>(1, kBatchChunkBytes / row_bytes);
  return std::max<int64_t>(1, std::min(for_balance, for_cache));
}

}  // namespace

absl::Status MatMulGroup(std::span<const WeightMatrix> ws, const float* x, std::span<float* const> outs,
                         int n_tokens, const Exec& exec) {
  if (ws.empty() || ws.size() > kMaxMatMulGroup || outs.size() != ws.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMul: %d matrices and %d outputs (1..%d matrices, one output each)", ws.size(), outs.size(),
        kMaxMatMulGroup));
  }
  if (x == nullptr) return absl::InvalidArgumentError("MatMul: x is null");
  if (n_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("MatMul: n_tokens (%d) must be positive", n_tokens));
  }
  const int64_t cols = ws[0].cols;
  const int n_threads = exec.pool != nullptr ? exec.pool->size() : 1;
  const int64_t n_tiles = (n_tokens + kMaxTileTokens - 1) / kMaxTileTokens;

  // What each matrix needs, checked before anything is written.
  struct Job {
    CheckedWeights checked;
    VecDotFn dot;
    VecDotTileFn dot_tile;    // nullptr: one token at a time
    const uint8_t* w_bytes;
    int64_t rows;
    float* out;
    int slot;                 // which encoding of x it reads
    int64_t rows_per_chunk;
    int64_t first_task;       // its chunks are tasks [first_task, first_task + n_chunks)
  };
  std::array<Job, kMaxMatMulGroup> jobs;
  std::array<ActType, kMaxMatMulGroup> slot_types;
  std::array<bool, kMaxMatMulGroup> slot_tiled{};  // some job reads the slot's tiles
  int n_slots = 0;
  int64_t n_tasks = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    OCTO_ASSIGN_OR_RETURN(const CheckedWeights checked, CheckWeightMatrix("MatMul", ws[i]));
    if (ws[i].cols != cols) {
      return absl::InvalidArgumentError(absl::StrFormat("MatMul: matrix %d has %d columns, matrix 0 has %d", i,
                                                        ws[i].cols, cols));
    }
    if (outs[i] == nullptr) return absl::InvalidArgumentError("MatMul: out is null");
    if (Overlaps(x, n_tokens * cols * 4, outs[i], n_tokens * ws[i].rows * 4)) {
      return absl::InvalidArgumentError("MatMul: out overlaps x");
    }
    Job& job = jobs[i];
    job.checked = checked;
    job.dot = SelectDot(*checked.kernels, exec.simd);
    job.dot_tile = n_tokens > 1 ? SelectDotTile(*checked.kernels, exec.simd) : nullptr;
    job.w_bytes = static_cast<const uint8_t*>(ws[i].data);
    job.rows = ws[i].rows;
    job.out = outs[i];
    job.slot = 0;
    while (job.slot < n_slots && slot_types[job.slot] != checked.kernels->act) ++job.slot;
    if (job.slot == n_slots) slot_types[n_slots++] = checked.kernels->act;
    if (job.dot_tile != nullptr) slot_tiled[job.slot] = true;
    job.rows_per_chunk =
        RowsPerChunk(job.rows, checked.row_bytes, job.dot_tile != nullptr ? n_tiles : n_tokens, n_threads);
    job.first_task = n_tasks;
    n_tasks += (job.rows + job.rows_per_chunk - 1) / job.rows_per_chunk;
  }

  // 1. Encode the activations once per activation type (F32 weights read x
  //    as it is), and pack the tiles where a tile dot reads them (x itself
  //    is an F32 tile). Tile i holds tokens [i * kMaxTileTokens, ...) from
  //    byte i * tile_bytes (every tile but the last is full).
  std::array<const uint8_t*, kMaxMatMulGroup> x_enc;
  std::array<int64_t, kMaxMatMulGroup> x_stride;
  std::array<const uint8_t*, kMaxMatMulGroup> x_tiles{};
  std::array<int64_t, kMaxMatMulGroup> tile_bytes{};
  for (int slot = 0; slot < n_slots; ++slot) {
    const ActType act = slot_types[slot];
    if (act == ActType::kF32) {
      x_enc[slot] = x_tiles[slot] = reinterpret_cast<const uint8_t*>(x);
      x_stride[slot] = cols * 4;
      tile_bytes[slot] = cols * 4 * kMaxTileTokens;
      continue;
    }
    thread_local std::array<std::vector<uint8_t>, kMaxMatMulGroup> scratch, tile_scratch;
    x_stride[slot] = ActRowBytes(act, cols);
    const int64_t stride = x_stride[slot];
    std::vector<uint8_t>& buffer = scratch[slot];
    if (static_cast<int64_t>(buffer.size()) < n_tokens * stride) buffer.resize(n_tokens * stride);
    uint8_t* enc = buffer.data();
    x_enc[slot] = enc;
    auto encode = [&](int64_t t) { QuantizeActivationRow(act, x + t * cols, cols, enc + t * stride, exec.simd); };
    if (!slot_tiled[slot]) {
      if (exec.pool != nullptr && n_tokens > 1) {
        exec.pool->ParallelFor(n_tokens, encode);
      } else {
        for (int t = 0; t < n_tokens; ++t) encode(t);
      }
      continue;
    }
    tile_bytes[slot] = ActTileBytes(act, cols, kMaxTileTokens);
    std::vector<uint8_t>& tiles = tile_scratch[slot];
    if (static_cast<int64_t>(tiles.size()) < n_tiles * tile_bytes[slot]) tiles.resize(n_tiles * tile_bytes[slot]);
    uint8_t* tiles_data = tiles.data();
    x_tiles[slot] = tiles_data;
    const int64_t one_tile = tile_bytes[slot];
    auto encode_tile = [&](int64_t i) {
      const int64_t t0 = i * kMaxTileTokens;
      const int n = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
      for (int t = 0; t < n; ++t) encode(t0 + t);
      PackActTile(act, enc + t0 * stride, stride, n, cols, tiles_data + i * one_tile);
    };
    if (exec.pool != nullptr && n_tiles > 1) {
      exec.pool->ParallelFor(n_tiles, encode_tile);
    } else {
      for (int64_t i = 0; i < n_tiles; ++i) encode_tile(i);
    }
  }

  // 2. Every matrix's rows in chunks, all in one hand-off to the pool;
  //    tiles (or tokens) inside a chunk.
  const int n_jobs = static_cast<int>(ws.size());
  auto run_task = [&](int64_t task) {
    int j = n_jobs - 1;
    while (jobs[j].first_task > task) --j;
    const Job& job = jobs[j];
    const int64_t r0 = (task - job.first_task) * job.rows_per_chunk;
    const int64_t r1 = std::min(job.rows, r0 + job.rows_per_chunk);
    if (job.dot_tile != nullptr) {
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTileTokens) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
        const uint8_t* tile = x_tiles[job.slot] + t0 / kMaxTileTokens * tile_bytes[job.slot];
        float* out_tile = job.out + t0 * job.rows;
        for (int64_t r = r0; r < r1; ++r) {
          job.dot_tile(job.w_bytes + r * job.checked.row_bytes, tile, n, cols, out_tile + r, job.rows);
        }
      }
      return;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* x_row = x_enc[job.slot] + t * x_stride[job.slot];
      float* out_row = job.out + t * job.rows;
      for (int64_t r = r0; r < r1; ++r) out_row[r] = job.dot(job.w_bytes + r * job.checked.row_bytes, x_row, cols);
    }
  };
  if (exec.pool != nullptr) {
    exec.pool->ParallelFor(n_tasks, run_task);
  } else {
    for (int64_t task = 0; task < n_tasks; ++task) run_task(task);
  }
  return absl::OkStatus();
}

absl::Status MatMul(const WeightMatrix& w, const float* x, float* out, int n_tokens, const Exec& exec) {
  float* const outs[] = {out};
  return MatMulGroup(std::span<const WeightMatrix>(&w, 1), x, outs, n_tokens, exec);
}

}  // namespace octo::cpu
