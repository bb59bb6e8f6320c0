#include "daemon/engine/generation.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/engine/context_limit.h"
#include "storage/status_macros.h"

namespace octo {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
    case FinishReason::kNone: break;
  }
  return "none";
}

Generation::Generation(const Tokenizer& tokenizer, Sampler sampler, const SamplingParams& params,
                       std::vector<int32_t> prompt, int max_positions)
    : tokenizer_(tokenizer),
      sampler_(std::move(sampler)),
      params_(params),
      detokenizer_(tokenizer),
      stop_(params.stop),
      history_(std::move(prompt)),
      prompt_size_(static_cast<int>(history_.size())),
      max_positions_(max_positions) {
  if (params_.max_tokens == 0) finish_ = FinishReason::kLength;
}

absl::StatusOr<Generation> Generation::Create(const Tokenizer& tokenizer, const SamplingParams& params,
                                              std::vector<int32_t> prompt, int max_positions) {
  OCTO_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(params));
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  for (int32_t id : prompt) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", id, " is outside the vocabulary (",
                                                     tokenizer.vocab_size(), " tokens)"));
    }
  }
  if (static_cast<int64_t>(prompt.size()) > max_positions) {
    return ContextExceededError(static_cast<int64_t>(prompt.size()), max_positions);
  }
  return Generation(tokenizer, std::move(sampler), params, std::move(prompt), max_positions);
}

std::span<const int32_t> Generation::NextInput() const {
  if (finished()) return {};
  return std::span<const int32_t>(history_).subspan(fed_);
}

std::span<const int32_t> Generation::NextInput(size_t max_tokens) const {
  const std::span<const int32_t> input = NextInput();
  return input.first(std::min(max_tokens, input.size()));
}

absl::StatusOr<std::optional<GeneratedToken>> Generation::Accept(std::span<const float> logits) {
  if (finished()) return absl::FailedPreconditionError("the generation has finished");
  std::span<const float> drawn_from = logits;
  OCTO_ASSIGN_OR_RETURN(const int32_t id, Draw(logits, &drawn_from));
  return Take(id, drawn_from);
}

absl::StatusOr<std::optional<GeneratedToken>> Generation::Accept(const LogitCandidates& row) {
  if (finished()) return absl::FailedPreconditionError("the generation has finished");
  if (!TakesCandidates()) {
    return absl::FailedPreconditionError("this generation's constraint or sampling settings need the whole logits row");
  }
  OCTO_ASSIGN_OR_RETURN(const int32_t id, sampler_.Sample(row));
  return TakeFrom(id, row);
}

absl::StatusOr<int32_t> Generation::Draw(std::span<const float> logits, std::span<const float>* drawn_from) {
  OCTO_ASSIGN_OR_RETURN(const int32_t id, sampler_.Sample(logits, history_));
  if (!grammar_.has_value()) return id;
  // The fast path: the grammar takes the token drawn.
  if (params_.top_logprobs == 0 && GrammarTakes(id)) return id;
  // Else the draw again, from what the grammar allows.
  OCTO_RETURN_IF_ERROR(MaskLogits(logits));
  OCTO_ASSIGN_OR_RETURN(const int32_t allowed, sampler_.Sample(masked_, history_));
  if (!GrammarTakes(allowed)) return absl::InternalError("the sampler drew a token the grammar refuses");
  *drawn_from = masked_;
  return allowed;
}

absl::Status Generation::MaskLogits(std::span<const float> logits) {
  grammar_->FillMask(grammar_vocab_->trie, mask_, &grammar_vocab_->masks);
  const bool can_end = grammar_->CanEnd();
  for (const int32_t end : grammar_vocab_->ends) {
    if (end >= 0 && static_cast<size_t>(end) < mask_.size()) mask_[end] = can_end ? 1 : 0;
  }
  masked_.assign(logits.begin(), logits.end());
  bool any = false;
  for (size_t i = 0; i < masked_.size(); ++i) {
    if (i < mask_.size() && mask_[i] != 0) {
      any = true;
    } else {
      masked_[i] = -std::numeric_limits<float>::infinity();
    }
  }
  if (!any) {
    return absl::FailedPreconditionError(
        "the output constraint cannot go on: no token of the model's vocabulary continues its grammar here");
  }
  return absl::OkStatus();
}

