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
#include "grammar/gbnf_literal.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"
#include "grammar/json_string_chars.h"
#include "grammar/number_range.h"
#include "grammar/regex_grammar.h"
#include "grammar/string_formats.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonGrammarOptions& options) : root_(root), options_(options) {
    TANDEM_CHECK_INPUT(options.max_whitespace >= 0 && options.max_whitespace <= 100,
                       "json schema: max_whitespace {} is outside [0, 100]", options.max_whitespace);
    for (const char* name : {"root", "ws", "value", "object", "array", "string", "char", "bmp-char", "number",
                             "integer", "boolean", "null", "digits"})
      used_.insert(name);
    // Between two tokens: nothing, one space, or one or two newlines and an indentation (the
    // bound llama.cpp's JSON grammars use), so a model cannot spend its tokens on whitespace.
    add("ws", options.max_whitespace == 0
                  ? std::string("\"\"")
                  : fmt::format(R"(( " " | "\n"{{1,2}} [ \t]{{0,{}}} )?)", options.max_whitespace));
    add("char", kJsonStringChar);
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
    return out + extra_rules_;
  }

  std::string compile_any(bool object_only) {
    add_front("root", "ws " + std::string(object_only ? (any_value(), "object") : any_value()));
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
    static const std::set<std::string> kKnown = {"type",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "minItems",
                                                 "maxItems",
                                                 "enum",
                                                 "const",
                                                 "anyOf",
                                                 "$ref",
                                                 "$defs",
                                                 "definitions",
                                                 "description",
                                                 "title",
                                                 "$schema",
                                                 "$id",
                                                 "default",
                                                 "examples",
                                                 "$comment",
                                                 "minLength",
                                                 "maxLength",
                                                 "format",
                                                 "pattern",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "multipleOf"};
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
      return gbnf_literal(schema["const"].dump());
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
        if (of_type(schema, v)) alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.dump());
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
    if (type == "number") return number(schema, hint, where);
    if (type == "integer") return integer(schema, hint, where);
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
    const bool has_length = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("format")) {
      const Json& f = schema["format"];
      TANDEM_CHECK_INPUT(f.is_string(), "json schema: 'format' at {} must be a string", where);
      const std::string format = f.get<std::string>();
      const std::optional<std::string> body = string_format_gbnf(format);
      if (!body) throw InputError(fmt::format("json schema: unsupported string format '{}' at {}", format, where));
      // A grammar is not intersected with another: both at once would be one of them ignored.
      TANDEM_CHECK_INPUT(!has_length, "json schema: 'format' with minLength/maxLength at {} is not supported", where);
      if (schema.contains("pattern")) {
        const Json& p = schema["pattern"];
        TANDEM_CHECK_INPUT(p.is_string() && pattern_implied_by_format(format, p.get<std::string>()),
                           "json schema: 'format' '{}' with a 'pattern' at {} is not supported (the grammar cannot "
                           "intersect them; only zod's own pattern for a format is known to hold for it)",
                           format, where);
      }
      const std::string name = fresh(hint);
      add(name, "\"\\\"\" " + *body + " \"\\\"\"");
      return name;
    }
    if (schema.contains("pattern")) {
      const Json& p = schema["pattern"];
      TANDEM_CHECK_INPUT(p.is_string(), "json schema: 'pattern' at {} must be a string", where);
      RegexLengths lengths;
      const std::string body = regex_to_gbnf(p.get<std::string>(), {.json_string = true, .search = true},
                                             fmt::format("json schema: 'pattern' at {}", where), &lengths);
      // Length bounds beside a pattern are followed when every match of the pattern meets them
      // anyway (^[A-Z]{3}$ with minLength 3); otherwise the grammar cannot intersect the two.
      const int64_t min_length = count_keyword(schema, "minLength", 0, where);
      const int64_t max_length = count_keyword(schema, "maxLength", -1, where);
      TANDEM_CHECK_INPUT(
          lengths.min >= static_cast<uint64_t>(min_length) &&
              (max_length < 0 || (lengths.max && *lengths.max <= static_cast<uint64_t>(max_length))),
          "json schema: 'pattern' with minLength/maxLength at {} is supported only when every match of the pattern "
          "has such a length (it matches {} to {} characters)",
          where, lengths.min, lengths.max ? std::to_string(*lengths.max) : std::string("unboundedly many"));
      const std::string name = fresh(hint);
      add(name, "\"\\\"\" " + body + " \"\\\"\"");
      return name;
    }
    const int64_t min = count_keyword(schema, "minLength", 0, where);
    const int64_t max = count_keyword(schema, "maxLength", -1, where);
    if (min == 0 && max < 0) return "string";
    TANDEM_CHECK_INPUT(max < 0 || max >= min, "json schema: maxLength < minLength at {}", where);
    // JSON Schema counts code points; JavaScript validators (zod's .max()) count UTF-16 units,
    // in which a character past U+FFFF is two. Within length bounds the characters stay in the
    // BMP, where both counts agree, so the reply passes either validator.
    if (!bmp_char_added_) {
      add("bmp-char", kJsonBmpStringChar);
      bmp_char_added_ = true;
    }
    const std::string name = fresh(hint);
    add(name, max < 0 ? fmt::format(R"("\"" bmp-char{{{},}} "\"")", min)
                      : fmt::format(R"("\"" bmp-char{{{},{}}} "\"")", min, max));
    return name;
  }

  // minimum / exclusiveMinimum (and the maximum pair) as one bound each: the tighter when both
  // are given; draft 4's boolean exclusiveMinimum makes `minimum` exclusive.
  static std::optional<Bound> bound(const Json& schema, const char* inclusive_key, const char* exclusive_key,
                                    bool lower, const std::string& where) {
    std::optional<Bound> out;
    bool draft4_exclusive = false;
    if (schema.contains(exclusive_key) && schema[exclusive_key].is_boolean()) {
      draft4_exclusive = schema[exclusive_key].get<bool>();
    } else if (schema.contains(exclusive_key)) {
      out = Bound{decimal_of(schema[exclusive_key], fmt::format("'{}' at {}", exclusive_key, where)), true};
    }
    if (schema.contains(inclusive_key)) {
      Bound b{decimal_of(schema[inclusive_key], fmt::format("'{}' at {}", inclusive_key, where)), draft4_exclusive};
      const int c = out ? compare(b.value, out->value) : 0;
      if (!out || (lower ? c > 0 : c < 0)) out = b;
    }
    return out;
  }

  std::string integer(const Json& schema, const std::string& hint, const std::string& where) {
    const std::optional<Bound> min = bound(schema, "minimum", "exclusiveMinimum", true, where);
    const std::optional<Bound> max = bound(schema, "maximum", "exclusiveMaximum", false, where);
    if (schema.contains("multipleOf")) {
      const Decimal m = decimal_of(schema["multipleOf"], fmt::format("'multipleOf' at {}", where));
      TANDEM_CHECK_INPUT(!m.negative && !m.is_zero(), "json schema: 'multipleOf' at {} must be positive", where);
      // 0.1, 0.01, ...: every integer is a multiple. Other fractions are refused.
      if (!m.is_integer()) {
        TANDEM_CHECK_INPUT(m.int_digits == "0" && m.frac_digits.back() == '1' &&
                               m.frac_digits.find_first_not_of('0') == m.frac_digits.size() - 1,
                           "json schema: integer 'multipleOf' {} at {} is not supported (only whole numbers and "
                           "powers of ten)",
                           m.text(), where);
      } else if (m.int_digits != "1") {
        std::string rules;
        // InputError past the limit on k; nullopt for bounds the automaton cannot follow.
        const std::optional<std::string> expr =
            integer_multiple_in_range_gbnf(m.int_digits, fresh(hint + "-mod"), rules, min, max);
        TANDEM_CHECK_INPUT(expr.has_value(),
                           "json schema: 'multipleOf' with these minimum/maximum at {} is not supported (the "
                           "grammar follows a lower bound of 0, 1 or at most -(10^D - 1) and an upper one of at "
                           "least 10^D - 1 (D >= 1); other bounds would need the product of two digit automata)",
                           where);
        extra_rules_ += rules;
        return *expr;
      }
    }
    if (!min && !max) return "integer";
    const std::optional<std::string> range = integer_range_gbnf(min, max);
    TANDEM_CHECK_INPUT(range.has_value(), "json schema: no integer satisfies the bounds at {}", where);
    const std::string name = fresh(hint);
    add(name, *range);
    return name;
  }

  // Numbers under bounds are written in plain decimal (no exponent), with at most 16 fraction
  // digits: always inside the bounds, exactly as a validator compares them.
  std::string number(const Json& schema, const std::string& hint, const std::string& where) {
    const std::optional<Bound> min = bound(schema, "minimum", "exclusiveMinimum", true, where);
    const std::optional<Bound> max = bound(schema, "maximum", "exclusiveMaximum", false, where);
    size_t fraction_digits = kDefaultFractionDigits;
    if (schema.contains("multipleOf")) {
      const Decimal m = decimal_of(schema["multipleOf"], fmt::format("'multipleOf' at {}", where));
      TANDEM_CHECK_INPUT(!m.negative && !m.is_zero(), "json schema: 'multipleOf' at {} must be positive", where);
      if (m.is_integer()) {
        if (m.int_digits != "1") return integer(schema, hint, where);  // a multiple of an integer is one
        fraction_digits = 0;
      } else {
        // 10^-k: at most k fraction digits. Other fractions (0.25, 0.3) are refused.
        const bool power_of_ten = m.int_digits == "0" && m.frac_digits.back() == '1' &&
                                  m.frac_digits.find_first_not_of('0') == m.frac_digits.size() - 1;
        TANDEM_CHECK_INPUT(power_of_ten,
                           "json schema: number 'multipleOf' {} at {} is not supported (only integers and powers of "
                           "ten such as 0.01)",
                           m.text(), where);
        fraction_digits = m.frac_digits.size();
      }
    }
    if (!min && !max && fraction_digits == kDefaultFractionDigits) return "number";
    const std::optional<std::string> range = number_range_gbnf(min, max, fraction_digits);
    TANDEM_CHECK_INPUT(range.has_value(), "json schema: no number satisfies the bounds at {}", where);
    const std::string name = fresh(hint);
    add(name, *range);
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
      kvs.push_back(fmt::format(R"({} ws ":" ws {} ws)", gbnf_literal(Json(key).dump()),
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
  bool bmp_char_added_ = false;              // the "bmp-char" rule, written by the first length-bounded string
  std::map<std::string, std::string> refs_;  // JSON pointer -> rule name
  std::map<std::string, int> next_suffix_;   // fresh(): base -> next suffix to try
  std::string extra_rules_;                  // whole rules written by helpers (integer multipleOf)
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
  return SchemaCompiler(empty, options).compile_any(false);
}

std::string any_json_object_gbnf(const JsonGrammarOptions& options) {
  Json empty = Json::object();
  return SchemaCompiler(empty, options).compile_any(true);
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  const std::string text = json_schema_to_gbnf(schema, options);
  TANDEM_CHECK_INPUT(text.size() <= kMaxGrammarTextBytes,
                     "json schema: it compiles to {} bytes of grammar (the limit is {})", text.size(),
                     kMaxGrammarTextBytes);
  return parse_gbnf(text);
}

Grammar any_json_grammar(const JsonGrammarOptions& options) { return parse_gbnf(any_json_gbnf(options)); }

Grammar any_json_object_grammar(const JsonGrammarOptions& options) { return parse_gbnf(any_json_object_gbnf(options)); }

}  // namespace tandem::grammar
