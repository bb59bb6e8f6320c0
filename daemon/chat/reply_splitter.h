// A chat reply split, as it streams, into what the API reports apart: a
// reasoning model's thought (<think>...</think>: OpenAI's
// reasoning_content, Ollama's message.thinking), the content, and the tool
// calls the model made (tool_calls.h).
//
// Text that may still turn into a tag or a call is held back until it is
// known, so streamed deltas joined are what Finish() reports for the whole
// reply: streamed and whole replies agree.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/chat/tool_calls.h"

namespace octo {

class ReplySplitter {
 public:
  // thinks: the model may open its reply with a thought. tools: the
  // format of the calls to parse out; none: no tools were offered.
  ReplySplitter(bool thinks, std::optional<ToolFormat> tools);

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  // The next piece of the reply; what of it can be reported now.
  Delta Add(absl::string_view text);

  struct Final {
    Delta rest;                   // what was held back, now known
    std::vector<ToolCall> calls;  // ids empty: the caller gives them
  };
  // The reply ended: what was held, and the calls.
  Final Finish();

  // A whole reply at once: Add(text) then Finish(), joined.
  struct Whole {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
  };
  static Whole Split(bool thinks, std::optional<ToolFormat> tools, absl::string_view text);

 private:
  enum class Phase { kStart, kThought, kContent };
  std::string TakeContent(bool final);

  std::optional<ToolFormat> tools_;
  Phase phase_;
  std::string pending_;      // kStart/kThought: text not yet reported
  bool skip_blanks_ = false;  // content after a thought starts at its first non-blank
  std::string content_;      // all content so far
  size_t sent_ = 0;          // content_'s bytes reported
};

}  // namespace octo
