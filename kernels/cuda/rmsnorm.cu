// RMSNorm on CUDA. Semantics and preconditions: kernels/ops.h; the CPU twin
// is kernels/cpu/rmsnorm.cc.
#include <cstddef>
#include <type_traits>

#include "absl/status/status.h"
#include "kernels/cuda/act_q8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/gates.cuh"
#include "kernels/cuda/moe_combine.cuh"
#include "kernels/cuda/rms_scale.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// One block per row. Thread t owns elements t, t + blockDim.x, ... of the
// row: it squares and sums them, the block sums the partial sums
// (RmsScaleOf), and then each element is written scaled.
// With Mode::kAdd, x is the residual stream and delta is added to it first
// (x[i] = x[i] + delta[i], stored, as AddKernel computes it) by the thread
// that owns element i: the same bits as the two launches, whether or not
// out is delta. With Mode::kCombine too, delta[i] is not read but computed:
// the MoE combine's value of element i (moe_combine.cuh), the bits of
// MoeCombine's launch before the norm's.
// With Mode::kGate, each output element is then SiluTimes(gate[i], the
// norm's value) -- SiluMul's of the norm's output, its bits -- and with
// q8.q set the block rounds its row as a span of the flat (n_rows * dim)
// output (RoundColumns: rows of whole chunks, or rows tiling one, counted
// in q8.arrivals).
// With Mode::kRounded, the block's warps then write the row a rounding chunk
// each (act_q8.cuh), each element's value the same expression, and round it
// into q8 (fused.h).
// Mode::kHeld (a row of at most kMaxBlockSize * kHeldElements): a thread loads
// its elements of x, delta and weight at once, before it uses any, and keeps
// them in registers, so the row costs one memory round trip; a rounded row
// is staged in dynamic shared memory (dim floats) for the chunks. Else (any
// row) each step reads the row from global memory again.
// Every element is read before any is written (x[i] and delta[i] by its
// owner before it stores x[i] or out[i]; the chunks after the block's
// barrier), so out == x (in place) and out == delta are safe.
// Launch: gridDim.x == n_rows, blockDim.x a multiple of 32, at most 1024;
// shared bytes dim * 4 held and rounded, else 0.
constexpr int kHeldElements = 8;
template <bool kAdd_, bool kRounded_, ActQ8Rule R_ = ActQ8Rule::kPer32, bool kCombine_ = false, bool kGate_ = false>
struct NormMode {
  static constexpr bool kAdd = kAdd_ || kCombine_, kRounded = kRounded_, kHeld = false, kCombine = kCombine_;
  static constexpr bool kGate = kGate_;
  static_assert(!(kGate && (kAdd || kRounded)), "a gated norm is in place and rounds its rows as spans");
  using Rule = std::integral_constant<ActQ8Rule, R_>;
};
template <typename Mode>
struct HeldRow : Mode {
  static constexpr bool kHeld = true;
};
template <typename Mode>
__global__ void __launch_bounds__(kMaxBlockSize)
    RmsNormKernel(float* x,             // (n_rows, dim); written only with kAdd
                  const float* delta,   // (n_rows, dim) with kAdd, else null
                  const float* weight,  // (dim)
                  float* out,           // (n_rows, dim)
                  int dim, float eps, ActQ8Out q8, bool prefetch,
                  MoeCombineParams combine,  // with kCombine: the rows that are delta
                  const float* gate) {       // (n_rows, dim) with kGate, else null
  // The weights are not what the kernel before writes: block 0 asks L2 for
  // them while that kernel still runs, so each block's weight loads, issued
  // with its x loads, wait on L2 (where that kernel's x is) and not HBM.
  GridStartAfter([&] {
    if (prefetch && blockIdx.x == 0 && threadIdx.x == 0) PrefetchL2(weight, static_cast<int64_t>(dim) * 4);
  });
  const size_t row_offset = static_cast<size_t>(blockIdx.x) * dim;
  float* x_row = x + row_offset;
  float* out_row = out + row_offset;
  // What element i stores given the norm's value: that value, or with kGate
  // SiluMul's of it.
  auto gated = [&](int i, float normed) {
    if constexpr (Mode::kGate) {
      return SiluTimes(gate[row_offset + i], normed);
    } else {
      return normed;
    }
  };
  auto delta_at = [&](int i) {
    if constexpr (Mode::kCombine) {
      return CombinedValue(combine, blockIdx.x, i);
    } else {
      return delta[row_offset + i];
    }
  };
  // The row's rounding chunks, a warp each, their elements value(i).
  auto round_row = [&](auto value) {
    constexpr ActQ8Rule R = Mode::Rule::value;
    for (int64_t c = threadIdx.x / kWarpSize; c < dim / kRoundChunk<R>; c += blockDim.x / kWarpSize) {
      RoundChunk<R>(c, threadIdx.x % kWarpSize, value, out_row, q8.q + row_offset, q8.d + row_offset / kQ8Chunk);
    }
  };
  if constexpr (Mode::kHeld) {
    float xs[kHeldElements], ws[kHeldElements];
    [[maybe_unused]] float ds[kHeldElements];
#pragma unroll
    for (int k = 0; k < kHeldElements; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < dim) {
        xs[k] = x_row[i];
        ws[k] = weight[i];
        if constexpr (Mode::kAdd) ds[k] = delta_at(i);
      }
    }
    double ss = 0.0;
#pragma unroll
    for (int k = 0; k < kHeldElements; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < dim) {
        if constexpr (Mode::kAdd) {
          xs[k] = xs[k] + ds[k];
          x_row[i] = xs[k];
        }
        ss += SquareOf(xs[k]);
      }
    }
    const float scale = RmsScaleOf(ss, dim, eps);
    float* staged = Mode::kRounded ? DynamicShared<float>() : out_row;
