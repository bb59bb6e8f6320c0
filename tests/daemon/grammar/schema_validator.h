// A small JSON Schema validator for the tests: the keywords the converter
// (daemon/grammar/json_schema.h) covers, checked on values, written apart
// from the converter (it looks at values, not grammars), so a converter bug
// shows as an output it calls invalid.
#pragma once

#include <cmath>
#include <regex>
#include <string>

#include "nlohmann/json.hpp"

namespace octo::testing {

class SchemaValidator {
 public:
  using json = nlohmann::ordered_json;
  explicit SchemaValidator(const json& root) : root_(root) {}

  // "" when `value` is valid, else why not (with its path).
  std::string Check(const json& value) const { return Check(value, root_, "#"); }

 private:
  static size_t CodePoints(const std::string& s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  }

  const json& Resolve(const std::string& ref) const {
    if (ref == "#") return root_;
    for (const char* section : {"$defs", "definitions"}) {
      const std::string prefix = std::string("#/") + section + "/";
      if (ref.rfind(prefix, 0) == 0) return root_[section][ref.substr(prefix.size())];
    }
    static const json nothing = false;
    return nothing;
  }

  static bool HasType(const json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    return false;
  }

  std::string Check(const json& v, const json& s, const std::string& path) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : path + ": false schema";
    if (s.contains("nullable") && s["nullable"] == true && v.is_null()) return "";
    if (s.contains("$ref")) return Check(v, Resolve(s["$ref"]), path);
    if (s.contains("const") && v != s["const"]) return path + ": not the const";
    if (s.contains("enum")) {
      bool found = false;
      for (const json& e : s["enum"]) found |= e == v;
      if (!found) return path + ": not in enum";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      int matches = 0;
      for (const json& alternative : s[key]) matches += Check(v, alternative, path).empty();
      if (matches == 0 || (std::string(key) == "oneOf" && matches > 1)) return path + ": " + key + " matched " + std::to_string(matches);
    }
    if (s.contains("allOf")) {
      for (const json& part : s["allOf"]) {
        if (std::string why = Check(v, part, path); !why.empty()) return why;
      }
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_array()) {
        for (const json& t : s["type"]) ok |= HasType(v, t.get<std::string>());
      } else {
        ok = HasType(v, s["type"].get<std::string>());
      }
      if (!ok) return path + ": wrong type " + std::string(v.type_name());
    }
    if (v.is_object()) {
      const json props = s.value("properties", json::object());
      for (const json& name : s.value("required", json::array())) {
        if (!v.contains(name.get<std::string>())) return path + ": missing " + name.get<std::string>();
      }
      for (const auto& [key, member] : v.items()) {
        if (props.contains(key)) {
          if (std::string why = Check(member, props[key], path + "/" + key); !why.empty()) return why;
        } else if (s.contains("additionalProperties")) {
          if (std::string why = Check(member, s["additionalProperties"], path + "/" + key); !why.empty()) return why;
        }
      }
    }
    if (v.is_array()) {
      const size_t n = v.size();
      if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return path + ": too few items";
      if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return path + ": too many items";
      const json prefix = s.value("prefixItems", json::array());
      for (size_t i = 0; i < n; ++i) {
        const std::string at = path + "/" + std::to_string(i);
        if (i < prefix.size()) {
          if (std::string why = Check(v[i], prefix[i], at); !why.empty()) return why;
        } else if (s.contains("items")) {
          if (std::string why = Check(v[i], s["items"], at); !why.empty()) return why;
        }
      }
    }
    if (v.is_string()) {
      const std::string text = v.get<std::string>();
      if (s.contains("minLength") && CodePoints(text) < s["minLength"].get<size_t>()) return path + ": too short";
      if (s.contains("maxLength") && CodePoints(text) > s["maxLength"].get<size_t>()) return path + ": too long";
      if (s.contains("pattern") && !std::regex_search(text, std::regex(s["pattern"].get<std::string>()))) {
        return path + ": does not match the pattern";
      }
      if (s.contains("format")) {
        static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
        static const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
        const std::string format = s["format"];
        std::string pattern;
        if (format == "date") pattern = date;
        if (format == "time") pattern = time;
        if (format == "date-time") pattern = date + "T" + time;
        if (format == "uuid") pattern = "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}";
        if (!std::regex_match(text, std::regex(pattern))) return path + ": not a " + format;
      }
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return path + ": below minimum";
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return path + ": above maximum";
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return path + ": not above exclusiveMinimum";
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return path + ": not below exclusiveMaximum";
    }
    return "";
  }

  const json& root_;
};

}  // namespace octo::testing
