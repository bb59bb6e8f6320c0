// Mixture-of-experts routing on CUDA. Semantics and preconditions:
// kernels/ops.h; the CPU twin is kernels/cpu/top_k_experts.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/softmax_row.cuh"
#include "kernels/cuda/top_k_row.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// One block per token: top_k_row.cuh's TopKOfRow of its logits.
// Launch: gridDim.x == n_tokens, blockDim.x == SoftmaxThreads(n_experts).
__global__ void TopKExpertsKernel(const float* router_logits,  // (n_tokens, n_experts)
                                  int n_experts, int k, bool normalize,
                                  int32_t* expert_ids,  // (n_tokens, k)
                                  float* weights) {     // (n_tokens, k)
  GridStart();
  const size_t token = blockIdx.x;
  top_k::TopKOfRow(router_logits + token * n_experts, n_experts, k, normalize, expert_ids + token * k,
                   weights + token * k);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                         int32_t* expert_ids, float* weights, StreamHandle stream) {
  absl::Status args = CheckTopKExpertsArgs(router_logits, n_tokens, n_experts, k, expert_ids, weights);
  if (!args.ok()) return args;
  // Grid: one block per token, of cuda::Softmax's size for a row of
  // n_experts (any size gives the same bits: top_k_row.cuh).
  OCTO_LAUNCH(TopKExpertsKernel, n_tokens, SoftmaxThreads(n_experts), 0, stream, router_logits, n_experts, k,
              normalize, expert_ids, weights);
  return absl::OkStatus();
}

}  // namespace octo::cuda
