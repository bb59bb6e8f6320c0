// CudaBackend's held launches (cuda_backend.h): a norm or SiLU product held
// until the next call is launched by whatever comes next, so its output is
// there for a Download, for work queued on stream() and for any op; and
// when the next call is the decode MatMul reading it, the pair takes one
// launch fewer with the bits of the two apart.
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cpu_backend.h"
#include "daemon/engine/cuda/cuda_backend.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

constexpr int kDim = 512;

class CudaBackendHeld : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::shared_ptr<CudaBackend>> b = CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status();
    cuda_ = *b;
    cuda_->set_graphs(false);  // launch counts of the ops themselves, not of graph replays
  }

  // A device copy of `host`.
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

TEST_F(CudaBackendHeld, AHeldNormIsThereForWhateverComesNext) {
  const std::vector<float> x = RandomActivations(2 * kDim, 1), delta = RandomActivations(2 * kDim, 2),
                           weight = RandomActivations(kDim, 3);
  std::vector<float> want_x = x, want_out(2 * kDim);
  CpuBackend cpu(1, false);
  ASSERT_TRUE(cpu.AddRmsNorm(want_x.data(), delta.data(), weight.data(), want_out.data(), 2, kDim, 1e-5f).ok());

  // A Download.
  BackendBuffer d_x = Put(x), d_delta = Put(delta), d_weight = Put(weight), d_out = Put(std::vector<float>(2 * kDim));
  ASSERT_TRUE(cuda_->AddRmsNorm(d_x.as<float>(), d_delta.as<float>(), d_weight.as<float>(), d_out.as<float>(), 2, kDim,
                                1e-5f)
                  .ok());
  EXPECT_EQ(Get(d_out), want_out);
  EXPECT_EQ(Get(d_x), want_x);

  // Work queued on stream() by someone else (DeviceLayers' copies).
  BackendBuffer d_x2 = Put(x);
  ASSERT_TRUE(cuda_->AddRmsNorm(d_x2.as<float>(), d_delta.as<float>(), d_weight.as<float>(), d_out.as<float>(), 2,
                                kDim, 1e-5f)
                  .ok());
  std::vector<float> copied(2 * kDim);
  ASSERT_EQ(cudaMemcpyAsync(copied.data(), d_out.data(), copied.size() * 4, cudaMemcpyDeviceToHost, cuda_->stream()),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cuda_->stream()), cudaSuccess);
  EXPECT_EQ(copied, want_out);

  // Another op reading it.
  BackendBuffer d_x3 = Put(x), d_sum = Put(std::vector<float>(2 * kDim));
  ASSERT_TRUE(cuda_->AddRmsNorm(d_x3.as<float>(), d_delta.as<float>(), d_weight.as<float>(), d_out.as<float>(), 2,
                                kDim, 1e-5f)
                  .ok());
  ASSERT_TRUE(cuda_->Add(d_out.as<float>(), d_out.as<float>(), d_sum.as<float>(), 2 * kDim).ok());
  const std::vector<float> sum = Get(d_sum);
  for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], want_out[i] + want_out[i]) << i;

  // A bad call is refused when made, not at the next call.
  EXPECT_EQ(cuda_->RmsNorm(d_x.as<float>(), nullptr, d_out.as<float>(), 2, kDim, 1e-5f).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(cuda_->Add(d_out.as<float>(), d_out.as<float>(), d_sum.as<float>(), 2 * kDim).ok());
}

