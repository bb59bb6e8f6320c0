// The two loops of one (token, head) of cpu::Attention, one pair per
// instruction set. Internal to kernels/cpu: attention.cc picks a pair from
// exec.simd.
//
// Both pairs compute every score and every output element in float, in the
// same order of positions; they differ only in the summation order of the
// q·k dot and in fusing the multiply-adds of the value sum, so they agree to
// the last bits (attention_test.cc checks how closely).
//
// Tree attention (ops.h) leans on two properties of each pair: a score
// depends only on its own key row, and a value sum may be cut into runs of
// positions, each call continuing the last one's accumulators. So a query
// whose rows are scattered over the cache gets the same bits, run by run,
// as one call over the same rows stored contiguously.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/block_decode.h"
#include "kernels/kv_blocks.h"
#include "storage/ggml_type.h"

namespace octo::cpu {

struct AttentionKernels {
  // att[pos] = scale * sum_d q[d] * fp16(k[pos * row_stride + d]), for
  // pos < n_ctx, d < head_dim. q holds fp16 values widened to float, so each
  // product is exact in float; only the sum rounds. att[pos] depends only on
  // q and row pos (not on n_ctx or the other rows).
  void (*scores)(const float* q, const uint16_t* k, size_t row_stride, int n_ctx, int head_dim,
                 float scale, float* att);
  // out[d] += sum_pos att[pos] * fp16(v[pos * row_stride + d]) for d <
  // head_dim: out[d] is the float accumulator the products are added to, one
  // by one in position order. The caller zeroes out (+0.0) before the first
  // call of a sum; calls over consecutive runs of positions then give the
  // bits of one call over all of them.
  void (*weighted_sum)(const float* att, const uint16_t* v, size_t row_stride, int n_ctx,
                       int head_dim, float* out);
  // The same two over float rows: a quantized cache's rows, decoded
  // (attention.cc). q need not hold fp16 values there.
  void (*scores_f32)(const float* q, const float* k, size_t row_stride, int n_ctx, int head_dim,
                     float scale, float* att);
  void (*weighted_sum_f32)(const float* att, const float* v, size_t row_stride, int n_ctx,
                           int head_dim, float* out);
  // out (n_rows, head_dim) = values first .. first + head_dim - 1 of each of
  // n_rows cache rows of `type` (row_bytes apart, from `rows`), decoded by
  // block_decode's Decoder: the same floats from every pair.
  void (*decode_rows)(GgmlType type, const uint8_t* rows, size_t row_bytes, int n_rows, int first, int head_dim,
                      float* out);
};

// DecodeKvRows, compiled once per instruction set (the AVX2 pair's copy
// lets the compiler vectorize the same loops): block by block, so each
// block's scale is read once. In an unnamed namespace so each file keeps its
// own copy: the linker must not hand the portable pair the AVX2 one.
namespace {

template <GgmlType T>
void DecodeKvRowsOf(const uint8_t* rows, size_t row_bytes, int n_rows, int first, int head_dim, float* out) {
  using D = block_decode::Decoder<T>;
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* row = rows + static_cast<size_t>(r) * row_bytes;
    for (int d = 0, e = first; d < head_dim;) {
      const int j0 = e % D::kElements;
      const int n = std::min(D::kElements - j0, head_dim - d);
      const uint8_t* block = row + static_cast<size_t>(e / D::kElements) * D::kBytes;
      kv_blocks::DecodeBlockSpan<T>(block, j0, n, out + static_cast<size_t>(r) * head_dim + d);
      d += n;
      e += n;
    }
  }
}

[[maybe_unused]] void DecodeKvRows(GgmlType type, const uint8_t* rows, size_t row_bytes, int n_rows, int first,
                                   int head_dim, float* out) {
  kv_blocks::Visit(type, [&](auto t) { DecodeKvRowsOf<t.value>(rows, row_bytes, n_rows, first, head_dim, out); });
}

}  // namespace

// Index order, one float accumulator. Baseline x86-64.
AttentionKernels PortableAttentionKernels();

#if defined(__x86_64__)
// 8-wide AVX2 with F16C conversions and FMA (kernels/cpu/attention_avx2.cc):
// call only when the CPU has them (DetectSimd() == Simd::kAvx2).
AttentionKernels Avx2AttentionKernels();
#endif

}  // namespace octo::cpu
