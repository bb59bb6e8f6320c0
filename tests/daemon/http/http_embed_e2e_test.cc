// Embeddings from the real octod, through every door a client uses: the
// official `openai` npm client (base64, as it asks by default, and float),
// curl on /v1/embeddings, /api/embed and /api/embeddings, and octo-gen
// --embed over gRPC. They must give the same vectors; a batch the vectors of
// its inputs alone; and bad requests a 400 naming the field, with octod
// serving on. An encoder (bert) beside the chat model gives llama.cpp's
// vectors and refuses to generate.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_e2e_fixture.h"

namespace octo::testing {
namespace {

using nlohmann::json;

using Vector = std::vector<float>;

double Norm(const Vector& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

class HttpEmbedE2eTest : public HttpE2eTest {
 protected:
  json PostJson(const std::string& path, const json& body, int expect_status = 200) {
    const auto [text, status] = CurlPost(path, body.dump());
    EXPECT_EQ(status, expect_status) << path << " " << body.dump().substr(0, 200) << ": " << text;
    return json::parse(text, nullptr, false);
  }

  // octo-gen --embed TEXT over gRPC: the one vector it prints.
  Vector GrpcEmbedding(const std::string& text, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--embed", text};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = octod_.Gen(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const json line = json::parse(r.out, nullptr, false);
    return line.is_array() ? line.get<Vector>() : Vector{};
  }
};

const std::vector<std::string> kInputs = {"Once upon a time", "The cat sat on the mat.", "Once upon a time"};

TEST_F(HttpEmbedE2eTest, EveryApiGivesTheSameVectors) {
  StartWithHttp();
  const Vector grpc = GrpcEmbedding(kInputs[0]);
  ASSERT_FALSE(grpc.empty());
  EXPECT_NEAR(Norm(grpc), 1.0, 1e-5);

  // Ollama's /api/embed: normalised, a batch equal to its inputs alone.
  const json embed = PostJson("/api/embed", {{"model", "tiny"}, {"input", kInputs}});
  ASSERT_EQ(embed["embeddings"].size(), kInputs.size()) << embed.dump();
  const std::vector<Vector> batch = embed["embeddings"].get<std::vector<Vector>>();
  EXPECT_EQ(batch[0], grpc);
  EXPECT_EQ(batch[0], batch[2]) << "identical inputs, identical vectors";
  EXPECT_NE(batch[0], batch[1]);
  EXPECT_EQ(batch[1], GrpcEmbedding(kInputs[1]));
  EXPECT_GT(embed["prompt_eval_count"].get<int>(), 0);
  EXPECT_EQ(embed["model"], "tiny");
  EXPECT_EQ(PostJson("/api/show", {{"model", "tiny"}})["capabilities"], json({"completion", "embedding"}));

  // OpenAI's /v1/embeddings, as float and as base64 (little-endian float32).
  const json openai = PostJson("/v1/embeddings", {{"model", "tiny"}, {"input", kInputs[0]}});
  EXPECT_EQ(openai["object"], "list");
  EXPECT_EQ(openai["data"][0]["object"], "embedding");
  EXPECT_EQ(openai["data"][0]["index"], 0);
  EXPECT_EQ(openai["data"][0]["embedding"].get<Vector>(), grpc);
  EXPECT_GT(openai["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(openai["usage"]["total_tokens"], openai["usage"]["prompt_tokens"]);
  const json encoded =
      PostJson("/v1/embeddings", {{"model", "tiny"}, {"input", kInputs[0]}, {"encoding_format", "base64"}});
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(encoded["data"][0]["embedding"].get<std::string>(), &bytes));
  ASSERT_EQ(bytes.size(), grpc.size() * sizeof(float));
  Vector decoded(grpc.size());
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  EXPECT_EQ(decoded, grpc);

  // dimensions: the first N values, normalised again.
  const json cut = PostJson("/v1/embeddings", {{"model", "tiny"}, {"input", kInputs[0]}, {"dimensions", 16}});
  const Vector short_vector = cut["data"][0]["embedding"].get<Vector>();
  ASSERT_EQ(short_vector.size(), 16u);
  EXPECT_NEAR(Norm(short_vector), 1.0, 1e-5);
  EXPECT_EQ(short_vector, GrpcEmbedding(kInputs[0], {"--dimensions", "16"}));

  // The older /api/embeddings: the pooled vector as it is, not normalised.
  const json legacy = PostJson("/api/embeddings", {{"model", "tiny"}, {"prompt", kInputs[0]}});
  const Vector raw = legacy["embedding"].get<Vector>();
  ASSERT_EQ(raw.size(), grpc.size());
  EXPECT_GT(std::abs(Norm(raw) - 1.0), 1e-3);
  EXPECT_EQ(raw, GrpcEmbedding(kInputs[0], {"--raw"}));
  for (size_t i = 0; i < raw.size(); ++i) ASSERT_NEAR(raw[i] / Norm(raw), grpc[i], 1e-6);
  EXPECT_EQ(PostJson("/api/embeddings", {{"model", "tiny"}, {"prompt", ""}})["embedding"], json::array());

  // The openai npm client, which asks for base64 unless told otherwise.
  if (const std::string missing = NpmClientMissing("openai"); !missing.empty()) GTEST_SKIP() << missing;
  for (const std::string mode : {"embeddings", "embeddings-float"}) {
    const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/openai_check.mjs", base_ + "/v1",
                                    "unused-key", mode, "tiny", kInputs[0] + "|" + kInputs[1], "0"});
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    const json result = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(result.is_object() && !result.contains("error")) << mode << ": " << r.out;
    const std::vector<Vector> vectors = result["embeddings"].get<std::vector<Vector>>();
    ASSERT_EQ(vectors.size(), 2u) << mode;
    EXPECT_EQ(vectors[0], batch[0]) << mode;
    EXPECT_EQ(vectors[1], batch[1]) << mode;
  }
}

TEST_F(HttpEmbedE2eTest, BadRequestsAreNamedAndOctodStaysUp) {
  StartWithHttp();
  struct Case {
    std::string what, path;
    json body;
    int status;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"unknown model", "/v1/embeddings", {{"model", "ghost"}, {"input", "a"}}, 404, "ghost"},
      {"empty input array", "/v1/embeddings", {{"model", "tiny"}, {"input", json::array()}}, 400, "input"},
      {"empty string", "/api/embed", {{"model", "tiny"}, {"input", {"a", ""}}}, 400, "input"},
      {"oversized batch", "/api/embed", {{"model", "tiny"}, {"input", std::vector<std::string>(2049, "a")}}, 400,
       "2048"},
      {"negative dimensions", "/v1/embeddings", {{"model", "tiny"}, {"input", "a"}, {"dimensions", -3}}, 400,
       "dimensions"},
      {"dimensions past the model", "/v1/embeddings", {{"model", "tiny"}, {"input", "a"}, {"dimensions", 100000}},
       400, "dimensions"},
      {"keep_alive garbage", "/api/embed", {{"model", "tiny"}, {"input", "a"}, {"keep_alive", "soon"}}, 400,
       "keep_alive"},
      {"bad encoding_format", "/v1/embeddings", {{"model", "tiny"}, {"input", "a"}, {"encoding_format", "hex"}}, 400,
       "encoding_format"},
      {"token id out of range", "/v1/embeddings", {{"model", "tiny"}, {"input", {1, 99999999}}}, 400, "vocabulary"},
      {"input of another type", "/api/embed", {{"model", "tiny"}, {"input", {{"a", 1}}}}, 400, "input"},
  };
  for (const Case& c : cases) {
    const auto [text, status] = CurlPost(c.path, c.body.dump());
    EXPECT_EQ(status, c.status) << c.what << ": " << text;
    EXPECT_NE(text.find(c.words), std::string::npos) << c.what << ": " << text;
  }
  // Too long for the context: OpenAI's 400 context_length_exceeded; Ollama
  // cuts it (truncate defaults to true) unless told not to.
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "Once upon a time there was a little girl. ";
  std::vector<int> too_many(2049);  // the tiny model's context is 2048
  for (size_t i = 0; i < too_many.size(); ++i) too_many[i] = 5 + static_cast<int>(i * 11 % 400);
  const json refused = PostJson("/v1/embeddings", {{"model", "tiny"}, {"input", too_many}}, 400);
  EXPECT_EQ(refused["error"]["code"], "context_length_exceeded") << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("2049 tokens"), std::string::npos) << refused.dump();
  const json cut = PostJson("/api/embed", {{"model", "tiny"}, {"input", long_text}, {"options", {{"num_ctx", 32}}}});
  EXPECT_EQ(cut["prompt_eval_count"], 32) << cut.dump();
  const json kept =
      PostJson("/api/embed", {{"model", "tiny"}, {"input", long_text}, {"options", {{"num_ctx", 32}}}, {"truncate", false}},
               400);
  EXPECT_NE(kept["error"].get<std::string>().find("context"), std::string::npos) << kept.dump();
  EXPECT_EQ(PostJson("/api/embed", {{"model", "tiny"}, {"input", "still serving"}})["embeddings"].size(), 1u);
}

