// A logits row's best candidates and log-sum-exp on the CPU: the reference
// for cuda::TopLogits, and the CPU backend's own. Semantics: kernels/ops.h.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/sum_exp.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

// The sampler's total order (daemon/sampling/transforms.h MoreLikely): the
// larger logit first, equal ones by lower id. A strict weak order on rows
// without NaN.
bool Before(const TopLogit& a, const TopLogit& b) { return a.logit != b.logit ? a.logit > b.logit : a.id < b.id; }

void ReduceRow(const float* row, int vocab, TopLogitsRow& out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  out = TopLogitsRow{};
  out.bad_id = -1;
  // The checks, the count and the max in id order (LogSumExp's std::max).
  float max_logit = -kInf;
  for (int i = 0; i < vocab; ++i) {
    const float x = row[i];
    if (std::isnan(x) || x == kInf) {
      if (out.bad_id < 0) {
        out.bad_id = i;
        out.bad_logit = x;
      }
      continue;
    }
    if (x != -kInf) ++out.n_finite;
    max_logit = std::max(max_logit, x);
  }
  if (out.bad_id >= 0) return;
  out.max_logit = max_logit;
  // The sum in the one order (sum_exp.h; an all -inf row sums nothing).
  out.sum_exp = max_logit != -kInf ? SumExpInOrder(row, vocab, max_logit) : 0.0;
  // The best n: a heap whose top is the worst kept (std heaps put the
  // order's last on top), replaced by any later logit before it.
  const int n = std::min(vocab, kTopLogits);
  TopLogit* heap = out.top;
  for (int i = 0; i < n; ++i) heap[i] = {i, row[i]};
  std::make_heap(heap, heap + n, Before);
  for (int i = n; i < vocab; ++i) {
    const TopLogit c{i, row[i]};
    if (!Before(c, heap[0])) continue;
    std::pop_heap(heap, heap + n, Before);
    heap[n - 1] = c;
    std::push_heap(heap, heap + n, Before);
  }
  std::sort_heap(heap, heap + n, Before);  // best first
}

}  // namespace

absl::Status TopLogits(const float* logits, int n_rows, int vocab, TopLogitsRow* out) {
  absl::Status args = CheckTopLogitsArgs(logits, n_rows, vocab, out);
  if (!args.ok()) return args;
  for (int r = 0; r < n_rows; ++r) ReduceRow(logits + static_cast<size_t>(r) * vocab, vocab, out[r]);
  return absl::OkStatus();
}

}  // namespace octo::cpu
