// Broken tokenizer metadata, one defect per case: each is INVALID_ARGUMENT
// naming the key, never a crash; and a sweep of every key removed or
// replaced by a value of the wrong kind.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"

namespace octo {
namespace {

using ::octo::testing::BpeMetadata;
using ::octo::testing::BpeVocabSpec;
using ::octo::testing::F32Array;
using ::octo::testing::I32;
using ::octo::testing::I32Array;
using ::octo::testing::Remove;
using ::octo::testing::Set;
using ::octo::testing::SpmMetadata;
using ::octo::testing::SpmVocabSpec;
using ::octo::testing::StringArrayValue;
using ::octo::testing::U32;

constexpr int32_t kSpmTokens = 3 + 256 + 2;  // SpmBase(): specials, bytes, two pieces

MetadataList SpmBase() {
  SpmVocabSpec spec;
  spec.pieces = {"\xE2\x96\x81", "a"};
  return SpmMetadata(spec);
}

MetadataList WpmBase() { return testing::WpmMetadata({.pieces = {"\xE2\x96\x81" "a", "a"}}); }

MetadataList BpeBase() {
  BpeVocabSpec spec;
  spec.merges = {"a b"};
  return BpeMetadata(spec);
}

void ExpectRejected(const MetadataList& kv, absl::string_view key, absl::string_view detail = "") {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(kv);
  ASSERT_FALSE(tokenizer.ok()) << "accepted; expected an error naming " << key;
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << tokenizer.status();
  EXPECT_TRUE(absl::StrContains(tokenizer.status().message(), key)) << tokenizer.status();
  EXPECT_TRUE(absl::StrContains(tokenizer.status().message(), detail)) << tokenizer.status();
}

TEST(HostileMetadataTest, BaselinesAreAccepted) {
  EXPECT_TRUE(Tokenizer::FromMetadata(SpmBase()).ok());
  EXPECT_TRUE(Tokenizer::FromMetadata(BpeBase()).ok());
  EXPECT_TRUE(Tokenizer::FromMetadata(WpmBase()).ok());
}

TEST(HostileMetadataTest, ModelKey) {
  MetadataList kv = SpmBase();
  Remove(kv, "tokenizer.ggml.model");
  ExpectRejected(kv, "tokenizer.ggml.model", "missing");
  Set(kv, "tokenizer.ggml.model", GgufValue::String("t5"));
  ExpectRejected(kv, "tokenizer.ggml.model", "t5");
  Set(kv, "tokenizer.ggml.model", U32(1));
  ExpectRejected(kv, "tokenizer.ggml.model");
}

TEST(HostileMetadataTest, Tokens) {
  MetadataList kv = SpmBase();
  Remove(kv, "tokenizer.ggml.tokens");
  ExpectRejected(kv, "tokenizer.ggml.tokens", "missing");
  Set(kv, "tokenizer.ggml.tokens", GgufValue::String("<unk>"));
  ExpectRejected(kv, "tokenizer.ggml.tokens", "array of strings");
  Set(kv, "tokenizer.ggml.tokens", I32Array({1, 2, 3}));
  ExpectRejected(kv, "tokenizer.ggml.tokens", "array of strings");
  Set(kv, "tokenizer.ggml.tokens", StringArrayValue({}));
  ExpectRejected(kv, "tokenizer.ggml.tokens", "0 tokens");
  // A count that disagrees with the strings held (a value built by hand).
  GgufValue lying = StringArrayValue({"a", "b"});
  lying.count = 1000;
  Set(kv, "tokenizer.ggml.tokens", lying);
  ExpectRejected(kv, "tokenizer.ggml.tokens", "count");

  kv = SpmBase();
  std::vector<std::string> duplicated = {"<unk>", "<s>", "</s>", "x", "y", "x"};
  Set(kv, "tokenizer.ggml.tokens", StringArrayValue(duplicated));
  Remove(kv, "tokenizer.ggml.scores");
  Remove(kv, "tokenizer.ggml.token_type");
  ExpectRejected(kv, "tokenizer.ggml.tokens", "duplicate token 'x' at ids 3 and 5");
}

TEST(HostileMetadataTest, ScoresAndTypes) {
  MetadataList kv = SpmBase();
  Set(kv, "tokenizer.ggml.scores", F32Array(std::vector<float>(kSpmTokens - 1, 0.0f)));
  ExpectRejected(kv, "tokenizer.ggml.scores", "260 entries for 261 tokens");
  std::vector<float> scores(kSpmTokens, 0.0f);
  scores[7] = std::numeric_limits<float>::quiet_NaN();
  Set(kv, "tokenizer.ggml.scores", F32Array(scores));
  ExpectRejected(kv, "tokenizer.ggml.scores", "NaN");
  Set(kv, "tokenizer.ggml.scores", StringArrayValue(std::vector<std::string>(kSpmTokens, "0")));
  ExpectRejected(kv, "tokenizer.ggml.scores", "array of numbers");

  kv = SpmBase();
  Set(kv, "tokenizer.ggml.token_type", I32Array(std::vector<int32_t>(kSpmTokens + 1, 1)));
  ExpectRejected(kv, "tokenizer.ggml.token_type", "262 entries for 261 tokens");
  std::vector<int32_t> types(kSpmTokens, 1);
  types[9] = 7;
  Set(kv, "tokenizer.ggml.token_type", I32Array(types));
  ExpectRejected(kv, "tokenizer.ggml.token_type", "token 9 has unknown type 7");
  types[9] = -1;
  Set(kv, "tokenizer.ggml.token_type", I32Array(types));
  ExpectRejected(kv, "tokenizer.ggml.token_type", "unknown type -1");
  Set(kv, "tokenizer.ggml.token_type", F32Array(std::vector<float>(kSpmTokens, 1.0f)));
  ExpectRejected(kv, "tokenizer.ggml.token_type", "integers");
}

TEST(HostileMetadataTest, Merges) {
  MetadataList kv = BpeBase();
  Remove(kv, "tokenizer.ggml.merges");
  ExpectRejected(kv, "tokenizer.ggml.merges", "missing");
  for (const std::string bad : {"ab", "a ", " b", "", " "}) {
    Set(kv, "tokenizer.ggml.merges", StringArrayValue({"a b", bad}));
    ExpectRejected(kv, "tokenizer.ggml.merges", "merge 1");
  }
  Set(kv, "tokenizer.ggml.merges", I32Array({1}));
  ExpectRejected(kv, "tokenizer.ggml.merges", "array of strings");
  // A leading space is part of the left side (split after the first byte).
  Set(kv, "tokenizer.ggml.merges", StringArrayValue({"  b"}));
  EXPECT_TRUE(Tokenizer::FromMetadata(kv).ok());
}

TEST(HostileMetadataTest, PreTokenizer) {
  MetadataList kv = BpeBase();
  Set(kv, "tokenizer.ggml.pre", GgufValue::String("klingon"));
  ExpectRejected(kv, "tokenizer.ggml.pre", "'klingon'");
  Set(kv, "tokenizer.ggml.pre", U32(3));
  ExpectRejected(kv, "tokenizer.ggml.pre");
}

TEST(HostileMetadataTest, SpecialTokenIds) {
  for (const std::string key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
                                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                                "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id"}) {
    SCOPED_TRACE(key);
    MetadataList kv = SpmBase();
    Set(kv, key, U32(kSpmTokens));
    ExpectRejected(kv, key, "261 is out of range (the vocabulary has 261 tokens)");
    Set(kv, key, I32(-5));
    ExpectRejected(kv, key, "out of range");
    Set(kv, key, GgufValue::String("1"));
    ExpectRejected(kv, key, "integer");
    Set(kv, key, GgufValue::Uint(GgufValueType::kUint64, std::numeric_limits<uint64_t>::max()));
    ExpectRejected(kv, key);
  }
  // -1, as u32 or i32, means "none" (stories260K's separator and padding).
  MetadataList kv = SpmBase();
  Set(kv, "tokenizer.ggml.padding_token_id", U32(4294967295u));
  Set(kv, "tokenizer.ggml.seperator_token_id", I32(-1));
  Set(kv, "tokenizer.ggml.unknown_token_id", I32(-1));
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(kv);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->unk(), kNoToken);
}

