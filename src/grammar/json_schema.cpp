// JSON Schema to GBNF. Each schema node becomes an expression; objects, arrays, anyOf and
// $ref targets get their own rules (named after where they are in the schema, which makes
// the text readable and lets $ref recurse: a target's rule name is reserved before its body
// is written).
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

// A GBNF string literal matching exactly `bytes`.
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20) {
      out += fmt::format("\\x{:02X}", b);
    } else {
      out += c;  // UTF-8 bytes pass through: a literal matches its bytes
    }
  }
  return out + "\"";
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonGrammarOptions& options) : root_(root), options_(options) {
    TANDEM_CHECK_INPUT(options.max_whitespace >= 0 && options.max_whitespace <= 100,
                       "json schema: max_whitespace {} is outside [0, 100]", options.max_whitespace);
    for (const char* name :
         {"root", "ws", "value", "object", "array", "string", "char", "number", "integer", "boolean", "null", "digits"})
      used_.insert(name);
    add("ws", fmt::format("[ \\t\\n\\r]{{0,{}}}", options.max_whitespace));
    add("char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))");
    add("string", R"("\"" char* "\"")");
    add("integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))");
    add("number", R"(integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)");
    add("boolean", R"("true" | "false")");
    add("null", R"("null")");
  }

  std::string any_value() {
    if (!any_defined_) {
      any_defined_ = true;
      add("value", "object | array | string | number | boolean | null");
      add("object", R"("{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}")");
      add("array", R"("[" ws (value ws ("," ws value ws)*)? "]")");
    }
    return "value";
  }

  std::string compile(const Json& schema) {
    const std::string value = visit(schema, "root-value", "#");
    add_front("root", "ws " + value);
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  std::string compile_any() {
    add_front("root", "ws " + any_value());
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  void add(const std::string& name, std::string body) { rules_.emplace_back(name, std::move(body)); }
  void add_front(const std::string& name, std::string body) { rules_.insert(rules_.begin(), {name, std::move(body)}); }

  // A fresh rule name from a schema location hint. Many hints can sanitise to one base (keys
  // "a!", "a?", ...): each base remembers the next suffix to try, so naming stays linear.
  std::string fresh(std::string_view hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '-';
    if (base.empty()) base = "r";
    std::string name = base;
    int& next = next_suffix_[base];
    if (next == 0) next = 2;
    while (used_.contains(name)) name = fmt::format("{}-{}", base, next++);
    used_.insert(name);
    return name;
  }

  [[noreturn]] void unsupported(const std::string& keyword, const std::string& where) const {
    throw InputError(fmt::format("json schema: unsupported keyword '{}' at {}", keyword, where));
  }

  // An expression matching the JSON values valid under `schema`; `hint` names its rules,
  // `where` is its JSON pointer, for errors.
  std::string visit(const Json& schema, const std::string& hint, const std::string& where) {
    TANDEM_CHECK_INPUT(++depth_ < 200, "json schema: nested too deeply at {}", where);
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (schema.is_boolean()) {
      TANDEM_CHECK_INPUT(schema.get<bool>(), "json schema: 'false' at {} allows no value", where);
      return any_value();
    }
    TANDEM_CHECK_INPUT(schema.is_object(), "json schema: expected an object at {}", where);
    static const std::set<std::string> kAnnotations = {"description", "title",    "$schema", "$id",        "default",
                                                       "examples",    "$comment", "$defs",   "definitions"};
    static const std::set<std::string> kKnown = {"type",        "properties",  "required", "additionalProperties",
                                                 "items",       "minItems",    "maxItems", "enum",
                                                 "const",       "anyOf",       "$ref",     "$defs",
                                                 "definitions", "description", "title",    "$schema",
                                                 "$id",         "default",     "examples", "$comment",
                                                 "minLength",   "maxLength",   "format"};
    for (const auto& [key, _] : schema.items()) {
      if (!kKnown.contains(key)) unsupported(key, where);
    }
    // $ref, const, enum and anyOf decide the value alone here; a sibling that would narrow
    // it further is refused rather than silently dropped (the output could break it).
    for (const char* keyword : {"$ref", "const", "enum", "anyOf"}) {
      if (!schema.contains(keyword)) continue;
      for (const auto& [key, _] : schema.items()) {
        if (key == keyword || kAnnotations.contains(key) || (key == "type" && keyword[0] != '$' && keyword[0] != 'a')) {
          continue;
        }
        throw InputError(fmt::format("json schema: '{}' alongside '{}' at {} is not supported", key, keyword, where));
      }
      break;
    }
    if (schema.contains("$ref")) return ref(schema["$ref"], where);
    if (schema.contains("const")) {
      TANDEM_CHECK_INPUT(of_type(schema, schema["const"]), "json schema: 'const' at {} does not have the schema's type",
                         where);
      return literal(schema["const"].dump());
    }
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      TANDEM_CHECK_INPUT(values.is_array() && !values.empty(), "json schema: 'enum' at {} must be a non-empty array",
                         where);
      TANDEM_CHECK_INPUT(values.size() <= kMaxRuleAlternatives,
                         "json schema: 'enum' at {} has {} values (the limit is {})", where, values.size(),
                         kMaxRuleAlternatives);
      std::string alts;
      for (const Json& v : values) {
        if (of_type(schema, v)) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      }
      TANDEM_CHECK_INPUT(!alts.empty(), "json schema: no 'enum' value at {} has the schema's type", where);
      return "(" + alts + ")";
    }
    if (schema.contains("anyOf")) {
      const Json& options = schema["anyOf"];
      TANDEM_CHECK_INPUT(options.is_array() && !options.empty(), "json schema: 'anyOf' at {} must be a non-empty array",
                         where);
      TANDEM_CHECK_INPUT(options.size() <= kMaxRuleAlternatives,
                         "json schema: 'anyOf' at {} has {} options (the limit is {})", where, options.size(),
                         kMaxRuleAlternatives);
      const std::string name = fresh(hint);
      std::string alts;
      for (size_t i = 0; i < options.size(); ++i) {
        alts += (i == 0 ? "" : " | ") +
                visit(options[i], fmt::format("{}-{}", hint, i), fmt::format("{}/anyOf/{}", where, i));
      }
      add(name, alts);
      return name;
    }
    if (!schema.contains("type")) {
      // Structure without a type still says what it is; anything else is any value.
      if (schema.contains("properties")) return object(schema, hint, where);
      if (schema.contains("items")) return array(schema, hint, where);
      return any_value();
    }
    const Json& type = schema["type"];
    if (type.is_string()) return typed(schema, type.get<std::string>(), hint, where);
    TANDEM_CHECK_INPUT(type.is_array() && !type.empty(), "json schema: 'type' at {} must be a string or a list", where);
    std::string alts;
    for (const Json& t : type) {
      TANDEM_CHECK_INPUT(t.is_string(), "json schema: 'type' at {} must list strings", where);
      alts += (alts.empty() ? "" : " | ") + typed(schema, t.get<std::string>(), hint, where);
    }
    return "(" + alts + ")";
  }

  // Whether `value` has one of the schema's types (true without "type"): an enum value of
  // another type could never validate.
  static bool of_type(const Json& schema, const Json& value) {
    if (!schema.contains("type")) return true;
    auto matches = [&](const Json& t) {
      if (!t.is_string()) return false;
      const std::string type = t.get<std::string>();
      if (type == "integer") return value.is_number_integer() || value.is_number_unsigned();
      if (type == "number") return value.is_number();
      if (type == "string") return value.is_string();
      if (type == "boolean") return value.is_boolean();
      if (type == "null") return value.is_null();
      if (type == "object") return value.is_object();
      if (type == "array") return value.is_array();
      return false;
    };
    const Json& type = schema["type"];
    if (!type.is_array()) return matches(type);
    return std::any_of(type.begin(), type.end(), matches);
  }

  std::string typed(const Json& schema, const std::string& type, const std::string& hint, const std::string& where) {
    if (type == "object") return object(schema, hint, where);
    if (type == "array") return array(schema, hint, where);
    if (type == "string") return string(schema, hint, where);
    if (type == "number") return "number";
    if (type == "integer") return "integer";
    if (type == "boolean") return "boolean";
    if (type == "null") return "null";
    throw InputError(fmt::format("json schema: unknown type '{}' at {}", type, where));
  }

  static int64_t count_keyword(const Json& schema, const char* key, int64_t fallback, const std::string& where) {
    if (!schema.contains(key)) return fallback;
    const Json& v = schema[key];
    TANDEM_CHECK_INPUT(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10000,
                       "json schema: '{}' at {} must be an integer in [0, 10000]", key, where);
    return v.get<int64_t>();
  }

  std::string string(const Json& schema, const std::string& hint, const std::string& where) {
    if (schema.contains("format")) {
      const Json& f = schema["format"];
      TANDEM_CHECK_INPUT(f.is_string(), "json schema: 'format' at {} must be a string", where);
      const std::string format = f.get<std::string>();
      static const std::map<std::string, std::string> kFormats = {
          {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))"},
          {"time",
           R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
          {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
      };
      std::string body;
      if (format == "date-time") {
        body = kFormats.at("date") + " \"T\" " + kFormats.at("time");
      } else if (kFormats.contains(format)) {
        body = kFormats.at(format);
      } else {
        throw InputError(fmt::format("json schema: unsupported string format '{}' at {}", format, where));
      }
      TANDEM_CHECK_INPUT(!schema.contains("minLength") && !schema.contains("maxLength"),
                         "json schema: 'format' with minLength/maxLength at {} is not supported", where);
      const std::string name = fresh(hint);
      add(name, "\"\\\"\" " + body + " \"\\\"\"");
      return name;
    }
    const int64_t min = count_keyword(schema, "minLength", 0, where);
    const int64_t max = count_keyword(schema, "maxLength", -1, where);
    if (min == 0 && max < 0) return "string";
    TANDEM_CHECK_INPUT(max < 0 || max >= min, "json schema: maxLength < minLength at {}", where);
    const std::string name = fresh(hint);
    add(name,
        max < 0 ? fmt::format(R"("\"" char{{{},}} "\"")", min) : fmt::format(R"("\"" char{{{},{}}} "\"")", min, max));
    return name;
  }

  std::string array(const Json& schema, const std::string& hint, const std::string& where) {
    const int64_t min = count_keyword(schema, "minItems", 0, where);
    const int64_t max = count_keyword(schema, "maxItems", -1, where);
    TANDEM_CHECK_INPUT(max < 0 || max >= min, "json schema: maxItems < minItems at {}", where);
    std::string item = "value";
    if (schema.contains("items")) {
      TANDEM_CHECK_INPUT(!schema["items"].is_array(), "json schema: 'items' as a list (tuple) at {} is not supported",
                         where);
      item = visit(schema["items"], hint + "-item", where + "/items");
    } else {
      any_value();
    }
    const std::string name = fresh(hint);
    if (max == 0) {
      add(name, R"("[" ws "]")");
      return name;
    }
    const std::string more = fmt::format(R"(("," ws {} ws))", item);
    std::string rest;
    if (max < 0) {
      rest = more + (min <= 1 ? "*" : fmt::format("{{{},}}", min - 1));
    } else {
      rest = more + fmt::format("{{{},{}}}", min > 0 ? min - 1 : 0, max - 1);
    }
    const std::string items = item + " ws " + rest;
    add(name, min == 0 ? fmt::format(R"("[" ws ({})? "]")", items) : fmt::format(R"("[" ws {} "]")", items));
    return name;
  }

  std::string object(const Json& schema, const std::string& hint, const std::string& where) {
    if (!schema.contains("properties") && schema.contains("required")) {
      // Required keys without a schema of their own: any value each, and nothing else.
      Json narrowed = schema;
      narrowed["properties"] = Json::object();
      TANDEM_CHECK_INPUT(schema["required"].is_array(), "json schema: 'required' at {} must be a list", where);
      for (const Json& r : schema["required"]) {
        TANDEM_CHECK_INPUT(r.is_string(), "json schema: 'required' at {} must list strings", where);
        narrowed["properties"][r.get<std::string>()] = Json::object();
      }
      return object(narrowed, hint, where);
    }
    const std::string name = fresh(hint);
    if (!schema.contains("properties")) {
      // A map: additionalProperties says what its values are (absent or true: anything).
      std::string value = "value";
      if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
        value = visit(schema["additionalProperties"], hint + "-value", where + "/additionalProperties");
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
        add(name, R"("{" ws "}")");
        return name;
      } else {
        any_value();
      }
      add(name, fmt::format(R"("{{" ws (string ws ":" ws {0} ws ("," ws string ws ":" ws {0} ws)*)? "}}")", value));
      return name;
    }
    const Json& properties = schema["properties"];
    TANDEM_CHECK_INPUT(properties.is_object(), "json schema: 'properties' at {} must be an object", where);
    std::set<std::string> required;
    if (schema.contains("required")) {
      TANDEM_CHECK_INPUT(schema["required"].is_array(), "json schema: 'required' at {} must be a list", where);
      for (const Json& r : schema["required"]) {
        TANDEM_CHECK_INPUT(r.is_string() && properties.contains(r.get<std::string>()),
                           "json schema: 'required' at {} names {}, which is not among the properties", where,
                           r.dump());
        required.insert(r.get<std::string>());
      }
    }
    // Commas with optional properties, in linear size: first_i matches properties i.. when
    // none has been written yet, rest_i when one has (so the next needs a comma).
    std::vector<std::string> kvs, keys;
    for (const auto& [key, sub] : properties.items()) {
      kvs.push_back(fmt::format(R"({} ws ":" ws {} ws)", literal(Json(key).dump()),
                                visit(sub, hint + "-" + key, where + "/properties/" + key)));
      keys.push_back(key);
    }
    const size_t n = kvs.size();
    std::vector<std::string> first(n + 1, "\"\""), rest(n + 1, "\"\"");
    for (size_t i = n; i-- > 0;) {
      const bool req = required.contains(keys[i]);
      const std::string rest_name = fresh(fmt::format("{}-rest{}", hint, i));
      add(rest_name, fmt::format(R"("," ws {} {}{})", kvs[i], rest[i + 1], req ? "" : " | " + rest[i + 1]));
      rest[i] = rest_name;
      const std::string first_name = fresh(fmt::format("{}-first{}", hint, i));
      add(first_name, fmt::format("{} {}{}", kvs[i], rest[i + 1], req ? "" : " | " + first[i + 1]));
      first[i] = first_name;
    }
    add(name, fmt::format(R"("{{" ws {} "}}")", n == 0 ? "\"\"" : first[0]));
    return name;
  }

  std::string ref(const Json& target, const std::string& where) {
    TANDEM_CHECK_INPUT(target.is_string(), "json schema: '$ref' at {} must be a string", where);
    const std::string pointer = target.get<std::string>();
    if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
    TANDEM_CHECK_INPUT(pointer.starts_with("#"),
                       "json schema: only local '$ref's (#/...) are supported, got '{}' at {}", pointer, where);
    const Json* node = &root_;
    try {
      if (pointer.size() > 1) {
        const Json::json_pointer p(pointer.substr(1));
        node = &root_.at(p);
      }
    } catch (const nlohmann::json::exception&) {
      throw InputError(fmt::format("json schema: '$ref' '{}' at {} points nowhere", pointer, where));
    }
    const std::string name = fresh(pointer.size() > 1 ? pointer.substr(pointer.rfind('/') + 1) : "root-ref");
    refs_.emplace(pointer, name);
    // Reserve the rule's place, so a recursive reference finds its name, then fill it in.
    const size_t slot = rules_.size();
    add(name, "");
    const std::string body = visit(*node, name, pointer);
    rules_[slot].second = body;
    return name;
  }

  const Json& root_;
  JsonGrammarOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in output order
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;  // JSON pointer -> rule name
  std::map<std::string, int> next_suffix_;   // fresh(): base -> next suffix to try
  bool any_defined_ = false;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  try {
    return SchemaCompiler(schema, options).compile(schema);
  } catch (const nlohmann::json::exception& e) {
    // Strings that are not UTF-8 cannot be serialised into literals.
    throw InputError(fmt::format("json schema: {}", e.what()));
  }
}

std::string any_json_gbnf(const JsonGrammarOptions& options) {
  Json empty = Json::object();
  return SchemaCompiler(empty, options).compile_any();
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  const std::string text = json_schema_to_gbnf(schema, options);
  TANDEM_CHECK_INPUT(text.size() <= kMaxGrammarTextBytes,
                     "json schema: it compiles to {} bytes of grammar (the limit is {})", text.size(),
                     kMaxGrammarTextBytes);
  return parse_gbnf(text);
}

Grammar any_json_grammar(const JsonGrammarOptions& options) { return parse_gbnf(any_json_gbnf(options)); }

}  // namespace tandem::grammar
