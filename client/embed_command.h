// octo-gen --embed: embedding vectors from octod's Embed call, printed one
// input per line (gen_command.h describes the flags).
#pragma once

#include <cstdio>
#include <istream>

#include "absl/status/status.h"
#include "client/gen_command.h"
#include "client/rpc_client.h"

namespace octo {

// Embeds flags.prompt, or each non-empty line of `in` when it is "-", in
// one request; prints a JSON array per input (an object with --json).
absl::Status RunEmbed(const GenFlags& flags, OctoClient& client, std::istream& in, std::FILE* out);

}  // namespace octo
