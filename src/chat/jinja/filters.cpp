// Filters and tests (see filters.h), each a small function keyed by its Jinja name.
// Results that Jinja produces as Python generators (map, select*, reject*, unique, items)
// are generator Values, so `|length` on them fails and `|list` is needed, as in Jinja.
#include "chat/jinja/filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "chat/jinja/json_value.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/py_string.h"

namespace tandem::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;
using Filter = std::function<Value(const Value&, CallArgs&)>;
using Test = std::function<bool(const Value&, CallArgs&)>;

bool flag(const std::optional<Value>& v, bool fallback) { return v ? v->truthy() : fallback; }

// Jinja's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
Value get_attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

std::string attribute_arg(const std::optional<Value>& v) {
  if (!v || v->is_none()) return "";
  if (v->is_int()) return std::to_string(v->as_int());
  if (!v->is_string()) throw TemplateError("attribute must be a string");
  return v->as_string();
}

// The sort key of sort/unique/min/max: an attribute, lowercased unless case-sensitive.
Value sort_key(const Value& item, const std::string& attribute, bool case_sensitive) {
  Value v = attribute.empty() ? item : get_attribute_path(item, attribute);
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

std::optional<double> parse_py_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return x;
}

std::optional<int64_t> parse_py_int(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  std::string digits = s.substr(0, i);
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9')
      digits += s[i];
    else if (s[i] != '_' || i + 1 == s.size() || digits.empty() || digits.back() < '0')
      return std::nullopt;
  }
  errno = 0;
  const int64_t v = std::strtoll(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) throw TemplateError("int(): value out of range");
  return v;
}

Value filter_int(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "int", {"default", "base"});
  const Value fallback = a[0] ? *a[0] : Value(int64_t{0});
  require_defined(v);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (std::isnan(v.as_float())) return fallback;
    if (std::isinf(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) throw TemplateError("int(): float out of range");
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string())) return Value(*i);
    if (auto f = parse_py_float(v.as_string())) {
      if (std::isnan(*f)) return fallback;
      if (std::isinf(*f) || std::fabs(*f) >= 9.2e18) throw TemplateError("int(): float out of range");
      return Value(static_cast<int64_t>(*f));
    }
  }
  return fallback;
}

Value filter_float(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "float", {"default"});
  require_defined(v);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.as_string())) return Value(*f);
  }
  return a[0] ? *a[0] : Value(0.0);
}

Value filter_tojson(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  if (flag(a[0], false)) throw TemplateError("unsupported construct: tojson(ensure_ascii=True)");
  JsonFormat format;
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      format.indent = a[1]->as_string();
    } else {
      format.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, to_index(*a[1], "indent"))), ' ');
    }
    format.item_separator = ",";  // json.dumps' default when indenting
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_list() || a[2]->as_list().size() != 2 || !a[2]->as_list()[0].is_string() ||
        !a[2]->as_list()[1].is_string()) {
      throw TemplateError("tojson separators must be a pair of strings");
    }
    format.item_separator = a[2]->as_list()[0].as_string();
    format.key_separator = a[2]->as_list()[1].as_string();
  }
  format.sort_keys = flag(a[3], false);
  return Value(to_json(v, format));
}

Value filter_indent(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "indent", {"width", "first", "blank"});
  std::string indention = "    ";
  if (a[0]) {
    indention = a[0]->is_string()
                    ? a[0]->as_string()
                    : std::string(static_cast<size_t>(std::max<int64_t>(0, to_index(*a[0], "width"))), ' ');
  }
  const std::string s = py_str(v) + "\n";  // Jinja's own quirk, so splitlines keeps a last blank line
  const std::vector<std::string> lines = py_splitlines(s);
  std::string out;
  if (flag(a[2], false)) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (flag(a[1], false)) out = indention + out;
  return Value(std::move(out), v.is_safe());
}

