// An independent forward pass for the hybrid gated-DeltaNet architectures
// (qwen3next, qwen35, qwen35moe), in double, one token at a time, written
// from the architectures' published descriptions and llama.cpp's GGUF layout
// (tensor names, shapes and the order of their rows), not from the engine.
// It reads an F32 GGUF directly: Octo's layer directory does not take these
// architectures yet, and reading the GGUF keeps this pass apart from the
// code it will check.
//
// Per layer: RMSNorm, then the token mixer, a residual add, RMSNorm
// (post_attention_norm) and the FFN, another residual add.
//  - Gated attention (every full_attention_interval-th layer): attn_q gives,
//    per head, head_dim queries then head_dim gate values; per-head RMSNorm
//    of q and k; NEOX RoPE on the first rope.dimension_count dims (qwen35's
//    sectioned rope is the same for text, where every section's position is
//    the token's); causal GQA softmax attention; each head's output times
//    sigmoid(its gate); attn_output.
//  - Gated DeltaNet: attn_qkv gives the conv channels [q | k | v]; a causal
//    depthwise conv1d of width ssm.conv_kernel (the newest input meets the
//    last tap) over this and the kernel-1 earlier inputs, then SiLU; q and k
//    L2-normalised per head (x / max(|x|, eps)); value head h reads key head
//    h % n_k_heads in qwen35 / qwen35moe files, h / (n_v_heads / n_k_heads)
//    in qwen3next ones (llama.cpp's two builders differ here); beta = sigmoid(b), decay g = softplus(a + ssm_dt.bias) *
//    ssm_a (ssm_a holds -exp(A_log)); b and a from ssm_beta / ssm_alpha, or
//    from qwen3next's ssm_ba, grouped per key head ([b of the group's value
//    heads, then their a]). Per value head the state S (key dim x value dim):
//      S *= exp(g);  delta = beta * (v - S^T k);  S += k delta^T;
//      o = S^T q / sqrt(head dim)
//    then RMSNorm(o, ssm_norm) * SiLU(z) per head, z from attn_gate; ssm_out.
//  - FFN: SwiGLU, or a softmax router with the top k renormalised plus the
//    shared expert times sigmoid(ffn_gate_inp_shexp . x).
//
// Keys and values are rounded to fp16 (as llama.cpp's and Octo's KV caches
// hold them), and so is q before its dot products with the keys, unless
// options say otherwise; everything else is double.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace octo::testing {

struct HybridReferenceOptions {
  bool fp16_kv = true;
  bool fp16_q = true;  // q rounded to fp16 before q.k, as llama.cpp's and Octo's attention do
  // Deliberately wrong variants, which a comparison must catch:
  bool drop_conv_state = false;   // the conv forgets the earlier inputs at every step
  bool flip_decay_sign = false;   // g = -softplus(..) * ssm_a: the state grows
  bool drop_output_gate = false;  // attention heads not multiplied by sigmoid(gate)
  bool norm_offset = false;       // RMSNorms multiply by 1 + w (the checkpoint's convention, folded into GGUF weights)
};

class HybridReference {
 public:
  // INVALID_ARGUMENT naming the key or tensor that is missing, not F32, or
  // of a shape the hyper-parameters do not predict.
  static absl::StatusOr<std::unique_ptr<HybridReference>> Load(const std::string& gguf_path,
                                                               const HybridReferenceOptions& options = {});
  ~HybridReference();

  // Runs `token` at position position() and returns its logits.
  absl::StatusOr<std::vector<double>> Step(int32_t token);
  int position() const { return position_; }
  int vocab_size() const;

  struct Model;  // hyper-parameters, weights and state; in the .cc

 private:
  HybridReference() = default;
  std::unique_ptr<Model> m_;
  HybridReferenceOptions options_;
  int position_ = 0;
};

}  // namespace octo::testing