#pragma unroll
    for (int k = 0; k < kHeldElements; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < dim) staged[i] = gated(i, xs[k] * scale * ws[k]);
    }
    if constexpr (Mode::kRounded) {
      __syncthreads();  // the row is staged
      round_row([staged](int64_t i) { return staged[i]; });
    }
  } else {
    if constexpr (Mode::kAdd) {
      for (int i = threadIdx.x; i < dim; i += blockDim.x) x_row[i] = x_row[i] + delta_at(i);
    }
    const float scale = RmsScale(x_row, dim, eps);
    auto value = [=](int64_t i) { return x_row[i] * scale * weight[i]; };
    if constexpr (Mode::kRounded) {
      round_row(value);
    } else {
      for (int i = threadIdx.x; i < dim; i += blockDim.x) out_row[i] = gated(i, value(i));
    }
  }
  if constexpr (Mode::kGate) {
    if (q8.q != nullptr) RoundColumns(out, static_cast<int64_t>(gridDim.x) * dim, 1, row_offset, dim, q8);
  }
}

// Launches RmsNormKernel<Mode>, held when the row fits (HeldRow).
template <typename Mode>
void LaunchRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim, float eps,
                   StreamHandle stream, const ActQ8Out& q8, const MoeCombineParams& combine = {},
                   const float* gate = nullptr) {
  const int threads = RowThreads(dim);
  const bool prefetch = WeightPrefetchBytes() > 0;
  if (dim <= threads * kHeldElements) {
    const size_t shared = Mode::kRounded ? static_cast<size_t>(dim) * sizeof(float) : 0;
    OCTO_LAUNCH(RmsNormKernel<HeldRow<Mode>>, n_rows, threads, shared, stream, x, delta, weight, out, dim, eps, q8,
                prefetch, combine, gate);
  } else {
    OCTO_LAUNCH(RmsNormKernel<Mode>, n_rows, threads, 0, stream, x, delta, weight, out, dim, eps, q8, prefetch,
                combine, gate);
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------
// Grid: one block per row (n_rows is an int, within gridDim.x's 2^31 - 1);
// block: RowThreads(dim) (rms_scale.cuh).

absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps, StreamHandle stream) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  // The kernel writes x only with kAdd.
  using Mode = NormMode<false, false>;
  LaunchRmsNorm<Mode>(const_cast<float*>(x), nullptr, weight, out, n_rows, dim, eps, stream, ActQ8Out{});
  return absl::OkStatus();
}

absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps,
                     StreamHandle stream, const ActQ8Out& q8) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  if (absl::Status rounding = CheckRounding("RmsNorm", dim, q8); !rounding.ok()) return rounding;
  return WithActQ8Rule(q8.rule, [&](auto rule) {
    using Mode = NormMode<false, true, decltype(rule)::value>;
    LaunchRmsNorm<Mode>(const_cast<float*>(x), nullptr, weight, out, n_rows, dim, eps, stream, q8);
    return absl::OkStatus();
  });
}