// The llama.cpp record for `preset` at `type` and `prompt`
// (tests/data/llamacpp-encoders.jsonl), or null.
json EncoderRecord(const std::string& preset, const std::string& type, const std::string& prompt) {
  std::ifstream in(OCTO_SOURCE_DIR "/tests/data/llamacpp-encoders.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    if (r["preset"] == preset && r["type"] == type && r["prompt"] == prompt) return r;
  }
  return nullptr;
}

TEST_F(HttpEmbedE2eTest, AnEncoderBesideTheChatModelEmbedsAsLlamaCppAndDoesNotGenerate) {
  // tiny-bert as llama.cpp's record has it (2 layers, Q8_0, seed 1).
  MakeModel("minilm", 2, "Q8_0", "tiny-bert", /*seed=*/1);
  StartWithHttp();
  const std::string prompt = "the cat sat on the mat";
  const json record = EncoderRecord("tiny-bert", "Q8_0", prompt);
  ASSERT_TRUE(record.is_object());
  const json one = PostJson("/v1/embeddings", {{"model", "minilm"}, {"input", prompt}});
  const Vector got = one["data"][0]["embedding"].get<Vector>();
  const Vector want = record["embedding"].get<Vector>();
  ASSERT_EQ(got.size(), want.size()) << one.dump().substr(0, 300);
  double dot = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    dot += static_cast<double>(got[i]) * want[i];
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
  }
  EXPECT_GT(dot, 0.99999) << "cosine against llama.cpp";
  EXPECT_LT(worst, 1e-3);
  EXPECT_EQ(one["usage"]["prompt_tokens"], record["tokens"].size()) << "[CLS] ... [SEP] as llama.cpp";

  // A batch gives each input its vector alone; the chat model still generates.
  const json batch = PostJson("/api/embed", {{"model", "minilm"}, {"input", {"hello", prompt, "hello"}}});
  ASSERT_EQ(batch["embeddings"].size(), 3u) << batch.dump().substr(0, 300);
  EXPECT_EQ(batch["embeddings"][1].get<Vector>(), got);
  EXPECT_EQ(batch["embeddings"][0], batch["embeddings"][2]);
  EXPECT_EQ(PostJson("/api/show", {{"model", "minilm"}})["capabilities"], json({"embedding"}));
  const json chat = PostJson("/v1/chat/completions",
                             {{"model", "tiny"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant") << chat.dump();

  // Generating with it: a 400 that says why.
  for (const std::string path : {"/v1/chat/completions", "/api/generate"}) {
    const json body = path == "/api/generate"
                          ? json{{"model", "minilm"}, {"prompt", "hi"}, {"stream", false}}
                          : json{{"model", "minilm"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    const auto [text, status] = CurlPost(path, body.dump());
    EXPECT_EQ(status, 400) << path << ": " << text;
    EXPECT_NE(text.find("embedding model"), std::string::npos) << path << ": " << text;
  }
  // Past its 512 learned positions: OpenAI's context_length_exceeded.
  std::vector<int> too_many(513, 100);
  const json refused = PostJson("/v1/embeddings", {{"model", "minilm"}, {"input", too_many}}, 400);
  EXPECT_EQ(refused["error"]["code"], "context_length_exceeded") << refused.dump();
  EXPECT_EQ(PostJson("/v1/embeddings", {{"model", "minilm"}, {"input", prompt}})["data"][0]["embedding"].get<Vector>(),
            got);
}

}  // namespace
}  // namespace octo::testing
