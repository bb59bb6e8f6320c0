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
#include "kernels/op_checks.h"
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

// passes: how many times a task reads its chunk's weights (once per token,
// or once per tile).
int64_t RowsPerChunk(int64_t rows, int64_t row_bytes, int64_t passes, int n_threads) {
  const int64_t for_balance = (rows + n_threads * kTasksPerThread - 1) / (n_threads * kTasksPerThread);
  if (passes == 1) return std::max<int64_t>(1, for_balance);
  const int64_t for_cache = std::max<int64_t>(1, kBatchChunkBytes / row_bytes);
  return std::max<int64_t>(1, std::min(for_balance, for_cache));
}

// x in one activation encoding: its rows (for the one-token dots) and, where
// a tile dot reads them, its tiles. Tile i holds tokens
// [i * kMaxTileTokens, ...) from byte i * tile_bytes (every tile but the
// last is full).
struct EncodedX {
  const uint8_t* rows = nullptr;
  int64_t row_stride = 0;
  const uint8_t* tiles = nullptr;
  int64_t tile_bytes = 0;
};

// Encodes x (n_tokens, cols) as `act` into the calling thread's scratch for
// `slot`, and packs the tiles when `tiled`. F32 needs neither: x itself is
// both its rows and its tiles.
EncodedX EncodeX(ActType act, int slot, bool tiled, const float* x, int n_tokens, int64_t cols, const Exec& exec) {
  EncodedX e;
  if (act == ActType::kF32) {
    e.rows = e.tiles = reinterpret_cast<const uint8_t*>(x);
    e.row_stride = cols * 4;
    e.tile_bytes = cols * 4 * kMaxTileTokens;
    return e;
  }
  thread_local std::array<std::vector<uint8_t>, kMaxMatMulGroup> row_scratch, tile_scratch;
  const int64_t stride = ActRowBytes(act, cols);
  std::vector<uint8_t>& rows = row_scratch[slot];
  if (static_cast<int64_t>(rows.size()) < n_tokens * stride) rows.resize(n_tokens * stride);
  uint8_t* enc = rows.data();
  e.rows = enc;
  e.row_stride = stride;
  auto encode = [&](int64_t t) { QuantizeActivationRow(act, x + t * cols, cols, enc + t * stride, exec.simd); };
  if (!tiled) {
    if (exec.pool != nullptr && n_tokens > 1) {
      exec.pool->ParallelFor(n_tokens, encode);
    } else {
      for (int t = 0; t < n_tokens; ++t) encode(t);
    }
    return e;
  }
  const int64_t n_tiles = (n_tokens + kMaxTileTokens - 1) / kMaxTileTokens;
  const int64_t tile_bytes = ActTileBytes(act, cols, kMaxTileTokens);
  std::vector<uint8_t>& tiles = tile_scratch[slot];
  if (static_cast<int64_t>(tiles.size()) < n_tiles * tile_bytes) tiles.resize(n_tiles * tile_bytes);
  uint8_t* tiles_data = tiles.data();
  e.tiles = tiles_data;
  e.tile_bytes = tile_bytes;
  auto encode_tile = [&](int64_t i) {
    const int64_t t0 = i * kMaxTileTokens;
    const int n = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
    for (int t = 0; t < n; ++t) encode(t0 + t);
    PackActTile(act, enc + t0 * stride, stride, n, cols, tiles_data + i * tile_bytes);
  };
  if (exec.pool != nullptr && n_tiles > 1) {
    exec.pool->ParallelFor(n_tiles, encode_tile);
  } else {
    for (int64_t i = 0; i < n_tiles; ++i) encode_tile(i);
  }
  return e;
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

  // 1. Encode the activations once per activation type (and pack the tiles
  //    where a tile dot reads them).
  std::array<EncodedX, kMaxMatMulGroup> x_enc;
  for (int slot = 0; slot < n_slots; ++slot) {
    x_enc[slot] = EncodeX(slot_types[slot], slot, slot_tiled[slot], x, n_tokens, cols, exec);
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
    const EncodedX& xe = x_enc[job.slot];
    if (job.dot_tile != nullptr) {
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTileTokens) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
        const uint8_t* tile = xe.tiles + t0 / kMaxTileTokens * xe.tile_bytes;
        float* out_tile = job.out + t0 * job.rows;
        for (int64_t r = r0; r < r1; ++r) {
          job.dot_tile(job.w_bytes + r * job.checked.row_bytes, tile, n, cols, out_tile + r, job.rows);
        }
      }
      return;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* x_row = xe.rows + t * xe.row_stride;
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
