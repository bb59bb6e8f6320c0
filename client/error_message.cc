#include "client/error_message.h"

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"

namespace octo {
namespace {

// What a person can do about an error of this code, whatever the call.
const char* HintFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated:
      return "give octod's token with --token-file FILE or OCTO_TOKEN_FILE";
    case absl::StatusCode::kDeadlineExceeded:
      return "octod did not answer in time; `octo-ctl status` shows what it is doing";
    default:
      return nullptr;
  }
}

// The code in words, for a status that came without a message.
std::string CodeInWords(absl::StatusCode code) {
  std::string words = absl::StatusCodeToString(code);
  for (char& c : words) c = c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return words;
}

}  // namespace

std::string ErrorMessage(const absl::Status& status) {
  std::string text = status.message().empty() ? CodeInWords(status.code()) : std::string(status.message());
  if (const char* hint = HintFor(status.code())) absl::StrAppend(&text, "; ", hint);
  return text;
}

}  // namespace octo