namespace {

absl::Status CheckAddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                             float eps) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  if (delta == nullptr) return absl::InvalidArgumentError("AddRmsNorm: delta is null");
  const int64_t bytes = int64_t{n_rows} * dim * 4;
  if (Overlaps(x, bytes, delta, bytes) || Overlaps(x, bytes, out, bytes)) {
    return absl::InvalidArgumentError("AddRmsNorm: x overlaps delta or out");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                        float eps, StreamHandle stream) {
  absl::Status args = CheckAddRmsNorm(x, delta, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  using Mode = NormMode<true, false>;
  LaunchRmsNorm<Mode>(x, delta, weight, out, n_rows, dim, eps, stream, ActQ8Out{});
  return absl::OkStatus();
}

absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                        float eps, StreamHandle stream, const ActQ8Out& q8) {
  absl::Status args = CheckAddRmsNorm(x, delta, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  if (absl::Status rounding = CheckRounding("AddRmsNorm", dim, q8); !rounding.ok()) return rounding;
  return WithActQ8Rule(q8.rule, [&](auto rule) {
    using Mode = NormMode<true, true, decltype(rule)::value>;
    LaunchRmsNorm<Mode>(x, delta, weight, out, n_rows, dim, eps, stream, q8);
    return absl::OkStatus();
  });
}

absl::Status CheckCombineAddRmsNorm(const MoeCombineParams& c, const float* x, const float* weight, float eps) {
  if (absl::Status args = CheckMoeCombineArgs(c); !args.ok()) return args;
  if (absl::Status args = CheckRmsNormArgs(x, weight, c.out, c.n_rows, c.dim, eps); !args.ok()) return args;
  const int64_t bytes = int64_t{c.n_rows} * c.dim * 4;
  const int64_t expert_bytes = bytes * c.k, weight_bytes = int64_t{c.n_rows} * c.k * 4;
  if (Overlaps(x, bytes, c.out, bytes) || Overlaps(x, bytes, c.expert_out, expert_bytes) ||
      Overlaps(x, bytes, c.weights, weight_bytes) || (c.shared != nullptr && Overlaps(x, bytes, c.shared, bytes))) {
    return absl::InvalidArgumentError("CombineAddRmsNorm: x overlaps out or the combine's inputs");
  }
  if (Overlaps(c.out, bytes, c.expert_out, expert_bytes) || Overlaps(c.out, bytes, c.weights, weight_bytes) ||
      (c.shared != nullptr && Overlaps(c.out, bytes, c.shared, bytes))) {
    return absl::InvalidArgumentError("CombineAddRmsNorm: out overlaps the combine's inputs");
  }
  return absl::OkStatus();
}

absl::Status CombineAddRmsNorm(const MoeCombineParams& combine, float* x, const float* weight, float eps,
                               StreamHandle stream, const ActQ8Out* q8) {
  if (absl::Status args = CheckCombineAddRmsNorm(combine, x, weight, eps); !args.ok()) return args;
  if (q8 == nullptr) {
    using Mode = NormMode<true, false, ActQ8Rule::kPer32, true>;
    LaunchRmsNorm<Mode>(x, nullptr, weight, combine.out, combine.n_rows, combine.dim, eps, stream, ActQ8Out{},
                        combine);
    return absl::OkStatus();
  }
  if (absl::Status rounding = CheckRounding("CombineAddRmsNorm", combine.dim, *q8); !rounding.ok()) return rounding;
  return WithActQ8Rule(q8->rule, [&](auto rule) {
    using Mode = NormMode<true, true, decltype(rule)::value, true>;
    LaunchRmsNorm<Mode>(x, nullptr, weight, combine.out, combine.n_rows, combine.dim, eps, stream, *q8, combine);
    return absl::OkStatus();
  });
}

absl::Status RmsNormSiluMul(float* x, const float* weight, const float* gate, int n_rows, int dim, float eps,
                            StreamHandle stream, const ActQ8Out* q8) {
  if (absl::Status args = CheckRmsNormArgs(x, weight, x, n_rows, dim, eps); !args.ok()) return args;
  const int64_t n = int64_t{n_rows} * dim;
  if (absl::Status args = CheckSiluMulArgs(gate, x, x, n); !args.ok()) return args;
  if (Overlaps(gate, n * 4, x, n * 4)) return absl::InvalidArgumentError("RmsNormSiluMul: gate overlaps x");
  ActQ8Out rounded{};
  if (q8 != nullptr) {
    if (absl::Status rounding = CheckRounding("RmsNormSiluMul", n, *q8); !rounding.ok()) return rounding;
    if (absl::Status spans = CheckSpanRounding("RmsNormSiluMul", "rows", dim, *q8); !spans.ok()) return spans;
    rounded = *q8;
  }
  using Mode = NormMode<false, false, ActQ8Rule::kPer32, false, true>;
  LaunchRmsNorm<Mode>(x, nullptr, weight, x, n_rows, dim, eps, stream, rounded, {}, gate);
  return absl::OkStatus();
}

}  // namespace octo::cuda
