// decode_step_bench: the time of one decode step of a llama-shaped model
// through the CUDA ops, weights resident on the device. Not a test; run it
// by hand:
//
//   decode_step_bench [--dim D] [--hidden H] [--heads N] [--kv-heads N] [--layers L]
//                     [--vocab V] [--pos P] [--tokens T] [--steps S] [--type TYPE]
//                     [--attention-heads A]
//
// Defaults are the 256-wide test models of ../shared/models/widened (dim
// 256, ffn 768, 32 heads of 8, 16 kv heads, 5 layers, vocab 512), Q4_K, at
// position 64. A step is every op a token passes through (RMSNorm, q/k/v,
// RoPE, KV append, attention, output + residual, RMSNorm, gate/up, SiLU,
// down + residual per layer; final norm and lm_head) and waits for the
// logits, as a decode step must. It prints the median milliseconds per step
// next to the limit it is held to: in an OCTO_CUDA_SIM=ON build that is the
// host executor's speed (the "tens of milliseconds": 100 ms); on a
// GPU it is the kernels' launch-bound latency.
//
// --tokens above 64 (up to 8192) make the step a prefill chunk: every op
// takes its many-token path, the logits are the last token's, and the
// figure printed is tokens a second (Nsight Compute over it gives the
// prefill's kernels one by one: tests/bench/gpu_session.sh).
//
// --attention-heads A (1 to 4) makes each attention block serve A query
// heads of a kv head (cuda::SetAttentionHeadsPerBlock; the launch's own
// choice without it: one for a decode step, up to 4 for a prefill), to
// measure the shared key and value loads against one head a block.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cuda/device.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

constexpr double kLimitMs = 100.0;
// A step of more than kMaxDecodePathTokens tokens is a prefill chunk (the
// engine's is 512): every op takes its many-token path, and only the last
// token's logits are computed, as the engine does.
constexpr int kMaxPrefillTokens = 8192;

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "decode_step_bench: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

struct Shape {
  int dim = 256, hidden = 768, heads = 32, kv_heads = 16, layers = 5, vocab = 512, pos = 64, tokens = 1, steps = 20;
  GgmlType type = GgmlType::kQ4_K;
  int head_dim() const { return dim / heads; }
};

// A device buffer holding `host`.
template <typename T>
cuda::DeviceBuffer Upload(const std::vector<T>& host, cudaStream_t stream) {
  auto buffer = cuda::DeviceBuffer::Allocate(host.size() * sizeof(T));
  Check(buffer.status(), "cudaMalloc");
  Check(buffer->CopyFromHost(host.data(), host.size() * sizeof(T), stream), "copy");
  return std::move(*buffer);
}

struct Matrix {
  cuda::DeviceBuffer bytes;
  WeightMatrix w;
};

Matrix RandomMatrix(GgmlType type, int rows, int cols, uint32_t seed, cudaStream_t stream) {
  Matrix m{Upload(testing::RandomWeights(type, rows, cols, seed), stream), {}};
  m.w = WeightMatrix{type, m.bytes.data(), rows, cols};
  return m;
}

struct Layer {
  Matrix wq, wk, wv, wo, gate, up, down;
  cuda::DeviceBuffer attn_norm, ffn_norm, k_cache, v_cache;
};