// An Attention call's records take at most the backend's budget: a prefill
// (held for nothing) and a decode-path call of 12 tokens (held for the
// output projection, its 8-bit activations before the records) across a
// split edge run in rounds within it, with the bits of a backend that gives
// them all their records at once.
TEST_F(CudaBackendHeld, AnAttentionCallsRecordsStayWithinTheBudget) {
  constexpr int kHeads = 8, kKvHeads = 2, kHeadDim = 64, kRows = 300;
  std::vector<uint16_t> k_cache(kRows * kKvHeads * kHeadDim), v_cache(k_cache.size());
  const std::vector<float> k = RandomActivations(k_cache.size(), 11), v = RandomActivations(v_cache.size(), 12);
  for (size_t i = 0; i < k.size(); ++i) {
    k_cache[i] = Fp32ToFp16(k[i]);
    v_cache[i] = Fp32ToFp16(v[i]);
  }
  for (const int n_tokens : {40, 12}) {
    SCOPED_TRACE(n_tokens);
    const AttentionParams p{.n_tokens = n_tokens, .first_pos = kRows - n_tokens, .n_heads = kHeads,
                            .n_kv_heads = kKvHeads, .head_dim = kHeadDim, .scale = 0.125f};
    const std::vector<float> q = RandomActivations(static_cast<size_t>(n_tokens) * kHeads * kHeadDim, 13);
    const size_t all = cuda::AttentionScratchBytes(p), budget = all / 5;
    ASSERT_GT(budget, cuda::AttentionScratchBytes(p, 0)) << "a round holds more than the last token";
    std::vector<float> outs[2];
    uint64_t scratch[2];
    for (const int limited : {0, 1}) {
      absl::StatusOr<std::shared_ptr<CudaBackend>> b = CudaBackend::Create(0);
      ASSERT_TRUE(b.ok()) << b.status();
      cuda_ = *b;
      cuda_->set_graphs(false);
      if (limited == 1) cuda_->set_attention_scratch_budget(budget);
      BackendBuffer d_q = Put(q), d_k = Put(k_cache), d_v = Put(v_cache), d_out = Put(std::vector<float>(q.size()));
      ASSERT_TRUE(cuda_->Attention(d_q.as<float>(), d_k.data(), d_v.data(), d_out.as<float>(), p).ok());
      outs[limited] = Get(d_out);  // launches a held call
      scratch[limited] = cuda_->scratch_bytes();
    }
    const size_t front = n_tokens <= kMaxDecodeTokens ? cuda::ActQ8Bytes(n_tokens, kHeads * kHeadDim) : 0;
    EXPECT_GE(scratch[0], front + all);
    EXPECT_LE(scratch[1], front + budget);
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), q.size() * sizeof(float)), 0);
  }
}

// q, k, v (Q4_K) after the attention norm and down (Q8_0) after the SiLU
// product: held and fused, or launched apart (stream() between), the same bits
// and one launch fewer each.
TEST_F(CudaBackendHeld, TheMatMulReadingAHeldOpTakesItsRoundingWithTheSameBits) {
  const std::vector<float> x = RandomActivations(kDim, 4), delta = RandomActivations(kDim, 5),
                           weight = RandomActivations(kDim, 6);
  BackendBuffer d_weight = Put(weight), d_delta = Put(delta);
  BackendBuffer wq = Put(RandomWeights(GgmlType::kQ4_K, 64, kDim, 7)),
                wk = Put(RandomWeights(GgmlType::kQ4_K, 32, kDim, 8)),
                wd = Put(RandomWeights(GgmlType::kQ8_0, 16, kDim, 9));
  const WeightMatrix qk[] = {{GgmlType::kQ4_K, wq.data(), 64, kDim}, {GgmlType::kQ4_K, wk.data(), 32, kDim}};
  const WeightMatrix down{GgmlType::kQ8_0, wd.data(), 16, kDim};
  struct Run {
    std::vector<float> q, k, down;
    uint64_t launches;
  };
  auto run = [&](bool apart) {
    BackendBuffer d_x = Put(x), d_out = Put(delta), q = Put(std::vector<float>(64)), k = Put(std::vector<float>(32)),
                  h = Put(std::vector<float>(kDim)), d = Put(std::vector<float>(16));
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    EXPECT_TRUE(cuda_->AddRmsNorm(d_x.as<float>(), d_out.as<float>(), d_weight.as<float>(), d_out.as<float>(), 1,
                                  kDim, 1e-5f)
                    .ok());
    if (apart) cuda_->stream();
    float* const qk_out[] = {q.as<float>(), k.as<float>()};
    EXPECT_TRUE(cuda_->MatMulGroup(qk, d_out.as<float>(), qk_out, 1).ok());
    EXPECT_TRUE(cuda_->SiluMul(d_out.as<float>(), d_delta.as<float>(), h.as<float>(), kDim).ok());
    if (apart) cuda_->stream();
    EXPECT_TRUE(cuda_->MatMul(down, h.as<float>(), d.as<float>(), 1).ok());
    const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
    return Run{Get(q), Get(k), Get(d), launches};
  };
  const Run apart = run(true), fused = run(false);
  EXPECT_EQ(fused.launches + 2, apart.launches);
  EXPECT_EQ(0, std::memcmp(fused.q.data(), apart.q.data(), 64 * 4));
  EXPECT_EQ(0, std::memcmp(fused.k.data(), apart.k.data(), 32 * 4));
  EXPECT_EQ(0, std::memcmp(fused.down.data(), apart.down.data(), 16 * 4));
}

