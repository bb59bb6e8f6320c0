#include "storage/bounded_json.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/utf8.h"

namespace octo {
namespace {

using json = nlohmann::json;

// What a parser message may hold beside the quoted token.
constexpr size_t kMaxReasonBytes = 160;

// `text` cut to at most `max_bytes` at a character boundary; `cut` says
// whether anything was left off.
absl::string_view CutUtf8(absl::string_view text, size_t max_bytes, bool* cut) {
  *cut = text.size() > max_bytes;
  if (!*cut) return text;
  return text.substr(0, Utf8CutBefore(text, max_bytes));
}

// Builds the value as nlohmann's own DOM parser does (a duplicate key keeps
// its last value), with a stack of open containers instead of recursion,
// and stops the parse at the first container past the depth limit or the
// first defect, recording why.
class BoundedBuilder final : public nlohmann::json_sax<json> {
 public:
  BoundedBuilder(absl::string_view what, int max_depth) : what_(what), max_depth_(max_depth) {}

  json& root() { return root_; }
  const std::string& error() const { return error_; }
  bool null() override { return Add(nullptr) != nullptr; }
  bool boolean(bool value) override { return Add(value) != nullptr; }
  bool number_integer(number_integer_t value) override { return Add(value) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return Add(value) != nullptr; }
  bool number_float(number_float_t value, const string_t&) override { return Add(value) != nullptr; }
  bool string(string_t& value) override { return Add(std::move(value)) != nullptr; }
  bool binary(binary_t& value) override { return Add(json::binary(std::move(value))) != nullptr; }
  bool key(string_t& value) override {
    key_ = std::move(value);
    return true;
  }
  bool start_object(size_t) override { return Open(json::object()); }
  bool start_array(size_t) override { return Open(json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool parse_error(size_t position, const std::string& last_token, const nlohmann::json::exception& e) override {
    absl::string_view reason = e.what();  // "[json.exception.parse_error.101] parse error at ...; last read: '...'"
    if (const size_t bracket = reason.find("] "); bracket != absl::string_view::npos) reason.remove_prefix(bracket + 2);
    bool token_quoted = false;
    if (const size_t last = reason.find("; last read:"); last != absl::string_view::npos) {
      reason = reason.substr(0, last);
      token_quoted = true;
    }
    bool cut = false;
    reason = CutUtf8(reason, kMaxReasonBytes, &cut);
    error_ = absl::StrCat(what_, " is not valid JSON: ", reason, cut ? "..." : "");
    if (token_quoted) absl::StrAppend(&error_, "; last read: ", QuotePrefix(last_token));
    if (e.id != 101 && e.id != 102 && e.id != 103) absl::StrAppend(&error_, " (at byte ", position, ")");
    return false;
  }

 private:
  // Puts `value` where the parse is (the root, the open array's end, or the
  // open object's current key) and returns it.
  json* Add(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(value);
    return &slot;
  }

  bool Open(json container) {
    if (static_cast<int>(open_.size()) >= max_depth_) {
      error_ = absl::StrCat(what_, " nests arrays and objects deeper than ", max_depth_, " levels");
      return false;
    }
    open_.push_back(Add(std::move(container)));
    return true;
  }

  bool Close() {
    open_.pop_back();
    return true;
  }

  const std::string what_;
  const int max_depth_;
  json root_;
  std::vector<json*> open_;  // the containers being filled, outermost first
  std::string key_;          // the key of the open object's next value
  std::string error_;
};

}  // namespace

absl::StatusOr<json> ParseBoundedJson(absl::string_view text, absl::string_view what, int max_depth) {
  BoundedBuilder builder(what, max_depth);
  // With a SAX handler the parser reports every defect (number overflow
  // included) to parse_error instead of throwing.
  if (!json::sax_parse(text.begin(), text.end(), &builder)) {
    return absl::InvalidArgumentError(builder.error().empty() ? absl::StrCat(what, " is not valid JSON")
                                                              : builder.error());
  }
  return std::move(builder.root());
}

std::string QuotePrefix(absl::string_view text, size_t max_bytes) {
  bool cut = false;
  const absl::string_view kept = CutUtf8(text, max_bytes, &cut);
  return absl::StrCat("'", ReplaceInvalidUtf8(kept), cut ? "'..." : "'");
}

std::string JsonPreview(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case json::value_t::string: return QuotePrefix(value.get_ref<const std::string&>());
    case json::value_t::array: return absl::StrCat("an array of ", value.size(), value.size() == 1 ? " item" : " items");
    case json::value_t::object: return absl::StrCat("an object of ", value.size(), value.size() == 1 ? " key" : " keys");
    case json::value_t::number_integer: return absl::StrCat(value.get<int64_t>());
    case json::value_t::number_unsigned: return absl::StrCat(value.get<uint64_t>());
    case json::value_t::number_float: return absl::StrCat(value.get<double>());
    default: return "a binary value";
  }
}

}  // namespace octo
