#include "client/embed_command.h"

#include <string>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace octo {

absl::Status RunEmbed(const GenFlags& flags, OctoClient& client, std::istream& in, std::FILE* out) {
  v1::EmbedRequest request;
  request.set_model(flags.model);
  request.set_dimensions(flags.dimensions);
  request.set_raw(flags.raw);
  if (flags.prompt == "-") {
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) request.add_inputs()->set_text(line);
    }
    if (request.inputs_size() == 0) return absl::InvalidArgumentError("stdin has no line to embed");
  } else {
    request.add_inputs()->set_text(flags.prompt);
  }
  absl::StatusOr<v1::EmbedResponse> response = client.Embed(request);
  if (!response.ok()) return response.status();
  for (int i = 0; i < response->embeddings_size(); ++i) {
    const v1::Embedding& e = response->embeddings(i);
    nlohmann::json values(std::vector<float>(e.values().begin(), e.values().end()));
    nlohmann::json line = flags.json ? nlohmann::json{{"index", i}, {"tokens", e.tokens()}, {"embedding", values}}
                                     : values;
    absl::FPrintF(out, "%s\n", line.dump());
  }
  return absl::OkStatus();
}

}  // namespace octo
