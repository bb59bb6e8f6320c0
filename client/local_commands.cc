#include "client/local_commands.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "client/error_message.h"
#include "daemon/chat/chat_template.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/model.h"
#include "daemon/engine/perplexity.h"
#include "daemon/tokenizer/tokenizer.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "nlohmann/json.hpp"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "octo-ctl: %s\n", ErrorMessage(status).c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<Model>> OpenModel(const LocalModelFlags& flags) {
  ModelOptions options;
  options.n_threads = flags.threads;
  options.allow_simd = !flags.portable;
  options.backend = flags.backend;
  OCTO_ASSIGN_OR_RETURN(options.kv_types.k, ParseKvCacheType("--cache-type-k", flags.cache_type_k));
  OCTO_ASSIGN_OR_RETURN(options.kv_types.v, ParseKvCacheType("--cache-type-v", flags.cache_type_v));
  if (!flags.budget.empty()) {
    std::optional<uint64_t> bytes = ParseByteSize(flags.budget);
    if (!bytes.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--budget '", flags.budget, "' is not a size like 2G or 512M"));
    }
    options.weights.layer_budget_bytes = *bytes;
  }
  return Model::Open(flags.dir, options);
}

// The prompt's tokens: plain text, or one chat turn through the template.
absl::StatusOr<std::vector<int32_t>> PromptTokens(const RunFlags& flags, const Model& model,
                                                  const Tokenizer& tokenizer) {
  if (!flags.chat) return tokenizer.Encode(flags.prompt, /*add_special=*/true, /*parse_special=*/false);
  // The template the user named, else the family of the model's own.
  const GgufValue* jinja = model.manifest().FindTokenizerKey("tokenizer.chat_template");
  OCTO_ASSIGN_OR_RETURN(const ChatTemplate chat_template,
                        !flags.chat_template.empty()
                            ? ChatTemplate::FromName(flags.chat_template)
                            : ChatTemplate::Detect(jinja != nullptr ? jinja->string_value : std::string()));
  std::vector<ChatMessage> messages;
  if (!flags.system.empty()) messages.push_back({"system", flags.system});
  messages.push_back({"user", flags.prompt});
  OCTO_ASSIGN_OR_RETURN(std::string text, chat_template.Apply(messages, /*add_generation_prompt=*/true));
  return tokenizer.Encode(text, /*add_special=*/!chat_template.renders_bos(), /*parse_special=*/true);
}

}  // namespace

int RunLocalGenerate(RunFlags flags, const std::atomic<bool>& cancel) {
  if (flags.seed.has_value()) flags.sampling.seed = flags.seed;
  if (absl::Status valid = ValidateSamplingParams(flags.sampling); !valid.ok()) return Fail(valid);
  auto model = OpenModel(flags.model);
  if (!model.ok()) return Fail(model.status());
  auto tokenizer = Tokenizer::FromMetadata((*model)->manifest().tokenizer);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  auto prompt = PromptTokens(flags, **model, *tokenizer);
  if (!prompt.ok()) return Fail(prompt.status());
  auto generation = Generation::Create(*tokenizer, flags.sampling, *prompt,
                                       static_cast<int>((*model)->config().context_length));
  if (!generation.ok()) return Fail(generation.status());

  nlohmann::json tokens = nlohmann::json::array();
  std::string text;
  auto stats = Generate(**model, *generation, [&](const GeneratedToken& t) {
    text += t.text;
    if (flags.json) {
      nlohmann::json entry = {{"id", t.id}, {"text", t.text}, {"logprob", t.logprob}};
      for (const TokenLogprob& alt : t.top) entry["top_logprobs"].push_back({alt.id, alt.logprob});
      tokens.push_back(std::move(entry));
    } else if (flags.raw_tokens) {
      std::printf("%d ", t.id);
    } else {
      std::fputs(t.text.c_str(), stdout);
    }
    std::fflush(stdout);
    return !cancel.load();
  });
  if (!stats.ok()) return Fail(stats.status());
  const std::string tail = generation->TakeTail();
  text += tail;
  const char* finish = cancel.load() ? "cancelled" : FinishReasonName(generation->finish_reason());
  if (flags.json) {
    nlohmann::json out = {{"prompt_tokens", *prompt}, {"tokens", tokens}, {"text", text},
                          {"finish_reason", finish}, {"seed", generation->seed()},
                          {"prefill_seconds", stats->prefill_seconds}, {"decode_seconds", stats->decode_seconds}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s\n", flags.raw_tokens ? "" : tail.c_str());
  }
  if (flags.stats) {
    const double decode_rate = stats->decode_seconds > 0 ? (stats->generated_tokens - 1) / stats->decode_seconds : 0;
    std::fprintf(stderr,
                 "prompt %d tokens in %.3f s (%.1f tokens/s); generated %d tokens, %.1f tokens/s; finish: %s; "
                 "%d threads, %s kernels\n",
                 stats->prompt_tokens, stats->prefill_seconds,
                 stats->prefill_seconds > 0 ? stats->prompt_tokens / stats->prefill_seconds : 0,
                 stats->generated_tokens, decode_rate, finish, (*model)->exec().pool->size(),
                 cpu::SimdName((*model)->exec().simd));
  }
  return 0;
}

int RunPerplexity(const PerplexityFlags& flags) {
  std::ifstream in(flags.text_file, std::ios::binary);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat("cannot read ", flags.text_file)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto model = OpenModel(flags.model);
  if (!model.ok()) return Fail(model.status());
  auto tokenizer = Tokenizer::FromMetadata((*model)->manifest().tokenizer);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  const std::vector<int32_t> tokens = tokenizer->Encode(buffer.str(), /*add_special=*/false, /*parse_special=*/false);
  const int32_t bos = tokenizer->add_bos() ? tokenizer->bos() : -1;
  auto result = Perplexity(**model, tokens, flags.n_ctx, bos, [&](int done, int total, double ppl) {
    std::fprintf(stderr, "[%d/%d] perplexity %.4f\n", done, total, ppl);
  });
  if (!result.ok()) return Fail(result.status());
  std::printf("perplexity %.4f over %d tokens (%zu tokens, n_ctx %d)\n", result->perplexity, result->scored_tokens,
              tokens.size(), flags.n_ctx);
  return 0;
}

}  // namespace octo
