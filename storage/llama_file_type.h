// What a GGUF's weights are, as people name them: llama.cpp's
// general.file_type ("Q4_K_M" is a mix, not a ggml type), for model
// listings (octo-ctl models, Ollama's /api/tags).
#pragma once

#include <cstdint>
#include <string>

namespace octo {

// The name llama.cpp's quantizer gives file type `file_type` ("Q4_K_M",
// "F16", "all F32" is "F32" here), or "" for a value it does not define.
std::string LlamaFileTypeName(uint64_t file_type);

}  // namespace octo