// The end of a layer and the next one's start: down (Q4_K, after the SiLU
// product) then the next attention norm's residual add, wo (Q8_0) then the
// last layer's Add. Held and fused -- each projection's launch adds its
// output into x -- or launched apart (stream() between): the same bits, and
// the Add launch goes. An Add of part of a held MatMul's output is not its
// whole output: launched apart, the same sums.
TEST_F(CudaBackendHeld, TheResidualAddGoesIntoTheProjectionsLaunchWithTheSameBits) {
  const std::vector<float> x = RandomActivations(kDim, 41), gate = RandomActivations(kDim, 42),
                           up = RandomActivations(kDim, 43), weight = RandomActivations(kDim, 44);
  BackendBuffer d_gate = Put(gate), d_up = Put(up), d_weight = Put(weight);
  BackendBuffer wd = Put(RandomWeights(GgmlType::kQ4_K, kDim, kDim, 45)),
                wo = Put(RandomWeights(GgmlType::kQ8_0, kDim, kDim, 46));
  const WeightMatrix down{GgmlType::kQ4_K, wd.data(), kDim, kDim}, out_proj{GgmlType::kQ8_0, wo.data(), kDim, kDim};
  struct Run {
    std::vector<float> x, normed, projected;
    uint64_t launches;
  };
  auto run = [&](bool apart) {
    BackendBuffer d_x = Put(x), h = Put(std::vector<float>(kDim)), d = Put(std::vector<float>(kDim)),
                  normed = Put(std::vector<float>(kDim));
    auto step = [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      if (apart) cuda_->stream();
    };
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    step(cuda_->SiluMul(d_gate.as<float>(), d_up.as<float>(), h.as<float>(), kDim));
    step(cuda_->MatMul(down, h.as<float>(), d.as<float>(), 1));
    step(cuda_->AddRmsNorm(d_x.as<float>(), d.as<float>(), d_weight.as<float>(), normed.as<float>(), 1, kDim, 1e-5f));
    step(cuda_->MatMul(out_proj, normed.as<float>(), d.as<float>(), 1));
    step(cuda_->Add(d_x.as<float>(), d.as<float>(), d_x.as<float>(), kDim));
    const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
    return Run{Get(d_x), Get(normed), Get(d), launches};
  };
  const Run apart = run(true), fused = run(false);
  // Apart: SiLU 1, down 2 (x rounded, decoded), the norm 1, wo 2, Add 1.
  // Fused: the SiLU product rounding for down, down adding into x, the norm
  // rounding for wo, wo adding into x.
  EXPECT_EQ(apart.launches, 7u);
  EXPECT_EQ(fused.launches, 4u);
  EXPECT_EQ(0, std::memcmp(fused.x.data(), apart.x.data(), kDim * 4));
  EXPECT_EQ(0, std::memcmp(fused.normed.data(), apart.normed.data(), kDim * 4));
  EXPECT_EQ(0, std::memcmp(fused.projected.data(), apart.projected.data(), kDim * 4));

  BackendBuffer d_x = Put(x), normed = Put(weight), d = Put(std::vector<float>(kDim));
  ASSERT_TRUE(cuda_->MatMul(out_proj, normed.as<float>(), d.as<float>(), 1).ok());
  ASSERT_TRUE(cuda_->Add(d_x.as<float>(), d.as<float>(), d_x.as<float>(), kDim / 2).ok());
  const std::vector<float> product = Get(d), half_added = Get(d_x);
  for (int i = 0; i < kDim; ++i) ASSERT_EQ(half_added[i], i < kDim / 2 ? x[i] + product[i] : x[i]) << i;
}

