// octo-gen's work, as a library so tests can drive it in-process.
//
//   octo-gen [flags] "prompt"     Generate: the text streams to stdout
//   octo-gen --chat "message"     one chat turn (with --system), reply to stdout
//   octo-gen --chat               a conversation: one user message per stdin
//                                 line, each reply streamed; "/exit" or end of
//                                 input ends it. Works on a pipe as on a terminal.
//   --session NAME uses the caller's session of that name (opened on first
//   use, kept after the run: its KV cache keeps the earlier turns; octod
//   closes it after --session-idle-timeout or `octo-ctl sessions close NAME`);
//   an id octod made (s + 32 hex digits) works too. --chat without it opens
//   a session for the conversation and closes it at the end.
//
// --json prints JSON Lines instead of text, one object per event:
//   {"event":"started","session_id":"...","prompt_tokens":12}
//   {"event":"token","id":791,"text":" The","logprob":-0.1,"top":[{"id":791,"logprob":-0.1},...]}
//                                 (logprob and top only with --logprobs N)
//   {"event":"done","finish_reason":"stop","tail":"","text":"<the whole reply>","stats":{...}}
// so a consumer can stream tokens or read only the last line.
//
//   octo-gen --embed "text"       the text's embedding: one JSON array per
//                                 line; "-" embeds each non-empty stdin line
//                                 (one request, one line out per input).
//   --dimensions N keeps the first N values, --raw skips the unit-length
//   normalisation; --json prints {"index","tokens","embedding"} per input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <string>

#include "client/rpc_client.h"
#include "client/sampling_flags.h"

namespace octo {

struct GenFlags {
  ConnectOptions connect;
  std::string prompt;             // "-": read it from stdin
  bool chat = false;
  std::string system;             // system message (with --chat)
  std::string chat_template;      // a template family instead of the model's
  std::string session;            // continue this session
  std::string model;              // run on this model, loaded beside the others when it is not
  std::string grammar_file;       // --grammar: hold the output to the GBNF grammar in this file
  std::string json_schema_file;   // --json-schema: ... to the JSON Schema in this file
  std::string grammar;            // its text (RunGen reads it)
  uint32_t context = 0;           // positions for a new --chat session (0: octod's default)
  bool json = false;
  bool stats = false;             // timings to stderr
  bool interactive = false;       // a terminal: prompt "> " before each conversation line
  SamplingFlags sampling;
  std::string draft_model;        // speculative decoding: this draft ("none": off); empty: octod's
  int32_t draft_max = 0;          // the longest draft; 0: octod's
  bool embed = false;             // embeddings, not text (embed_command.h)
  uint32_t dimensions = 0;        // --embed: the first N values (0: all)
  bool raw = false;               // --embed: not normalised
};

// Checks flag combinations before connecting: INVALID_ARGUMENT naming the
// flag (no prompt without --chat, --system without --chat, ...).
absl::Status CheckGenFlags(const GenFlags& flags);

// Runs octo-gen over `client`, reading conversation lines from `in`, text
// or JSON to `out`, errors and --stats to `err`. Returns the exit code:
// 0 done, 1 an error (printed), 130 cancelled (client.Cancel()).
int RunGen(const GenFlags& flags, OctoClient& client, std::istream& in, std::FILE* out, std::FILE* err);

// The sampling flags the user gave, and only those, as a request's
// SamplingParams (unset fields take octod's defaults).
void SamplingToProto(const SamplingFlags& flags, v1::SamplingParams* proto);

}  // namespace octo
