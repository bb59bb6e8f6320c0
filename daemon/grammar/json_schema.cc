#include "daemon/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/grammar/grammar.h"
#include "daemon/grammar/regex_grammar.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using json = nlohmann::ordered_json;

// Keywords that only describe.
const std::set<std::string>& Annotations() {
  static const std::set<std::string> keys = {"title",   "description", "default",  "examples",  "$schema",
                                              "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                              "$defs",   "definitions"};
  return keys;
}

// Keywords the converter honours.
const std::set<std::string>& Honoured() {
  static const std::set<std::string> keys = {
      "type",       "enum",      "const",         "anyOf",        "oneOf",       "allOf",           "$ref",
      "properties", "required",  "additionalProperties", "items", "prefixItems", "minItems",        "maxItems",
      "minLength",  "maxLength", "format",        "minimum",      "maximum",     "exclusiveMinimum", "exclusiveMaximum",
      "nullable",   "uniqueItems", "pattern"};
  return keys;
}

// Primitive rules, defined when first used.
const std::map<std::string, std::string>& Primitives() {
  static const std::map<std::string, std::string> rules = {
      {"ws", R"([ \t\n]{0,8})"},
      {"string", R"("\"" char* "\"")"},
      {"char", R"([^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex ))"},
      {"hex", R"([0-9a-fA-F])"},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))"},
      {"number", R"("-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"value", R"(any-object | any-array | string | number | boolean | null)"},
      {"any-object", R"("{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}")"},
      {"any-array", R"("[" ws ( value ( ws "," ws value )* )? ws "]")"},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
      {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? )"
               R"(( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})"},
  };
  return rules;
}

// What each primitive refers to, so using one defines those too.
const std::map<std::string, std::vector<std::string>>& PrimitiveUses() {
  static const std::map<std::string, std::vector<std::string>> uses = {
      {"string", {"char"}},
      {"char", {"hex"}},
      {"value", {"any-object", "any-array", "string", "number", "boolean", "null"}},
      {"any-object", {"ws", "string", "value"}},
      {"any-array", {"ws", "value"}},
      {"date-time", {"date", "time"}},
      {"uuid", {"hex"}},
  };
  return uses;
}

// `bytes` as a GBNF literal.
std::string Literal(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Decimal numbers of exactly `a.size()` digits, leading zeros allowed,
// from a to b (same length, a <= b).
std::string FixedWidth(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a.size() == 1) return a == b ? Literal(a) : absl::StrCat("[", a, "-", b, "]");
  const std::string rest_a = a.substr(1), rest_b = b.substr(1);
  if (a[0] == b[0]) return absl::StrCat(Literal(a.substr(0, 1)), " ", FixedWidth(rest_a, rest_b));
  const size_t n = rest_a.size();
  std::vector<std::string> alternatives;
  alternatives.push_back(absl::StrCat(Literal(a.substr(0, 1)), " ", FixedWidth(rest_a, std::string(n, '9'))));
  if (b[0] - a[0] > 1) {
    alternatives.push_back(absl::StrFormat("[%c-%c] [0-9]{%d}", a[0] + 1, b[0] - 1, n));
  }
  alternatives.push_back(absl::StrCat(Literal(b.substr(0, 1)), " ", FixedWidth(std::string(n, '0'), rest_b)));
  return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
}

