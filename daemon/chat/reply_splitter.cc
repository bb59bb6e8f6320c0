#include "daemon/chat/reply_splitter.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/grammar/think_first.h"

namespace octo {
namespace {

// The length of the longest suffix of `text` that begins `tag` (shorter
// than the tag: a whole tag is found, not held).
size_t PartialTag(absl::string_view text, absl::string_view tag) {
  for (size_t keep = std::min(text.size(), tag.size() - 1); keep > 0; --keep) {
    if (absl::StartsWith(tag, text.substr(text.size() - keep))) return keep;
  }
  return 0;
}

}  // namespace

ReplySplitter::ReplySplitter(bool thinks, std::optional<ToolFormat> tools)
    : tools_(tools), phase_(thinks ? Phase::kStart : Phase::kContent) {}

ReplySplitter::Delta ReplySplitter::Add(absl::string_view text) {
  Delta delta;
  if (phase_ == Phase::kContent) {
    if (skip_blanks_) {
      const size_t first = text.find_first_not_of(" \t\r\n");
      if (first == absl::string_view::npos) return delta;
      text.remove_prefix(first);
      skip_blanks_ = false;
    }
    absl::StrAppend(&content_, text);
    delta.content = TakeContent(/*final=*/false);
    return delta;
  }
  absl::StrAppend(&pending_, text);
  if (phase_ == Phase::kStart) {
    const size_t first = pending_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return delta;  // blanks: a thought may still open
    const absl::string_view rest = absl::string_view(pending_).substr(first);
    if (absl::StartsWith(rest, kThinkOpen)) {
      pending_ = std::string(rest.substr(kThinkOpen.size()));
      phase_ = Phase::kThought;
    } else if (absl::StartsWith(kThinkOpen, rest)) {
      return delta;  // "<thi...": not known yet
    } else {
      phase_ = Phase::kContent;
      std::string held = std::move(pending_);
      pending_.clear();
      return Add(held);
    }
  }
  // kThought: up to "</think>"; a suffix that may begin it waits.
  if (const size_t close = pending_.find(std::string(kThinkClose)); close != std::string::npos) {
    delta.reasoning = pending_.substr(0, close);
    const std::string after = pending_.substr(close + kThinkClose.size());
    pending_.clear();
    phase_ = Phase::kContent;
    skip_blanks_ = true;
    delta.content = Add(after).content;
    return delta;
  }
  const size_t keep = PartialTag(pending_, kThinkClose);
  delta.reasoning = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return delta;
}

std::string ReplySplitter::TakeContent(bool final) {
  const size_t hold = final || !tools_.has_value() ? content_.size() : ToolCallHold(*tools_, content_);
  if (hold <= sent_) return std::string();
  std::string out = content_.substr(sent_, hold - sent_);
  sent_ = hold;
  return out;
}

ReplySplitter::Final ReplySplitter::Finish() {
  Final final;
  if (phase_ != Phase::kContent) {
    // A thought never closed is all thought; blanks alone are no reply.
    if (phase_ == Phase::kThought) final.rest.reasoning = std::move(pending_);
    pending_.clear();
    phase_ = Phase::kContent;
    return final;
  }
  if (!tools_.has_value()) {
    final.rest.content = TakeContent(/*final=*/true);
    return final;
  }
  ParsedReply parsed = ParseToolCalls(*tools_, content_);
  final.calls = std::move(parsed.calls);
  // What was sent is where the content starts (it came before any call).
  const size_t sent = std::min(sent_, parsed.content.size());
  final.rest.content = parsed.content.substr(sent);
  sent_ = content_.size();
  return final;
}

ReplySplitter::Whole ReplySplitter::Split(bool thinks, std::optional<ToolFormat> tools, absl::string_view text) {
  ReplySplitter splitter(thinks, tools);
  Delta first = splitter.Add(text);
  Final last = splitter.Finish();
  return {first.reasoning + last.rest.reasoning, first.content + last.rest.content, std::move(last.calls)};
}

}  // namespace octo
