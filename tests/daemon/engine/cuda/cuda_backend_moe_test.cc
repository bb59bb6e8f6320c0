// CudaBackend's held MoE launches (cuda_backend.h, cuda_backend_moe.cc): a
// MoE FFN as the forward pass calls it -- the router and its shared gate
// row, top-k, the routed experts and a shared expert (qwen3-next's, or
// none: qwen3moe's), the combine, and the next layer's norm and its q
// projection -- held and fused, or launched apart (stream() between), gives
// the same bits: the residual, the norm's output, each expert's rows, the
// shared expert's and the projection that reads the norm's rounding. One
// token goes in four launches; three tokens still combine in the down
// experts' launch; past four tokens the combine and the norm launch apart,
// past sixteen the shared expert too; a shared expert of another type than
// the routed ones launches apart. Each with the same bits.
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cuda/cuda_backend.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

constexpr int kDim = 256, kExperts = 4, kUsed = 2, kWidth = 256, kSharedWidth = 512;
constexpr float kEps = 1e-5f;

enum class Shared { kNone, kAlike, kOtherType };

class CudaBackendMoe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::shared_ptr<CudaBackend>> b = CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status();
    cuda_ = *b;
    cuda_->set_graphs(false);  // launch counts of the ops themselves, not of graph replays
  }
  template <typename T>
  BackendBuffer Put(const std::vector<T>& host) {
    absl::StatusOr<BackendBuffer> b = cuda_->Allocate(host.size() * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(cuda_->Upload(b->data(), host.data(), host.size() * sizeof(T)).ok());
    return std::move(*b);
  }
  std::vector<float> Get(const BackendBuffer& b) {
    std::vector<float> host(b.size() / 4);
    EXPECT_TRUE(cuda_->Download(host.data(), b.data(), b.size()).ok());
    return host;
  }
  std::shared_ptr<CudaBackend> cuda_;
};