int Main(int argc, char** argv) {
  Shape s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--type") {
      auto type = LookupGgmlTypeByName(argv[i + 1]);
      Check(type.status(), "--type");
      s.type = type->type;
      continue;
    }
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--attention-heads") {
      if (v < 1 || !cuda::SetAttentionHeadsPerBlock(v)) {
        std::fprintf(stderr, "decode_step_bench: --attention-heads takes 1 to 4, not %s\n", argv[i + 1]);
        return 2;
      }
      continue;
    }
    int* field = flag == "--dim" ? &s.dim : flag == "--hidden" ? &s.hidden : flag == "--heads" ? &s.heads
               : flag == "--kv-heads" ? &s.kv_heads : flag == "--layers" ? &s.layers : flag == "--vocab" ? &s.vocab
               : flag == "--pos" ? &s.pos : flag == "--tokens" ? &s.tokens : flag == "--steps" ? &s.steps : nullptr;
    if (field == nullptr || v <= 0) {
      std::fprintf(stderr, "decode_step_bench: bad flag %s %s (see the comment at the top of the source)\n",
                   flag.c_str(), argv[i + 1]);
      return 2;
    }
    *field = v;
  }
  if (s.dim % s.heads != 0 || s.heads % s.kv_heads != 0 || s.tokens > kMaxPrefillTokens) {
    std::fprintf(stderr, "decode_step_bench: dim must divide into heads, heads into kv heads, tokens <= %d\n",
                 kMaxPrefillTokens);
    return 2;
  }
  auto stream_or = cuda::CudaStream::Create();
  Check(stream_or.status(), "stream");
  auto blas = cuda::BlasContext::Create();
  Check(blas.status(), "cuBLAS");
  const cudaStream_t stream = stream_or->get();
  const int hd = s.head_dim(), q_dim = s.dim, kv_dim = s.kv_heads * hd, n = s.tokens;
  const int ctx = s.pos + n;

  std::vector<Layer> layers(s.layers);
  uint32_t seed = 1;
  for (Layer& l : layers) {
    l.wq = RandomMatrix(s.type, q_dim, s.dim, seed++, stream);
    l.wk = RandomMatrix(s.type, kv_dim, s.dim, seed++, stream);
    l.wv = RandomMatrix(s.type, kv_dim, s.dim, seed++, stream);
    l.wo = RandomMatrix(s.type, s.dim, q_dim, seed++, stream);
    l.gate = RandomMatrix(s.type, s.hidden, s.dim, seed++, stream);
    l.up = RandomMatrix(s.type, s.hidden, s.dim, seed++, stream);
    l.down = RandomMatrix(s.type, s.dim, s.hidden, seed++, stream);
    l.attn_norm = Upload(testing::RandomVector(s.dim, 0.5f, 1.5f, seed++), stream);
    l.ffn_norm = Upload(testing::RandomVector(s.dim, 0.5f, 1.5f, seed++), stream);
    l.k_cache = Upload(std::vector<uint16_t>(static_cast<size_t>(ctx) * kv_dim, 0x3c00), stream);  // 1.0
    l.v_cache = Upload(std::vector<uint16_t>(static_cast<size_t>(ctx) * kv_dim, 0x3c00), stream);
  }
  Matrix lm_head = RandomMatrix(s.type, s.vocab, s.dim, seed++, stream);
  cuda::DeviceBuffer final_norm = Upload(testing::RandomVector(s.dim, 0.5f, 1.5f, seed++), stream);

  // Activations (RunState's), each (n, width).
  auto buffer = [&](size_t floats) { return Upload(std::vector<float>(floats, 0.0f), stream); };
  cuda::DeviceBuffer x = Upload(testing::RandomVector(static_cast<size_t>(n) * s.dim, -1, 1, 99), stream);
  cuda::DeviceBuffer xb = buffer(n * s.dim), q = buffer(n * q_dim), k = buffer(n * kv_dim), v = buffer(n * kv_dim);
  cuda::DeviceBuffer att = buffer(n * q_dim), hb = buffer(n * s.hidden), hb2 = buffer(n * s.hidden);
  const int logit_rows = n > kMaxDecodePathTokens ? 1 : n;
  cuda::DeviceBuffer logits = buffer(static_cast<size_t>(logit_rows) * s.vocab);
  std::vector<int32_t> positions(n);
  for (int t = 0; t < n; ++t) positions[t] = s.pos + t;
  cuda::DeviceBuffer d_positions = Upload(positions, stream);
  const AttentionParams ap{.n_tokens = n, .first_pos = s.pos, .n_heads = s.heads, .n_kv_heads = s.kv_heads,
                           .head_dim = hd, .scale = 1.0f / std::sqrt(static_cast<float>(hd))};
  size_t scratch_bytes = cuda::AttentionScratchBytes(ap);
  for (const Matrix* m : {&layers[0].wq, &layers[0].gate, &layers[0].down, &lm_head}) {
    scratch_bytes = std::max(scratch_bytes, cuda::MatMulScratchBytes(m->w, m == &lm_head ? logit_rows : n));
  }
  auto scratch = cuda::DeviceBuffer::Allocate(scratch_bytes);
  Check(scratch.status(), "scratch");
  const cuda::Exec exec{stream, scratch->data(), scratch->size(), blas->get()};
  RopeParams rope_q{.n_heads = s.heads, .head_dim = hd, .rope_dim = hd, .freq_base = 10000.f, .neox = false};
  RopeParams rope_k = rope_q;
  rope_k.n_heads = s.kv_heads;
  const float eps = 1e-5f;
  std::vector<float> host_logits(static_cast<size_t>(logit_rows) * s.vocab);

  auto step = [&] {
    float* X = x.as<float>();
    float* XB = xb.as<float>();
    for (Layer& l : layers) {
      Check(cuda::RmsNorm(X, l.attn_norm.as<float>(), XB, n, s.dim, eps, stream), "attention norm");
      Check(cuda::MatMul(l.wq.w, XB, q.as<float>(), n, exec), "q");
      Check(cuda::MatMul(l.wk.w, XB, k.as<float>(), n, exec), "k");
      Check(cuda::MatMul(l.wv.w, XB, v.as<float>(), n, exec), "v");
      Check(cuda::Rope(q.as<float>(), d_positions.as<int32_t>(), n, rope_q, stream), "rope q");
      Check(cuda::Rope(k.as<float>(), d_positions.as<int32_t>(), n, rope_k, stream), "rope k");
      Check(cuda::KvAppend(k.as<float>(), v.as<float>(), n, kv_dim, l.k_cache.as<uint16_t>(), l.v_cache.as<uint16_t>(),
                           s.pos, {}, stream),
            "kv append");
      Check(cuda::Attention(q.as<float>(), l.k_cache.as<uint16_t>(), l.v_cache.as<uint16_t>(), att.as<float>(), ap, exec),
            "attention");
      Check(cuda::MatMul(l.wo.w, att.as<float>(), XB, n, exec), "output");
      Check(cuda::Add(X, XB, X, static_cast<int64_t>(n) * s.dim, stream), "residual");
      Check(cuda::RmsNorm(X, l.ffn_norm.as<float>(), XB, n, s.dim, eps, stream), "ffn norm");
      Check(cuda::MatMul(l.gate.w, XB, hb.as<float>(), n, exec), "gate");
      Check(cuda::MatMul(l.up.w, XB, hb2.as<float>(), n, exec), "up");
      Check(cuda::SiluMul(hb.as<float>(), hb2.as<float>(), hb.as<float>(), static_cast<int64_t>(n) * s.hidden, stream),
            "silu");
      Check(cuda::MatMul(l.down.w, hb.as<float>(), XB, n, exec), "down");
      Check(cuda::Add(X, XB, X, static_cast<int64_t>(n) * s.dim, stream), "residual");
    }
    const int64_t last = static_cast<int64_t>(n - logit_rows) * s.dim;
    Check(cuda::RmsNorm(X + last, final_norm.as<float>(), XB, logit_rows, s.dim, eps, stream), "final norm");
    Check(cuda::MatMul(lm_head.w, XB, logits.as<float>(), logit_rows, exec), "lm_head");
    Check(logits.CopyToHost(host_logits.data(), host_logits.size() * sizeof(float), stream), "logits");
  };

  step();  // warm-up: fiber stacks, caches
  std::vector<double> ms;
  for (int i = 0; i < s.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s; programmatic launches %s; weight prefetch %d bytes a row (OCTO_CUDA_PREFETCH)\n", prop.name,
              cuda::ProgrammaticLaunches() ? "on" : "off", cuda::WeightPrefetchBytes());
  std::printf("model: dim %d, ffn %d, %d heads (%d kv) of %d, %d layers, vocab %d, %s, %d token(s) at position %d\n",
              s.dim, s.hidden, s.heads, s.kv_heads, hd, s.layers, s.vocab,
              std::string(GgmlTypeInfoOf(s.type).name).c_str(), n, s.pos);
  if (n > kMaxDecodePathTokens) {  // no limit: a prefill chunk's figure is its tokens a second
    std::printf("prefill step: median %.1f ms (min %.1f, max %.1f, %d steps), %.0f tokens/s over %d layers\n",
                ms[ms.size() / 2], ms.front(), ms.back(), s.steps, n / (ms[ms.size() / 2] * 1e-3), s.layers);
    return 0;
  }
  std::printf("decode step: median %.1f ms (min %.1f, max %.1f, %d steps); limit %.0f ms: %s\n", ms[ms.size() / 2],
              ms.front(), ms.back(), s.steps, kLimitMs, ms[ms.size() / 2] <= kLimitMs ? "within" : "OVER");
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) { return octo::Main(argc, argv); }