// Jinja's title filter capitalises after runs of whitespace and -({[<, unlike str.title.
Value filter_title(const Value& v, CallArgs& args) {
  bind_args(args, "title", {});
  const std::string s = py_str(v);
  std::string out, word;
  auto flush = [&] {
    if (!word.empty()) out += py_capitalize(word);  // item[0].upper() + item[1:].lower()
    word.clear();
  };
  for (const char c : s) {
    if (std::string_view(" \t\n\r\f\v-({[<").find(c) != std::string_view::npos) {
      flush();
      out += c;
    } else {
      word += c;
    }
  }
  flush();
  return Value(std::move(out));
}

Value filter_select(const Value& v, CallArgs& args, bool by_attribute, bool keep) {
  if (!v.truthy()) return Value::generator({});  // Jinja skips falsy input (None included) unchecked
  if (by_attribute && args.positional.empty()) throw TemplateError("selectattr/rejectattr need an attribute name");
  const std::string attribute = by_attribute ? attribute_arg(args.positional[0]) : "";
  const size_t test_at = by_attribute ? 1 : 0;
  std::string test;
  CallArgs test_args;
  if (args.positional.size() > test_at) {
    if (!args.positional[test_at].is_string()) throw TemplateError("the test name must be a string");
    test = args.positional[test_at].as_string();
    if (!is_known_test(test)) throw TemplateError(fmt::format("unsupported test '{}'", test));
    test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(test_at + 1), args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  for (const Value& item : iterate(v)) {
    const Value subject = by_attribute ? get_attribute_path(item, attribute) : item;
    CallArgs call = test_args;
    const bool passed = test.empty() ? subject.truthy() : apply_test(test, subject, call);
    if (passed == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value filter_map(const Value& v, CallArgs& args) {
  List out;
  if (!v.truthy()) return Value::generator({});  // as Jinja: falsy input maps to nothing
  for (auto& [key, value] : args.keyword) {
    if (key != "attribute" && key != "default")
      throw TemplateError(fmt::format("map() got an unexpected keyword argument '{}'", key));
  }
  const auto attribute_it =
      std::find_if(args.keyword.begin(), args.keyword.end(), [](auto& kv) { return kv.first == "attribute"; });
  if (attribute_it != args.keyword.end()) {
    const std::string attribute = attribute_arg(attribute_it->second);
    std::optional<Value> fallback;
    for (auto& [key, value] : args.keyword) {
      if (key == "default") fallback = value;
    }
    for (const Value& item : iterate(v)) {
      Value mapped = get_attribute_path(item, attribute);
      out.push_back(mapped.is_undefined() && fallback ? *fallback : mapped);
    }
    return Value::generator(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    throw TemplateError("map() needs a filter name or attribute=");
  const std::string filter = args.positional[0].as_string();
  if (!is_known_filter(filter)) throw TemplateError(fmt::format("unsupported filter '{}'", filter));
  for (const Value& item : iterate(v)) {
    CallArgs call;
    call.positional.assign(args.positional.begin() + 1, args.positional.end());
    out.push_back(apply_filter(filter, item, call));
  }
  return Value::generator(std::move(out));
}

Value filter_sort(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = flag(a[0], false), case_sensitive = flag(a[1], false);
  const std::string attribute = attribute_arg(a[2]);
  List items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) keyed.emplace_back(sort_key(item, attribute, case_sensitive), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? py_compare(y.first, x.first) < 0 : py_compare(x.first, y.first) < 0;
  });
  List out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value filter_unique(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = flag(a[0], false);
  const std::string attribute = attribute_arg(a[1]);
  List out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value filter_min_max(const Value& v, CallArgs& args, bool want_max) {
  Bound a = bind_args(args, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool case_sensitive = flag(a[0], false);
  const std::string attribute = attribute_arg(a[1]);
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const int c =
        py_compare(sort_key(items[i], attribute, case_sensitive), sort_key(items[best], attribute, case_sensitive));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

// `value | format(args)`: printf-style, the subset %s %r %d %i %%.
Value filter_format(const Value& v, CallArgs& args) {
  const std::string f = py_str(v);
  std::string out;
  size_t next_arg = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (i + 1 == f.size()) throw TemplateError("format: incomplete format");
    const char spec = f[++i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (spec != 's' && spec != 'r' && spec != 'd' && spec != 'i') {
      throw TemplateError(fmt::format("unsupported construct: format specifier '%{}'", spec));
    }
    if (next_arg >= args.positional.size()) throw TemplateError("format: not enough arguments for format string");
    const Value& arg = args.positional[next_arg++];
    if (spec == 's')
      out += py_str(arg);
    else if (spec == 'r')
      out += py_repr(arg);
    else if (arg.is_number())
      out += std::to_string(arg.is_float() ? static_cast<int64_t>(arg.as_float()) : arg.as_int());
    else
      throw TemplateError("format: %d format: a real number is required");
  }
  if (next_arg < args.positional.size())
    throw TemplateError("format: not all arguments converted during string formatting");
  return Value(std::move(out));
}

Value filter_abs(const Value& v, CallArgs& args) {
  bind_args(args, "abs", {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return v.as_int() < 0 ? unary_minus(v) : Value(v.as_int());
  require_defined(v);
  throw TemplateError(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value filter_attr(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "attr", {"name"});
  const std::string name = attribute_arg(a[0]);
  require_defined(v);
  if (v.is_namespace()) {
    if (const Value* x = v.as_dict().find(name)) return *x;
  }
  return get_method(v, name);
}

Value filter_capitalize(const Value& v, CallArgs& args) {
  bind_args(args, "capitalize", {});
  return Value(py_capitalize(py_str(v)));
}

Value filter_center(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "center", {"width"});
  const std::string s = py_str(v);
  const int64_t width = a[0] ? to_index(*a[0], "width") : 80;
  const int64_t pad = width - static_cast<int64_t>(py_len(s));
  if (pad <= 0) return Value(s);
  const int64_t left = pad / 2 + (pad & width & 1);  // CPython's str.center split
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Value filter_default(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "default", {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (flag(a[1], false) && !v.truthy());
  return use_default ? (a[0] ? *a[0] : Value("")) : v;
}

Value filter_dictsort(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw TemplateError("dictsort: you can only sort by either 'key' or 'value'");
  const bool by_value = a[1] && a[1]->is_string() && a[1]->as_string() == "value";
  const bool case_sensitive = flag(a[0], false), reverse = flag(a[2], false);
  List pairs;
  for (const auto& [key, value] : v.as_dict().items) pairs.push_back(Value::tuple({key, value}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(x.as_list()[by_value ? 1 : 0], "", case_sensitive);
    const Value ky = sort_key(y.as_list()[by_value ? 1 : 0], "", case_sensitive);
    return reverse ? py_compare(ky, kx) < 0 : py_compare(kx, ky) < 0;
  });
  return Value::list(std::move(pairs));
}

Value filter_escape(const Value& v, CallArgs& args) {
  bind_args(args, "escape", {});
  return v.is_safe() ? v : Value(html_escape(py_str(v)), true);
}

Value filter_first(const Value& v, CallArgs& args) {
  bind_args(args, "first", {});
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_items(const Value& v, CallArgs& args) {
  bind_args(args, "items", {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
  List pairs;
  for (const auto& [key, value] : v.as_dict().items) pairs.push_back(Value::tuple({key, value}));
  return Value::generator(std::move(pairs));
}

Value filter_join(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "join", {"d", "attribute"});
  const std::string separator = a[0] ? py_str(*a[0]) : "";
  const std::string attribute = attribute_arg(a[1]);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += separator;
    first = false;
    out += py_str(attribute.empty() ? item : get_attribute_path(item, attribute));
    if (out.size() > kMaxStringBytes) throw TemplateError("string result too large");
  }
  return Value(std::move(out));
}

Value filter_last(const Value& v, CallArgs& args) {
  bind_args(args, "last", {});
  if (v.is_generator()) throw TemplateError("'generator' object is not reversible");
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_length(const Value& v, CallArgs& args) {
  bind_args(args, "length", {});
  return Value(py_length(v));
}

Value filter_list(const Value& v, CallArgs& args) {
  bind_args(args, "list", {});
  return Value::list(iterate(v));
}

Value filter_lower(const Value& v, CallArgs& args) {
  bind_args(args, "lower", {});
  return Value(py_lower(py_str(v)));
}

Value filter_replace(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "replace", {"old", "new", "count"});
  if (!a[0] || !a[1]) throw TemplateError("replace() needs old and new");
  const int64_t count = a[2] && !a[2]->is_none() ? to_index(*a[2], "count") : -1;
  std::string out = py_replace(py_str(v), py_str(*a[0]), py_str(*a[1]), count);
  if (out.size() > kMaxStringBytes) throw TemplateError("string result too large");
  return Value(std::move(out));
}

Value filter_reverse(const Value& v, CallArgs& args) {
  bind_args(args, "reverse", {});
  if (v.is_string()) return get_slice(v, Value(), Value(), Value(int64_t{-1}));
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_round(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "round", {"precision", "method"});
  const int64_t precision = a[0] ? to_index(*a[0], "precision") : 0;
  const std::string method = a[1] ? py_str(*a[1]) : "common";
  require_defined(v);
  if (!v.is_number()) throw TemplateError("round() needs a number");
  if (method == "common" && !v.is_float()) return Value(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value filter_safe(const Value& v, CallArgs& args) {
  bind_args(args, "safe", {});
  return Value(py_str(v), true);
}

Value filter_string(const Value& v, CallArgs& args) {
  bind_args(args, "string", {});
  return v.is_string() ? v : Value(py_str(v));
}

Value filter_sum(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "sum", {"attribute", "start"});
  const std::string attribute = attribute_arg(a[0]);
  Value total = a[1] ? *a[1] : Value(int64_t{0});
  for (const Value& item : iterate(v)) {
    total = binary_op("+", total, attribute.empty() ? item : get_attribute_path(item, attribute));
  }
  return total;
}

Value filter_trim(const Value& v, CallArgs& args) {
  Bound a = bind_args(args, "trim", {"chars"});
  const std::optional<std::string> chars =
      a[0] && !a[0]->is_none() ? std::optional<std::string>(py_str(*a[0])) : std::nullopt;
  return Value(py_strip(py_str(v), chars, true, true), v.is_safe());
}

Value filter_upper(const Value& v, CallArgs& args) {
  bind_args(args, "upper", {});
  return Value(py_upper(py_str(v)));
}

Value filter_wordcount(const Value& v, CallArgs& args) {
  bind_args(args, "wordcount", {});
  int64_t n = 0;
  bool in_word = false;
  for (const char32_t c : decode_utf8(py_str(v))) {
    const bool word = is_word_char(c);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> table = {
      {"abs", filter_abs},
      {"attr", filter_attr},
      {"capitalize", filter_capitalize},
      {"center", filter_center},
      {"default", filter_default},
      {"dictsort", filter_dictsort},
      {"escape", filter_escape},
      {"first", filter_first},
      {"float", filter_float},
      {"format", filter_format},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower", filter_lower},
      {"map", filter_map},
      {"max", [](const Value& v, CallArgs& args) { return filter_min_max(v, args, true); }},
      {"min", [](const Value& v, CallArgs& args) { return filter_min_max(v, args, false); }},
      {"reject", [](const Value& v, CallArgs& args) { return filter_select(v, args, false, false); }},
      {"rejectattr", [](const Value& v, CallArgs& args) { return filter_select(v, args, true, false); }},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", filter_safe},
      {"select", [](const Value& v, CallArgs& args) { return filter_select(v, args, false, true); }},
      {"selectattr", [](const Value& v, CallArgs& args) { return filter_select(v, args, true, true); }},
      {"sort", filter_sort},
      {"string", filter_string},
      {"sum", filter_sum},
      {"title", filter_title},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"unique", filter_unique},
      {"upper", filter_upper},
      {"wordcount", filter_wordcount},
  };
  return table;
}

const Filter* find_filter(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {{"d", "default"}, {"e", "escape"}, {"count", "length"}};
  const auto alias = aliases.find(name);
  const auto it = filters().find(alias == aliases.end() ? name : alias->second);
  return it == filters().end() ? nullptr : &it->second;
}

Value one_arg(CallArgs& args, const std::string& test) {
  Bound a = bind_args(args, test, {"other"});
  if (!a[0]) throw TemplateError(fmt::format("test '{}' needs an argument", test));
  return *a[0];
}

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> table = {
      {"boolean", [](const Value& v, CallArgs&) { return v.is_bool(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_callable(); }},
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"divisibleby",
       [](const Value& v, CallArgs& args) {
         const Value n = one_arg(args, "divisibleby");
         return py_equal(binary_op("%", v, n), Value(int64_t{0}));
       }},
      {"eq", [](const Value& v, CallArgs& args) { return py_equal(v, one_arg(args, "eq")); }},
      {"escaped", [](const Value& v, CallArgs&) { return v.is_safe(); }},
      {"even",
       [](const Value& v, CallArgs&) { return py_equal(binary_op("%", v, Value(int64_t{2})), Value(int64_t{0})); }},
      {"false", [](const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"float", [](const Value& v, CallArgs&) { return v.is_float(); }},
      {"ge", [](const Value& v, CallArgs& args) { return py_compare(v, one_arg(args, "ge")) >= 0; }},
      {"gt", [](const Value& v, CallArgs& args) { return py_compare(v, one_arg(args, "gt")) > 0; }},
      {"in", [](const Value& v, CallArgs& args) { return contains(one_arg(args, "in"), v); }},
      {"integer", [](const Value& v, CallArgs&) { return v.is_int(); }},
      {"iterable",
       [](const Value& v, CallArgs&) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
      {"le", [](const Value& v, CallArgs& args) { return py_compare(v, one_arg(args, "le")) <= 0; }},
      {"lower",
       [](const Value& v, CallArgs&) {
         const std::string s = py_str(v);
         return s.find_first_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos && py_lower(s) == s;
       }},
      {"lt", [](const Value& v, CallArgs& args) { return py_compare(v, one_arg(args, "lt")) < 0; }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict(); }},
      {"ne", [](const Value& v, CallArgs& args) { return !py_equal(v, one_arg(args, "ne")); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"odd",
       [](const Value& v, CallArgs&) { return py_equal(binary_op("%", v, Value(int64_t{2})), Value(int64_t{1})); }},
      {"sameas", [](const Value& v, CallArgs& args) { return v.same_as(one_arg(args, "sameas")); }},
      {"sequence",
       [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_dict() || (v.is_list() && !v.is_generator());
       }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"true", [](const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"upper",
       [](const Value& v, CallArgs&) {
         const std::string s = py_str(v);
         return s.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos && py_upper(s) == s;
       }},
  };
  return table;
}

const Test* find_test(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {{"==", "eq"}, {"equalto", "eq"},     {"!=", "ne"},
                                                             {">", "gt"},  {"greaterthan", "gt"}, {">=", "ge"},
                                                             {"<", "lt"},  {"lessthan", "lt"},    {"<=", "le"}};
  const auto alias = aliases.find(name);
  const auto it = tests().find(alias == aliases.end() ? name : alias->second);
  return it == tests().end() ? nullptr : &it->second;
}

}  // namespace

bool is_known_filter(const std::string& name) { return find_filter(name) != nullptr; }
bool is_known_test(const std::string& name) { return find_test(name) != nullptr; }

Value apply_filter(const std::string& name, const Value& value, CallArgs& args) {
  const Filter* filter = find_filter(name);
  if (filter == nullptr) throw TemplateError(fmt::format("unsupported filter '{}'", name));
  return (*filter)(value, args);
}

bool apply_test(const std::string& name, const Value& value, CallArgs& args) {
  const Test* test = find_test(name);
  if (test == nullptr) throw TemplateError(fmt::format("unsupported test '{}'", name));
  return (*test)(value, args);
}

}  // namespace tandem::jinja
