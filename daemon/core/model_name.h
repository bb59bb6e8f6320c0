// A model's one name, as every client may write it: octod, octo-ctl, octo-gen
// and the HTTP APIs compare models by this form.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace octo {

// The path relative to the models root with no "./", repeated or trailing
// slash, nor Ollama's default tag ":latest" ("./team//llama:latest" ->
// "team/llama"). Other tags stay in the name.
std::string CanonicalModelName(absl::string_view name);

}  // namespace octo
