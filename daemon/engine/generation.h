// Generation: one sequence's way from prompt to text -- what it feeds the
// model next, and what it does with each step's logits (sample, detect the
// end, turn tokens into streamed text, log-probabilities, stop strings).
//
// It does not run the model: whoever batches sequences (Generate below for
// one sequence, the daemon's scheduler for many) calls NextInput() to build
// the step, runs the pass, and hands the sequence's logits row to Accept().
//
// Ends ("finish reasons", as OpenAI names them):
//   kStop    an end-of-generation token (not emitted as text) or a stop string
//            (cut from the text);
//   kLength  max_tokens generated;
//   kContext the sequence's context (KvCache max_positions) is full.
//
// Not thread-safe: one owner at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/draft_tree.h"
#include "daemon/grammar/grammar_matcher.h"
#include "daemon/grammar/grammar_vocab.h"
#include "daemon/engine/model.h"
#include "daemon/sampling/logit_candidates.h"
#include "daemon/sampling/logprobs.h"
#include "daemon/sampling/sampler.h"
#include "daemon/sampling/stop_matcher.h"
#include "daemon/tokenizer/streaming_detokenizer.h"
#include "daemon/tokenizer/tokenizer.h"

namespace octo {

enum class FinishReason { kNone, kStop, kLength, kContext };
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "context"

struct GeneratedToken {
  int32_t id = 0;
  std::string text;                  // text this token completes (may be empty)
  double logprob = 0;                // of id, raw logits (logprobs.h)
  std::vector<TokenLogprob> top;     // params.top_logprobs alternatives
};

class Generation {
 public:
  // prompt: the prompt's tokens (BOS included as the caller wants it); at
  // least one. INVALID_ARGUMENT for bad params or an empty prompt;
  // RESOURCE_EXHAUSTED when the prompt does not fit max_positions.
  static absl::StatusOr<Generation> Create(const Tokenizer& tokenizer, const SamplingParams& params,
                                           std::vector<int32_t> prompt, int max_positions);

  // The tokens the next pass must feed: the whole prompt first, then the
  // last accepted token. Empty once finished.
  std::span<const int32_t> NextInput() const;
  // The first max_tokens of NextInput() (a chunk of a long prompt).
  std::span<const int32_t> NextInput(size_t max_tokens) const;
  // Marks NextInput() as fed; call after a successful pass.
  void InputFed() { fed_ = history_.size(); }
  // Marks the first n tokens of NextInput() as fed: a prompt chunk, or a
  // prefix already in the cache (a session's earlier turns).
  void InputFed(size_t n) { fed_ = std::min(fed_ + n, history_.size()); }
  // Tokens of history() in the KV cache.
  size_t fed() const { return fed_; }
  // The next pass's logits decide a token: NextInput() is the rest of the input.
  bool AwaitsLogits(size_t chunk) const { return !finished() && fed_ + chunk >= history_.size(); }

  // Takes the logits that followed NextInput() (the row of its last token),
  // draws the next token and advances. Returns the token, or nullopt when
  // the draw ended the generation with nothing to emit (end token).
  // Constrained: FAILED_PRECONDITION when no token of the vocabulary can
  // continue the grammar.
  absl::StatusOr<std::optional<GeneratedToken>> Accept(std::span<const float> logits);
  // Whether the next Accept may take the row's candidates instead
  // (daemon/sampling/logit_candidates.h): no grammar, and sampling
  // settings the candidates decide (CandidatesDecide).
  bool TakesCandidates() const { return !grammar_.has_value() && CandidatesDecide(params_); }
  // Accept from the row's candidates: the token, text and logprobs Accept
  // gives on the whole row (logit_candidates.h says how exactly).
  // FAILED_PRECONDITION when !TakesCandidates().
  absl::StatusOr<std::optional<GeneratedToken>> Accept(const LogitCandidates& row);

  // Holds the output to `grammar` (before the first Accept): each token
  // drawn is one the grammar allows, and an end token comes only where the
  // text is a whole match. The sampled token is checked first; only when the
  // grammar refuses it are the logits masked to what it allows and the
  // token drawn again -- and always when top_logprobs asks, so reported
  // log-probabilities are those of the constrained distribution then.
  // Speculation too: a draft proposes from masked logits (a token the
  // grammar refuses is never proposed) and verification draws as Accept.
  void Constrain(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab);
  bool constrained() const { return grammar_.has_value(); }