// An attention layer's start: the norm, q, k and v (Q4_K) -- a gated query
// split (qwen3-next), head norms (qwen3) or neither -- RoPE and the append
// of one sequence's new rows. Held and fused (the norm's launch, then the
// q, k and v launch turning and appending the heads in its tails) or
// launched apart (stream() between): the same q, k, v and cache bytes. An
// append of part of the rows (a batch's first sequence) is not the held
// group's, nor is a head of 16 values one launch can append to a Q8_0 cache
// (half a block): launched apart, the same bytes.
TEST_F(CudaBackendHeld, TheQkvLaunchTurnsAndAppendsItsHeadsWithTheSameBits) {
  constexpr int kHeads = 4, kKvHeads = 2, kTokens = 2, kCapacity = 8;
  const std::vector<float> x = RandomActivations(kTokens * kDim, 51), weight = RandomActivations(kDim, 52),
                           head_weight = RandomActivations(64, 53);
  BackendBuffer d_weight = Put(weight), d_head_weight = Put(head_weight), d_pos = Put(std::vector<int32_t>{3, 4});
  for (const int head_dim : {64, 16}) {
    const int q_width = kHeads * head_dim, kv_width = kKvHeads * head_dim;
    const KvCacheTypes types = head_dim == 64 ? KvCacheTypes{} : KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ8_0};
    const size_t key_bytes = RowBytes(types.k, kv_width) * kCapacity, value_bytes = RowBytes(types.v, kv_width) * kCapacity;
    for (const bool gated : {false, true}) {
      for (const bool norms : {false, true}) {
        for (const bool part : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " gated " << gated << " norms " << norms
                                            << " part " << part);
          const int q_rows = gated ? 2 * q_width : q_width;
          BackendBuffer wq = Put(RandomWeights(GgmlType::kQ4_K, q_rows, kDim, 54)),
                        wk = Put(RandomWeights(GgmlType::kQ4_K, kv_width, kDim, 55)),
                        wv = Put(RandomWeights(GgmlType::kQ4_K, kv_width, kDim, 56));
          const WeightMatrix qkv[] = {{GgmlType::kQ4_K, wq.data(), q_rows, kDim},
                                      {GgmlType::kQ4_K, wk.data(), kv_width, kDim},
                                      {GgmlType::kQ4_K, wv.data(), kv_width, kDim}};
          const RopeParams rope{.n_heads = kHeads, .head_dim = head_dim, .rope_dim = head_dim, .neox = true};
          struct Run {
            std::vector<float> q, k, v, gate;
            std::vector<uint8_t> keys, values;
            uint64_t launches;
          };
          auto bytes = [&](const BackendBuffer& b) {
            std::vector<uint8_t> host(b.size());
            EXPECT_TRUE(cuda_->Download(host.data(), b.data(), b.size()).ok());
            return host;
          };
          auto run = [&](bool apart) {
            BackendBuffer d_x = Put(x), xb = Put(std::vector<float>(kTokens * kDim)),
                          qg = Put(std::vector<float>(kTokens * q_rows)), q = Put(std::vector<float>(kTokens * q_width)),
                          gate = Put(std::vector<float>(kTokens * q_width)),
                          k = Put(std::vector<float>(kTokens * kv_width)), v = Put(std::vector<float>(kTokens * kv_width)),
                          keys = Put(std::vector<uint8_t>(key_bytes, 0x12)),
                          values = Put(std::vector<uint8_t>(value_bytes, 0x34));
            auto step = [&](absl::Status s) {
              EXPECT_TRUE(s.ok()) << s;
              if (apart) cuda_->stream();
            };
            const cuda::ApiCounts before = cuda::CurrentApiCounts();
            step(cuda_->RmsNorm(d_x.as<float>(), d_weight.as<float>(), xb.as<float>(), kTokens, kDim, 1e-5f));
            float* const outs[] = {gated ? qg.as<float>() : q.as<float>(), k.as<float>(), v.as<float>()};
            step(cuda_->MatMulGroup(qkv, xb.as<float>(), outs, kTokens));
            if (gated) {
              step(cuda_->SplitGatedQuery(qg.as<float>(), q.as<float>(), gate.as<float>(), kTokens, kHeads, head_dim));
            }
            if (norms) {
              step(cuda_->RmsNorm(q.as<float>(), d_head_weight.as<float>(), q.as<float>(), kTokens * kHeads, head_dim,
                                  1e-6f));
              step(cuda_->RmsNorm(k.as<float>(), d_head_weight.as<float>(), k.as<float>(), kTokens * kKvHeads, head_dim,
                                  1e-6f));
            }
            step(cuda_->RopeQK(q.as<float>(), k.as<float>(), d_pos.as<int32_t>(), kTokens, rope, kKvHeads));
            step(cuda_->KvAppend(k.as<float>(), v.as<float>(), part ? 1 : kTokens, kv_width, keys.data(), values.data(),
                                 3, types));
            const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
            return Run{Get(q), Get(k), Get(v), Get(gate), bytes(keys), bytes(values), launches};
          };
          run(false);  // the backend's counters grow once (a growth launches what is held apart)
          const Run apart = run(true), fused = run(false);
          if (!part && head_dim == 64) {
            EXPECT_EQ(fused.launches, 2u) << "the norm, then q, k and v with their tails";
          }
          EXPECT_LT(fused.launches, apart.launches);
          for (const auto& [got, want, what] : {std::tuple{&fused.q, &apart.q, "q"}, {&fused.k, &apart.k, "k"},
                                                {&fused.v, &apart.v, "v"}, {&fused.gate, &apart.gate, "gate"}}) {
            ASSERT_EQ(got->size(), want->size()) << what;
            EXPECT_EQ(0, std::memcmp(got->data(), want->data(), got->size() * 4)) << what;
          }
          EXPECT_EQ(fused.keys, apart.keys);
          EXPECT_EQ(fused.values, apart.values);
        }
      }
    }
  }
}

}  // namespace
}  // namespace octo
