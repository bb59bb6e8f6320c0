// How many weight bytes one pass over a model reads from memory, from its
// manifest: the numerator of the decode bound (engine_bench.cc).
//
// A pass reads every tensor of every layer once, the final norm, and the
// whole lm_head (the embedding when tied); the embedding lookup reads one row
// per token. Of a mixture-of-experts layer a token reads the router and
// n_experts_used of the n_experts experts: counted as that fraction of the
// expert tensors (the average; a batch may touch more).
//
// Not counted: the KV cache (n_layers * 2 * n_kv_heads * head_dim fp16
// values per cached position: 32 KiB per position for Llama-3.2-1B, a few MB
// at the bench's short contexts) and the activations (cache-resident).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "storage/manifest.h"

namespace octo::bench {

struct WeightBytes {
  uint64_t layers = 0;   // every layer tensor (experts scaled as above)
  uint64_t lm_head = 0;  // output.weight, or token_embd when tied
  uint64_t other = 0;    // final norm, rope factors, one embedding row
  // Multiply-adds per token in the matrices (for GFLOP/s).
  uint64_t matmul_elements = 0;
  // Bytes of the matrices (layers + lm_head) by GGUF type name.
  std::map<std::string, uint64_t> matrix_bytes_by_type;
  uint64_t total() const { return layers + lm_head + other; }
};

// The bytes one decoded token (batch 1) reads.
WeightBytes WeightBytesPerToken(const Manifest& manifest);

}  // namespace octo::bench