bool Generation::GrammarTakes(int32_t id) {
  if (tokenizer_.IsEndOfGeneration(id)) return grammar_->CanEnd();
  if (id < 0 || static_cast<size_t>(id) >= grammar_vocab_->bytes.size()) return false;
  const std::string& bytes = grammar_vocab_->bytes[id];
  return !bytes.empty() && grammar_->Accept(bytes);
}

void Generation::Constrain(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab) {
  grammar_.emplace(std::move(grammar));
  grammar_vocab_ = std::move(vocab);
}

std::shared_ptr<const GrammarVocab> NewGrammarVocab(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) {
      ends.push_back(id);
      continue;
    }
    bytes[id] = tokenizer.Piece(id, /*render_special=*/false);
  }
  return std::make_shared<const GrammarVocab>(std::move(bytes), std::move(ends));
}

absl::StatusOr<std::optional<GeneratedToken>> Generation::Take(int32_t id, std::span<const float> logits) {
  return TakeFrom(id, logits);
}

template <typename Row>
absl::StatusOr<std::optional<GeneratedToken>> Generation::TakeFrom(int32_t id, const Row& logits) {
  if (tokenizer_.IsEndOfGeneration(id)) {
    finish_ = FinishReason::kStop;
    return std::nullopt;
  }
  GeneratedToken token;
  token.id = id;
  OCTO_ASSIGN_OR_RETURN(token.logprob, Logprob(logits, id));
  if (params_.top_logprobs > 0) {
    OCTO_ASSIGN_OR_RETURN(token.top, TopLogprobs(logits, params_.top_logprobs));
    for (TokenLogprob& alternative : token.top) alternative.text = tokenizer_.Piece(alternative.id, /*render_special=*/true);
  }
  history_.push_back(id);
  StopMatcher::Output out = stop_.Feed(detokenizer_.Push(id));
  token.text = std::move(out.text);
  if (out.stopped) {
    finish_ = FinishReason::kStop;
  } else if (params_.max_tokens >= 0 && generated_tokens() >= params_.max_tokens) {
    finish_ = FinishReason::kLength;
  } else if (static_cast<int>(history_.size()) >= max_positions_) {
    // The token just drawn would need one more position to be fed.
    finish_ = FinishReason::kContext;
  }
  return token;
}

std::string Generation::TakeTail() {
  if (stop_.stopped()) return "";
  StopMatcher::Output out = stop_.Feed(detokenizer_.Flush());
  return out.text + stop_.Flush();
}

absl::StatusOr<GenerateStats> Generate(Model& model, Generation& generation,
                                       const std::function<bool(const GeneratedToken&)>& on_token) {
  using Clock = std::chrono::steady_clock;
  GenerateStats stats;
  stats.prompt_tokens = generation.prompt_tokens();
  std::unique_ptr<KvCache> kv = model.NewCache(generation.max_positions());
  std::vector<float> logits;
  while (!generation.finished()) {
    const auto start = Clock::now();
    const std::span<const int32_t> input = generation.NextInput();
    const bool prefill = input.size() > 1 || stats.generated_tokens == 0;
    const SequenceStep step{.kv = kv.get(), .tokens = input};
    OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
    generation.InputFed();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    (prefill ? stats.prefill_seconds : stats.decode_seconds) += seconds;
    OCTO_ASSIGN_OR_RETURN(std::optional<GeneratedToken> token, generation.Accept(logits));
    if (!token.has_value()) break;
    ++stats.generated_tokens;
    if (!on_token(*token)) break;
  }
  return stats;
}

}  // namespace octo