  // Speculative decoding (generation_draft.cc; daemon/sampling/speculative.h).
  // A draft model's proposal for the token after history() and `proposed`
  // (drafted, not yet accepted): its draw from the distribution this
  // generation's sampler would use on the draft's logits, and that
  // distribution (q). Greedy: the argmax, drawing no random number.
  struct Proposal {
    int32_t token = 0;
    std::vector<TokenProb> q;
  };
  absl::StatusOr<Proposal> Propose(std::span<const float> draft_logits, std::span<const int32_t> proposed);
  // Verifies a draft that follows history()'s last token (the root) against
  // the target's logits: logits(-1) is the row after the root, logits(i) the
  // row after node i. Greedy walks the tree: a child is kept while its token
  // is the one Accept would draw, and Accept's token ends the walk. Sampling
  // needs a linear draft with q[i] the distribution node i was drawn from,
  // and keeps the target's distribution exactly (VerifyDraft). Every token
  // decided goes through the same checks as Accept's (end token, stop
  // strings, max_tokens, context) and the walk stops where they end the
  // generation. INVALID_ARGUMENT for a tree or missing q when sampling.
  struct Verdict {
    std::vector<GeneratedToken> tokens;  // emitted, in order
    std::vector<int> kept;               // draft nodes now in history(), root to leaf
  };
  absl::StatusOr<Verdict> AcceptDraft(const DraftTree& draft, std::span<const std::vector<TokenProb>> q,
                                      const std::function<std::span<const float>(int node)>& logits);
  bool greedy() const { return params_.temperature == 0; }

  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  // Text held back at the end (an unfinished stop-string prefix or UTF-8
  // tail), to append once finished. Empty after a stop string.
  std::string TakeTail();

  int prompt_tokens() const { return prompt_size_; }
  int generated_tokens() const { return static_cast<int>(history_.size()) - prompt_size_; }
  const std::vector<int32_t>& history() const { return history_; }
  uint64_t seed() const { return sampler_.seed(); }
  int max_positions() const { return max_positions_; }
  // Tokens max_tokens still allows (INT_MAX without a limit).
  int tokens_left() const {
    return params_.max_tokens < 0 ? std::numeric_limits<int>::max() : params_.max_tokens - generated_tokens();
  }

 private:
  Generation(const Tokenizer& tokenizer, Sampler sampler, const SamplingParams& params,
             std::vector<int32_t> prompt, int max_positions);
  // Appends a decided token `id` (drawn from `logits`) and runs the checks
  // that may end the generation; nullopt for an end token (not appended).
  absl::StatusOr<std::optional<GeneratedToken>> Take(int32_t id, std::span<const float> logits);
  // Take's work, the logprobs from `row`: a whole row or its candidates.
  template <typename Row>
  absl::StatusOr<std::optional<GeneratedToken>> TakeFrom(int32_t id, const Row& row);

  // Constrained: the token `id` continues the grammar (advancing it), or is
  // an end token where the grammar may end.
  bool GrammarTakes(int32_t id);
  // Draws the next token from `logits` (Accept's draw: the grammar checks
  // it, masks and draws again when it refuses, and advances);
  // *drawn_from: the logits it came from (masked_ when masked).
  absl::StatusOr<int32_t> Draw(std::span<const float> logits, std::span<const float>* drawn_from);
  // masked_ = `logits` with every token the grammar refuses here at -inf;
  // FAILED_PRECONDITION when none is left.
  absl::Status MaskLogits(std::span<const float> logits);
  // Advances the grammar over drafted `tokens` (each one it must take), up
  // to an end token (*ended, when set, says so); the count advanced, to
  // roll back. FAILED_PRECONDITION, with nothing advanced, for one it refuses.
  absl::StatusOr<int> AdvanceGrammar(std::span<const int32_t> tokens, bool* ended);

  Tokenizer tokenizer_;
  Sampler sampler_;
  std::optional<GrammarMatcher> grammar_;
  std::shared_ptr<const GrammarVocab> grammar_vocab_;
  std::vector<uint8_t> mask_;     // scratch: the tokens the grammar allows
  std::vector<float> masked_;     // scratch: the logits of the others at -inf
  SamplingParams params_;
  StreamingDetokenizer detokenizer_;
  StopMatcher stop_;
  std::vector<int32_t> history_;  // prompt, then generated tokens
  size_t fed_ = 0;                // history_[0, fed_) is in the KV cache
  int prompt_size_ = 0;
  int max_positions_ = 0;
  FinishReason finish_ = FinishReason::kNone;
};

// The vocabulary a grammar constrains (grammar_vocab.h): each token's
// bytes (Tokenizer::Piece, control tokens empty) and the end tokens.
std::shared_ptr<const GrammarVocab> NewGrammarVocab(const Tokenizer& tokenizer);

struct GenerateStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Runs one generation to its end on `model`, alone, in a fresh cache of
// generation.max_positions(). on_token gets every emitted token (text pieces
// in order); returning false stops early, leaving finish_reason() kNone.
// The caller appends generation.TakeTail() to the text at the end.
absl::StatusOr<GenerateStats> Generate(Model& model, Generation& generation,
                                       const std::function<bool(const GeneratedToken&)>& on_token);

}  // namespace octo
