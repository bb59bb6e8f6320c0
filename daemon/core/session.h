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

class DraftModel;
class LoadedModel;

struct Session {
  std::string id;                      // a random id, or the name its owner gave it
  std::shared_ptr<LoadedModel> model;  // the model its cache belongs to (held loaded while the session is)
  bool named = false;
  std::string owner;                   // the credential that created it (credentials.h); only it may use it
  std::unique_ptr<KvCache> kv;         // holds tokens[0, kv->size())
  // Speculative decoding: the draft model this session's last job drafted
  // with, and its cache, holding tokens[0, draft_kv->size()).
  std::shared_ptr<DraftModel> draft;
  std::unique_ptr<KvCache> draft_kv;
  std::vector<int32_t> tokens;         // the conversation so far, as fed or drawn
  std::vector<ChatMessage> messages;   // a chat session's turns
  bool busy = false;                   // a job is running in it
  bool temporary = false;              // a one-shot job's; removed when the job ends
  bool embedding = false;              // an embedding input's (temporary too), not counted in max_sessions
  std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();

  // Both caches' memory (the KV budget counts it).
  uint64_t kv_bytes() const { return (kv ? kv->bytes() : 0) + (draft_kv ? draft_kv->bytes() : 0); }
};

}  // namespace octo
