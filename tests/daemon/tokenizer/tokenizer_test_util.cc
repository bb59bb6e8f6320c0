#include "tests/daemon/tokenizer/tokenizer_test_util.h"

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "daemon/tokenizer/bpe.h"
#include "gtest/gtest.h"
#include "tests/shared_data.h"

namespace octo::testing {

Tokenizer MakeTokenizer(const MetadataList& kv) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(kv);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

MetadataList SpmMetadata(const SpmVocabSpec& spec) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  if (spec.byte_tokens) {
    for (int byte = 0; byte < 256; ++byte) {
      tokens.push_back(absl::StrFormat("<0x%02X>", byte));
      scores.push_back(0);
      types.push_back(6);
    }
  }
  for (size_t i = 0; i < spec.pieces.size(); ++i) {
    tokens.push_back(spec.pieces[i]);
    scores.push_back(-static_cast<float>(i + 1));
    types.push_back(1);
  }
  for (const auto& [text, type] : spec.extra) {
    tokens.push_back(text);
    scores.push_back(0);
    types.push_back(type);
  }
  MetadataList kv;
  kv.emplace_back("tokenizer.ggml.model", GgufValue::String("llama"));
  kv.emplace_back("tokenizer.ggml.tokens", StringArrayValue(tokens));
  kv.emplace_back("tokenizer.ggml.scores", F32Array(scores));
  kv.emplace_back("tokenizer.ggml.token_type", I32Array(types));
  kv.emplace_back("tokenizer.ggml.bos_token_id", U32(1));
  kv.emplace_back("tokenizer.ggml.eos_token_id", U32(2));
  kv.emplace_back("tokenizer.ggml.unknown_token_id", U32(0));
  return kv;
}

MetadataList BpeMetadata(const BpeVocabSpec& spec) {
  std::vector<std::string> tokens(tokenizer::ByteToUnicode().begin(), tokenizer::ByteToUnicode().end());
  std::vector<int32_t> types(tokens.size(), 1);
  for (const std::string& merge : spec.merges) {
    const size_t space = merge.find(' ', 1);
    tokens.push_back(merge.substr(0, space) + merge.substr(space + 1));
    types.push_back(1);
  }
  for (const auto& [text, type] : spec.extra) {
    tokens.push_back(text);
    types.push_back(type);
  }
  MetadataList kv;
  kv.emplace_back("tokenizer.ggml.model", GgufValue::String("gpt2"));
  kv.emplace_back("tokenizer.ggml.pre", GgufValue::String(spec.pre));
  kv.emplace_back("tokenizer.ggml.tokens", StringArrayValue(tokens));
  kv.emplace_back("tokenizer.ggml.token_type", I32Array(types));
  kv.emplace_back("tokenizer.ggml.merges", StringArrayValue(spec.merges));
  return kv;
}

MetadataList WpmMetadata(const WpmVocabSpec& spec) {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types = {3, 2, 3, 3, 3};
  for (const std::string& piece : spec.pieces) {
    tokens.push_back(piece);
    types.push_back(1);
  }
  for (const auto& [text, type] : spec.extra) {
    tokens.push_back(text);
    types.push_back(type);
  }
  MetadataList kv;
  kv.emplace_back("tokenizer.ggml.model", GgufValue::String("bert"));
  kv.emplace_back("tokenizer.ggml.tokens", StringArrayValue(tokens));
  kv.emplace_back("tokenizer.ggml.token_type", I32Array(types));
  kv.emplace_back("tokenizer.ggml.padding_token_id", U32(0));
  kv.emplace_back("tokenizer.ggml.unknown_token_id", U32(1));
  kv.emplace_back("tokenizer.ggml.bos_token_id", U32(2));
  kv.emplace_back("tokenizer.ggml.seperator_token_id", U32(3));
  kv.emplace_back("tokenizer.ggml.eos_token_id", U32(3));
  kv.emplace_back("tokenizer.ggml.mask_token_id", U32(4));
  return kv;
}

MetadataList SharedModelMetadata(const std::string& relative_path) {
  auto file = GgufFile::Open(SharedPath("models/" + relative_path));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  return file->metadata();
}

const Tokenizer& SharedTokenizer(const std::string& relative_path) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  auto& slot = (*cache)[relative_path];
  if (slot == nullptr) {
    auto tokenizer = Tokenizer::FromMetadata(SharedModelMetadata(relative_path));
    EXPECT_TRUE(tokenizer.ok()) << relative_path << ": " << tokenizer.status();
    if (!tokenizer.ok()) tokenizer = Tokenizer::FromMetadata(SpmMetadata({}));  // keeps the test running
    slot = std::make_unique<Tokenizer>(*std::move(tokenizer));
  }
  return *slot;
}

std::string Escaped(const std::string& text) { return absl::CHexEscape(text); }

std::vector<std::string> ReadVocabTestInputs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < text.size();) {
    size_t next = text.find(separator, pos);
    if (next == std::string::npos) next = text.size();
    inputs.push_back(text.substr(pos, next - pos));
    pos = next + separator.size();
  }
  return inputs;
}

std::vector<std::vector<int32_t>> ReadVocabTestOutputs(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<int32_t>> outputs;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    std::vector<int32_t>& out = outputs.emplace_back();
    for (int32_t id; ids >> id;) out.push_back(id);
  }
  return outputs;
}

}  // namespace octo::testing
