// A session: one conversation's KV cache, kept between turns, and the
// tokens (and, for chats, the messages) it stands for. The scheduler owns
// the table of sessions; a job borrows one (busy) while it runs.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon/chat/chat_template.h"
#include "daemon/engine/kv_cache.h"

namespace octo {

struct Session {
  std::string id;
  std::unique_ptr<KvCache> kv;         // holds tokens[0, kv->size())
  std::vector<int32_t> tokens;         // the conversation so far, as fed or drawn
  std::vector<ChatMessage> messages;   // a chat session's turns
  bool busy = false;                   // a job is running in it
  bool temporary = false;              // a one-shot job's; removed when the job ends
  std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();
};

}  // namespace octo
