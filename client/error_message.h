// What the clients print for a failed call or command: words for people.
// Never a status code name ("NOT_FOUND: ..."): octod's messages say what
// went wrong and, where there is one, the fix; for the few codes whose
// messages cannot know the fix (a missing or wrong token, a call that timed
// out), a hint says what to do.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace octo {

// `status`'s message, with the hint for its code where there is one; for
// an empty message, what the code means in words ("cancelled").
std::string ErrorMessage(const absl::Status& status);

}  // namespace octo