// Decimal numbers without leading zeros from lo to hi (unset: up to 16
// digits, the integer rule's most).
std::string UnsignedRange(uint64_t lo, std::optional<uint64_t> hi) {
  const size_t low_digits = std::to_string(lo).size();
  const size_t high_digits = hi.has_value() ? std::to_string(*hi).size() : 16;
  std::vector<std::string> alternatives;
  uint64_t power = 1;  // 10^(d-1)
  for (size_t d = 1; d < low_digits; ++d) power *= 10;
  for (size_t d = low_digits; d <= high_digits; ++d, power *= 10) {
    if (!hi.has_value() && d > low_digits) {
      alternatives.push_back(absl::StrFormat("[1-9] [0-9]{%d,15}", d - 1));  // every longer number
      break;
    }
    const uint64_t from = d == low_digits ? lo : power;
    const uint64_t to = hi.has_value() && d == high_digits ? *hi : power * 10 - 1;
    alternatives.push_back(FixedWidth(std::to_string(from), std::to_string(to)));
  }
  return alternatives.size() == 1 ? alternatives[0] : absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  absl::StatusOr<std::string> Run() {
    OCTO_ASSIGN_OR_RETURN(const std::string body, Visit(root_, "#", 0));
    std::string text = absl::StrCat("root ::= ", body, "\n");
    if (uses_root_) rules_["root-ref"] = body;
    for (const auto& [name, rule] : rules_) absl::StrAppend(&text, name, " ::= ", rule, "\n");
    return text;
  }

 private:
  static absl::Status Error(const std::string& path, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  }

  std::string Use(const std::string& name) {
    if (rules_.contains(name)) return name;
    rules_[name] = Primitives().at(name);
    if (auto it = PrimitiveUses().find(name); it != PrimitiveUses().end()) {
      for (const std::string& used : it->second) Use(used);
    }
    return name;
  }

  std::string NewRule(const std::string& hint, const std::string& body) {
    const std::string name = absl::StrCat(hint, "-", ++generated_);
    rules_[name] = body;
    return name;
  }

  static absl::StatusOr<int> Count(const json& s, const char* key, const std::string& path, int fallback) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return Error(path, absl::StrCat(key, " must be a count"));
    if (v.get<int64_t>() > kMaxSchemaRepeat) {
      return Error(path, absl::StrCat(key, " is above ", kMaxSchemaRepeat, ", the most a constraint repeats"));
    }
    return static_cast<int>(v.get<int64_t>());
  }

  static std::string Repeat(const std::string& item, int min, int max) {  // max -1: no end
    if (max < 0) return absl::StrCat("( ", item, " ){", min, ",}");
    return absl::StrCat("( ", item, " ){", min, ",", max, "}");
  }

  absl::StatusOr<std::string> Alternatives(const json& list, const std::string& path, int depth) {
    if (!list.is_array() || list.empty()) return Error(path, "expected a non-empty array of schemas");
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < list.size(); ++i) {
      OCTO_ASSIGN_OR_RETURN(std::string alternative, Visit(list[i], absl::StrCat(path, "/", i), depth + 1));
      alternatives.push_back(std::move(alternative));
    }
    return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
  }

  absl::StatusOr<std::string> Ref(const json& ref, const std::string& path) {
    if (!ref.is_string()) return Error(path, "$ref must be a string");
    const std::string target = ref.get<std::string>();
    std::string section, name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (target.starts_with(prefix)) {
        section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = target.substr(std::string(prefix).size());
      }
    }
    if (target == "#") {  // the root itself
      uses_root_ = true;
      return std::string("root-ref");
    }
    if (name.empty() || !root_.contains(section) || !root_[section].is_object() || !root_[section].contains(name)) {
      return Error(path, absl::StrCat("$ref '", target.substr(0, 80),
                                      "' does not name a schema of this document's $defs or definitions"));
    }
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string rule;
    for (const char c : name) rule += absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '-';
    rule = absl::StrCat("def-", rule, "-", ++generated_);
    refs_[target] = rule;  // before the visit: a recursive schema refers to itself
    rules_[rule] = "";
    OCTO_ASSIGN_OR_RETURN(rules_[rule], Visit(root_[section][name], target, 1));
    return rule;
  }

  absl::StatusOr<std::string> Visit(const json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) return Error(path, absl::StrCat("schemas nest deeper than ", kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (s.get<bool>()) return Use("value");
      return Error(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Error(path, "a schema is an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (Honoured().contains(key) || Annotations().contains(key)) continue;
      return Error(path, absl::StrCat(key, " is not supported (octod cannot hold output to it)"));
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != false) return Error(path, "uniqueItems is not supported");
    OCTO_ASSIGN_OR_RETURN(std::string expression, VisitUnlessNull(s, path, depth));
    if (s.contains("nullable") && s["nullable"] == true) expression = absl::StrCat("( ", expression, " | ", Use("null"), " )");
    return expression;
  }

  // The keywords beside a combination (anyOf, oneOf, allOf, $ref, enum,
  // const) that would also constrain: refused, not dropped.
  absl::Status OnlyBeside(const json& s, const std::string& path, const char* combination) {
    for (const auto& [key, value] : s.items()) {
      if (key == combination || key == "nullable" || Annotations().contains(key)) continue;
      if (key == "type" && (std::string(combination) == "enum" || std::string(combination) == "const")) continue;
      return Error(path, absl::StrCat(key, " beside ", combination, " is not supported"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> VisitUnlessNull(const json& s, const std::string& path, int depth) {
    if (s.contains("$ref")) {
      OCTO_RETURN_IF_ERROR(OnlyBeside(s, path, "$ref"));
      return Ref(s["$ref"], path);
    }
    if (s.contains("const")) {
      OCTO_RETURN_IF_ERROR(OnlyBeside(s, path, "const"));
      return Literal(s["const"].dump());
    }
    if (s.contains("enum")) {
      OCTO_RETURN_IF_ERROR(OnlyBeside(s, path, "enum"));
      const json& values = s["enum"];
      if (!values.is_array() || values.empty()) return Error(path, "enum must be a non-empty array");
      std::vector<std::string> alternatives;
      for (const json& v : values) alternatives.push_back(Literal(v.dump()));
      return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (s.contains(key)) {
        OCTO_RETURN_IF_ERROR(OnlyBeside(s, path, key));
        return Alternatives(s[key], absl::StrCat(path, "/", key), depth);
      }
    }
    if (s.contains("allOf")) {
      OCTO_RETURN_IF_ERROR(OnlyBeside(s, path, "allOf"));
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) {
        return Error(path, "allOf is supported with one schema only");
      }
      return Visit(s["allOf"][0], path + "/allOf/0", depth + 1);
    }
    if (s.contains("type") && s["type"].is_array()) {
      if (s["type"].empty()) return Error(path, "type must not be an empty list");
      std::vector<std::string> alternatives;
      for (const json& t : s["type"]) {
        if (!t.is_string()) return Error(path, "type lists type names");
        json one = s;
        one["type"] = t;
        OCTO_ASSIGN_OR_RETURN(std::string alternative, VisitUnlessNull(one, path, depth));
        alternatives.push_back(std::move(alternative));
      }
      return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
    }
    std::string type;
    if (s.contains("type")) {
      if (!s["type"].is_string()) return Error(path, "type must be a type name or a list of them");
      type = s["type"].get<std::string>();
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      type = "object";
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      type = "array";
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
      type = "string";
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      type = "number";
    } else {
      return Use("value");
    }
    if (type == "object") return Object(s, path, depth);
    if (type == "array") return Array(s, path, depth);
    if (type == "string") return String(s, path);
    if (type == "integer") return Integer(s, path);
    if (type == "number") return Number(s, path);
    if (type == "boolean") return Use("boolean");
    if (type == "null") return Use("null");
    return Error(path, absl::StrCat("type '", type.substr(0, 40), "' is not a JSON Schema type"));
  }

  absl::StatusOr<std::string> Object(const json& s, const std::string& path, int depth) {
    const std::string ws = Use("ws");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Error(path, "required must be an array of names");
      for (const json& name : s["required"]) {
        if (!name.is_string()) return Error(path, "required must be an array of names");
        required.insert(name.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, bool>> members;  // the "name": value expression, required
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Error(path, "properties must be an object");
      for (const auto& [name, schema] : s["properties"].items()) {
        OCTO_ASSIGN_OR_RETURN(const std::string value, Visit(schema, absl::StrCat(path, "/properties/", name), depth + 1));
        members.push_back({absl::StrCat(Literal(json(name).dump()), " ", ws, " \":\" ", ws, " ", value),
                           required.contains(name)});
        required.erase(name);
      }
    }
    if (!required.empty()) {
      return Error(path, absl::StrCat("required names '", *required.begin(), "', which properties does not define"));
    }
    std::string extra;  // an additional member, when allowed
    if (s.contains("additionalProperties") && s["additionalProperties"] != false) {
      OCTO_ASSIGN_OR_RETURN(const std::string value,
                            Visit(s["additionalProperties"], path + "/additionalProperties", depth + 1));
      extra = absl::StrCat(Use("string"), " ", ws, " \":\" ", ws, " ", value);
    }
    // rest_i: members i.. after one was written; first_i: none written yet.
    const size_t n = members.size();
    std::vector<std::string> rest(n + 1), first(n + 1);
    const std::string base = absl::StrCat("object-", ++generated_);
    rest[n] = extra.empty() ? "" : NewRule(base + "-more", Repeat(absl::StrCat(ws, " \",\" ", ws, " ", extra), 0, -1));
    first[n] = extra.empty() ? "" : NewRule(base + "-any", absl::StrCat("( ", extra, " ", rest[n], " )?"));
    for (size_t i = n; i-- > 0;) {
      const auto& [member, is_required] = members[i];
      const std::string after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      const std::string with = absl::StrCat(ws, " \",\" ", ws, " ", member, after);
      rest[i] = NewRule(base + "-rest", is_required ? with : absl::StrCat(with, " | ", rest[i + 1].empty() ? "\"\"" : rest[i + 1]));
      const std::string starts = absl::StrCat(member, after);
      first[i] = NewRule(base + "-first", is_required ? starts : absl::StrCat(starts, " | ", first[i + 1].empty() ? "\"\"" : first[i + 1]));
    }
    return absl::StrCat("\"{\" ", ws, " ", first[0].empty() ? "" : first[0] + " ", ws, " \"}\"");
  }

  absl::StatusOr<std::string> Array(const json& s, const std::string& path, int depth) {
    const std::string ws = Use("ws");
    OCTO_ASSIGN_OR_RETURN(const int min, Count(s, "minItems", path, 0));
    OCTO_ASSIGN_OR_RETURN(const int max, Count(s, "maxItems", path, -1));
    if (max >= 0 && max < min) return Error(path, "maxItems is below minItems");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Error(path, "prefixItems must be an array of schemas");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        OCTO_ASSIGN_OR_RETURN(std::string item, Visit(s["prefixItems"][i], absl::StrCat(path, "/prefixItems/", i), depth + 1));
        prefix.push_back(std::move(item));
      }
    }
    std::string items;  // "" when no item may follow the prefix
    if (!s.contains("items")) {
      items = Use("value");
    } else if (s["items"] != false) {
      OCTO_ASSIGN_OR_RETURN(items, Visit(s["items"], path + "/items", depth + 1));
    }
    const int k = static_cast<int>(prefix.size());
    if (items.empty() && min > k) return Error(path, "minItems asks more items than prefixItems allows");
    // Tail(j): the elements from index j on, j of them written.
    std::string tail;
    const int limit = max < 0 ? -1 : max;
    if (!items.empty() && (limit < 0 || limit > k)) {
      const int more_min = std::max(0, min - k), more_max = limit < 0 ? -1 : limit - k;
      if (k == 0) {
        const std::string repeated = Repeat(absl::StrCat(ws, " \",\" ", ws, " ", items), std::max(0, min - 1),
                                            more_max < 0 ? -1 : more_max - 1);
        tail = absl::StrCat(items, " ", repeated);
        if (min == 0) tail = absl::StrCat("( ", tail, " )?");
      } else {
        tail = Repeat(absl::StrCat(ws, " \",\" ", ws, " ", items), more_min, more_max);
      }
    }
    for (int j = std::min(k, limit < 0 ? k : limit) - 1; j >= 0; --j) {
      const std::string sep = j == 0 ? "" : absl::StrCat(ws, " \",\" ", ws, " ");
      std::string body = absl::StrCat(sep, prefix[j], tail.empty() ? "" : " " + tail);
      tail = j >= min ? absl::StrCat("( ", body, " )?") : absl::StrCat("( ", body, " )");
    }
    return absl::StrCat("\"[\" ", ws, " ", tail.empty() ? "" : tail + " ", ws, " \"]\"");
  }

  absl::StatusOr<std::string> String(const json& s, const std::string& path) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Error(path, "pattern must be a string");
      if (s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
        return Error(path, "pattern beside format, minLength or maxLength is not supported");
      }
      absl::StatusOr<std::string> inside = JsonStringPattern(s["pattern"].get<std::string>());
      if (!inside.ok()) return Error(path, std::string(inside.status().message()));
      Use("char");
      return absl::StrCat("\"\\\"\" ", *inside, " \"\\\"\"");
    }
    if (s.contains("format")) {
      const std::string format = s["format"].is_string() ? s["format"].get<std::string>() : "";
      if (format != "date" && format != "time" && format != "date-time" && format != "uuid") {
        return Error(path, absl::StrCat("format '", format.substr(0, 40),
                                        "' is not supported (date, time, date-time and uuid are)"));
      }
      if (s.contains("minLength") || s.contains("maxLength")) {
        return Error(path, "minLength and maxLength beside format are not supported");
      }
      return absl::StrCat("\"\\\"\" ", Use(format), " \"\\\"\"");
    }
    OCTO_ASSIGN_OR_RETURN(const int min, Count(s, "minLength", path, 0));
    OCTO_ASSIGN_OR_RETURN(const int max, Count(s, "maxLength", path, -1));
    if (max >= 0 && max < min) return Error(path, "maxLength is below minLength");
    if (min == 0 && max < 0) return Use("string");
    return absl::StrCat("\"\\\"\" ", Repeat(Use("char"), min, max), " \"\\\"\"");
  }

  // A number within whole-number bounds: its integer part in range with any
  // fraction, or at a bound with a zero fraction; no exponent then.
  absl::StatusOr<std::string> Number(const json& s, const std::string& path) {
    for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(key)) return Error(path, absl::StrCat(key, " on a number is not supported (on an integer it is)"));
    }
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "maximum"}) {
      if (!s.contains(key)) continue;
      const json& v = s[key];
      if (!v.is_number()) return Error(path, absl::StrCat(key, " must be a number"));
      const double d = v.get<double>();
      if (std::floor(d) != d || std::abs(d) > 1e15) {
        return Error(path, absl::StrCat(key, " on a number must be a whole number (within 1e15) to be held to"));
      }
      (std::string(key) == "minimum" ? lo : hi) = static_cast<int64_t>(d);
    }
    if (!lo.has_value() && !hi.has_value()) return Use("number");
    if (lo.has_value() && hi.has_value() && *lo > *hi) return Error(path, "no number is within its bounds");
    const std::string fraction = "( \".\" [0-9]{1,16} )?";
    const std::string zeros = "( \".\" \"0\"{1,16} )?";
    std::vector<std::string> alternatives;
    // m.f >= 0 with m in [a, b - 1] and any f, or m == b and f zero; b unset: no end.
    auto magnitude = [&](uint64_t a, std::optional<uint64_t> b) {
      if (b.has_value() && *b == a) {
        alternatives.push_back(absl::StrCat("SIGN", UnsignedRange(a, a), " ", zeros));
        return;
      }
      std::optional<uint64_t> below = b;  // b - 1 when set
      if (below.has_value()) --*below;
      alternatives.push_back(absl::StrCat("SIGN", UnsignedRange(a, below), " ", fraction));
      if (b.has_value()) alternatives.push_back(absl::StrCat("SIGN", UnsignedRange(*b, *b), " ", zeros));
    };
    std::vector<std::string> negative;
    if (!lo.has_value() || *lo < 0) {
      // x = -y, y in [max(-hi, 0), -lo].
      const uint64_t from = hi.has_value() && *hi < 0 ? static_cast<uint64_t>(-*hi) : 0;
      std::optional<uint64_t> to;
      if (lo.has_value()) to = static_cast<uint64_t>(-*lo);
      magnitude(from, to);
      for (std::string& a : alternatives) a.replace(0, 4, "\"-\" ");
      negative = std::move(alternatives);
      alternatives.clear();
    }
    if (!hi.has_value() || *hi >= 0) {
      const uint64_t from = lo.has_value() && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      std::optional<uint64_t> to;
      if (hi.has_value()) to = static_cast<uint64_t>(*hi);
      magnitude(from, to);
      for (std::string& a : alternatives) a.replace(0, 4, "");
    }
    alternatives.insert(alternatives.end(), negative.begin(), negative.end());
    return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
  }

  absl::StatusOr<std::string> Integer(const json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key, int64_t shift, bool low) -> absl::Status {
      if (!s.contains(key)) return absl::OkStatus();
      const json& v = s[key];
      if (!v.is_number()) return Error(path, absl::StrCat(key, " must be a number"));
      const double d = v.get<double>();
      if (std::abs(d) > 1e15) return Error(path, absl::StrCat(key, " is beyond 1e15"));
      int64_t b = static_cast<int64_t>(low ? std::ceil(d) : std::floor(d));
      if (shift != 0 && static_cast<double>(b) == d) b += shift;  // exclusive: the next integer in
      std::optional<int64_t>& slot = low ? lo : hi;
      slot = slot.has_value() ? (low ? std::max(*slot, b) : std::min(*slot, b)) : b;
      return absl::OkStatus();
    };
    OCTO_RETURN_IF_ERROR(bound("minimum", 0, true));
    OCTO_RETURN_IF_ERROR(bound("exclusiveMinimum", 1, true));
    OCTO_RETURN_IF_ERROR(bound("maximum", 0, false));
    OCTO_RETURN_IF_ERROR(bound("exclusiveMaximum", -1, false));
    if (!lo.has_value() && !hi.has_value()) return Use("integer");
    if (lo.has_value() && hi.has_value() && *lo > *hi) return Error(path, "no integer is within its bounds");
    std::vector<std::string> alternatives;
    // Negative ones: "-" and the magnitude, from -hi (or 1) to -lo (or no end).
    if (!lo.has_value() || *lo < 0) {
      const uint64_t small = hi.has_value() && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
      std::optional<uint64_t> large;
      if (lo.has_value()) large = static_cast<uint64_t>(-*lo);
      alternatives.push_back(absl::StrCat("\"-\" ", UnsignedRange(small, large)));
    }
    if (!hi.has_value() || *hi >= 0) {
      const uint64_t from = lo.has_value() && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      std::optional<uint64_t> to;
      if (hi.has_value()) to = static_cast<uint64_t>(*hi);
      alternatives.push_back(UnsignedRange(from, to));
    }
    return alternatives.size() == 1 ? alternatives[0] : absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
  }

  const json& root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
  int generated_ = 0;
  bool uses_root_ = false;  // a $ref "#"
};

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGrammar(const nlohmann::ordered_json& schema) {
  OCTO_ASSIGN_OR_RETURN(std::string text, Converter(schema).Run());
  // The text parses (and has no left recursion); said here, not at a request's first token.
  if (absl::StatusOr<Grammar> parsed = Grammar::Parse(text); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the schema's grammar: ", parsed.status().message()));
  }
  return text;
}

}  // namespace octo