TEST_F(CudaBackendMoe, AMoeFfnHeldAndFusedGivesTheBitsOfItsOpsApart) {
  const GgmlType q4 = GgmlType::kQ4_K;
  BackendBuffer router = Put(RandomActivations(kExperts * kDim, 1)), gate_inp = Put(RandomActivations(kDim, 2));
  BackendBuffer gate_exps = Put(RandomWeights(q4, kExperts * kWidth, kDim, 3)),
                up_exps = Put(RandomWeights(q4, kExperts * kWidth, kDim, 4)),
                down_exps = Put(RandomWeights(q4, kExperts * kDim, kWidth, 5)),
                wq = Put(RandomWeights(q4, kDim, kDim, 6)), norm_weight = Put(RandomActivations(kDim, 7));
  const WeightMatrix router_w{GgmlType::kF32, router.data(), kExperts, kDim},
      gate_inp_w{GgmlType::kF32, gate_inp.data(), 1, kDim}, gate_w{q4, gate_exps.data(), kExperts * kWidth, kDim},
      up_w{q4, up_exps.data(), kExperts * kWidth, kDim}, down_w{q4, down_exps.data(), kExperts * kDim, kWidth},
      q_w{q4, wq.data(), kDim, kDim};
  for (const Shared shared : {Shared::kNone, Shared::kAlike, Shared::kOtherType}) {
    const GgmlType shared_type = shared == Shared::kOtherType ? GgmlType::kQ8_0 : q4;
    BackendBuffer shexp_gate = Put(RandomWeights(shared_type, kSharedWidth, kDim, 8)),
                  shexp_up = Put(RandomWeights(shared_type, kSharedWidth, kDim, 9)),
                  shexp_down = Put(RandomWeights(q4, kDim, kSharedWidth, 10));
    for (const int n : {1, 3, 6, 20}) {
      SCOPED_TRACE(::testing::Message() << "shared " << static_cast<int>(shared) << " tokens " << n);
      const std::vector<float> x = RandomActivations(n * kDim, 11), xb = RandomActivations(n * kDim, 12);
      struct Run {
        std::vector<float> x, normed, experts, shared, q;
        uint64_t launches;
      };
      auto run = [&](bool apart) {
        BackendBuffer d_x = Put(x), d_xb = Put(xb), logits = Put(std::vector<float>(n * kExperts)),
                      gate_logit = Put(std::vector<float>(n)), ids = Put(std::vector<int32_t>(n * kUsed)),
                      weights = Put(std::vector<float>(n * kUsed)), hb = Put(std::vector<float>(n * kUsed * kWidth)),
                      hb2 = Put(std::vector<float>(n * kUsed * kWidth)),
                      shb = Put(std::vector<float>(n * kSharedWidth)), shb2 = Put(std::vector<float>(n * kSharedWidth)),
                      expert_out = Put(std::vector<float>(n * kUsed * kDim)),
                      shared_out = Put(std::vector<float>(n * kDim)), q = Put(std::vector<float>(n * kDim));
        auto step = [&](absl::Status s) {
          EXPECT_TRUE(s.ok()) << s;
          if (apart) cuda_->stream();
        };
        const bool has_shared = shared != Shared::kNone;
        const cuda::ApiCounts before = cuda::CurrentApiCounts();
        step(cuda_->MatMul(router_w, d_xb.as<float>(), logits.as<float>(), n));
        if (has_shared) step(cuda_->MatMul(gate_inp_w, d_xb.as<float>(), gate_logit.as<float>(), n));
        step(cuda_->TopKExperts(logits.as<float>(), n, kExperts, kUsed, true, ids.as<int32_t>(), weights.as<float>()));
        const MatMulExpertsParams shared_x{kExperts, kUsed, n, false}, per_choice{kExperts, kUsed, n, true};
        if (has_shared) {
          const Backend::SharedExpert se{.gate = {shared_type, shexp_gate.data(), kSharedWidth, kDim},
                                         .up = {shared_type, shexp_up.data(), kSharedWidth, kDim},
                                         .down = {q4, shexp_down.data(), kDim, kSharedWidth},
                                         .hidden = shb.as<float>(),
                                         .hidden_up = shb2.as<float>(),
                                         .out = shared_out.as<float>()};
          step(cuda_->MatMulExpertsGluShared(gate_w, up_w, ids.as<int32_t>(), d_xb.as<float>(), hb.as<float>(),
                                             hb2.as<float>(), shared_x, se));
          step(cuda_->MatMulExpertsShared(down_w, ids.as<int32_t>(), hb.as<float>(), expert_out.as<float>(),
                                          per_choice, se));
        } else {
          step(cuda_->MatMulExpertsGlu(gate_w, up_w, ids.as<int32_t>(), d_xb.as<float>(), hb.as<float>(),
                                       hb2.as<float>(), shared_x));
          step(cuda_->MatMulExperts(down_w, ids.as<int32_t>(), hb.as<float>(), expert_out.as<float>(), per_choice));
        }
        step(cuda_->MoeCombine({.expert_out = expert_out.as<float>(),
                                .weights = weights.as<float>(),
                                .shared = has_shared ? shared_out.as<float>() : nullptr,
                                .shared_gate_logits = has_shared ? gate_logit.as<float>() : nullptr,
                                .out = d_xb.as<float>(),
                                .n_rows = n,
                                .k = kUsed,
                                .dim = kDim}));
        step(cuda_->AddRmsNorm(d_x.as<float>(), d_xb.as<float>(), norm_weight.as<float>(), d_xb.as<float>(), n, kDim,
                               kEps));
        step(cuda_->MatMul(q_w, d_xb.as<float>(), q.as<float>(), n));
        step(cuda_->Flush());
        const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
        return Run{Get(d_x), Get(d_xb), Get(expert_out), Get(shared_out), Get(q), launches};
      };
      run(false);  // the backend's counters and scratch grow once (a growth launches what is held apart)
      const Run apart = run(true), fused = run(false);
      if (n == 1 && shared != Shared::kOtherType) {
        EXPECT_EQ(fused.launches, 4u) << "the router, gate and up, down with the combine and norm, the projection";
      }
      if (n <= 16) {
        EXPECT_LT(fused.launches, apart.launches);
      }
      for (const auto& [got, want, what] :
           {std::tuple{&fused.x, &apart.x, "the residual"}, {&fused.normed, &apart.normed, "the norm's output"},
            {&fused.experts, &apart.experts, "the experts' rows"}, {&fused.shared, &apart.shared, "the shared rows"},
            {&fused.q, &apart.q, "the projection"}}) {
        ASSERT_EQ(got->size(), want->size()) << what;
        EXPECT_EQ(0, std::memcmp(got->data(), want->data(), got->size() * 4)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace octo