TEST(HostileMetadataTest, FlagsNeedTheirTokens) {
  MetadataList kv = SpmBase();
  Set(kv, "tokenizer.ggml.bos_token_id", I32(-1));
  ExpectRejected(kv, "tokenizer.ggml.add_bos_token", "bos_token_id");
  Set(kv, "tokenizer.ggml.add_bos_token", GgufValue::Bool(false));
  EXPECT_TRUE(Tokenizer::FromMetadata(kv).ok());
  Set(kv, "tokenizer.ggml.add_eos_token", GgufValue::Bool(true));
  Set(kv, "tokenizer.ggml.eos_token_id", U32(4294967295u));
  ExpectRejected(kv, "tokenizer.ggml.add_eos_token", "eos_token_id");
  Set(kv, "tokenizer.ggml.add_eos_token", GgufValue::String("yes"));
  ExpectRejected(kv, "tokenizer.ggml.add_eos_token");
  // A llama-bpe vocabulary adds BOS by default, so it needs one.
  BpeVocabSpec spec;
  spec.pre = "llama-bpe";
  ExpectRejected(BpeMetadata(spec), "tokenizer.ggml.add_bos_token");
}

// Every key of a valid list removed, or replaced by each of a few values of
// the wrong kind: an error or a working tokenizer, never a crash.
TEST(HostileMetadataTest, EveryKeyRemovedOrMistyped) {
  const GgufValue wrong[] = {U32(0), I32(-1), GgufValue::String(""), GgufValue::Bool(true),
                             StringArrayValue({}), StringArrayValue({"a b", "<s>"}), I32Array({}),
                             I32Array({99999}), F32Array({1.0f})};
  int accepted = 0, rejected = 0;
  for (const MetadataList& base : {SpmBase(), BpeBase(), WpmBase()}) {
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<MetadataList> variants;
      MetadataList removed = base;
      removed.erase(removed.begin() + static_cast<std::ptrdiff_t>(i));
      variants.push_back(removed);
      for (const GgufValue& value : wrong) {
        MetadataList changed = base;
        changed[i].second = value;
        variants.push_back(changed);
      }
      for (const MetadataList& kv : variants) {
        absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(kv);
        if (!tokenizer.ok()) {
          EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << tokenizer.status();
          EXPECT_TRUE(absl::StrContains(tokenizer.status().message(), "tokenizer.ggml.")) << tokenizer.status();
          ++rejected;
          continue;
        }
        ++accepted;
        const std::vector<int32_t> ids = tokenizer->Encode("<s>a b\xC3\xA9", true, true);
        for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < tokenizer->vocab_size()) << id;
        tokenizer->Decode(ids, true);
      }
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace octo
