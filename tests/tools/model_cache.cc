#include "tests/tools/model_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace octo::testing {

namespace fs = std::filesystem;

absl::Status CachedOrMade(const std::string& key, const std::string& dest,
                         const std::function<absl::Status(const std::string& path)>& make) {
  const char* root = std::getenv("OCTO_TEST_MODEL_CACHE");
  if (root == nullptr || root[0] == '\0') return make(dest);
  std::error_code ec;
  fs::create_directories(root, ec);
  const fs::path cached = fs::path(root) / key;
  if (!fs::exists(cached, ec)) {
    const fs::path fresh = fs::path(root) / absl::StrCat(key, ".tmp-", ::getpid());
    fs::remove_all(fresh, ec);
    if (absl::Status made = make(fresh.string()); !made.ok()) {
      fs::remove_all(fresh, ec);
      return made;
    }
    fs::rename(fresh, cached, ec);  // another process may have won: its copy is the same
    if (ec) fs::remove_all(fresh, ec);
  }
  fs::copy(cached, dest, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(absl::StrCat("copying ", cached.string(), " to ", dest, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace octo::testing
