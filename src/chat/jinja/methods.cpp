// Python methods reachable from templates (`s.startswith(...)`, `d.items()`, ...), bound to
// their object as callables. Like Jinja's ImmutableSandboxedEnvironment, methods that
// mutate a list or dict are unreachable: looking one up gives an Undefined whose use fails.
#include <algorithm>

#include <fmt/format.h>

#include "chat/jinja/operators.h"
#include "chat/jinja/py_string.h"

namespace tandem::jinja {
namespace {

using Params = std::vector<std::string>;

std::optional<std::string> optional_string(const std::optional<Value>& v, const std::string& what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw TemplateError(fmt::format("{} must be str or None", what));
  return v->as_string();
}

const std::string& string_arg(const std::optional<Value>& v, const std::string& what) {
  if (!v) throw TemplateError(fmt::format("{} missing a required argument", what));
  if (!v->is_string()) throw TemplateError(fmt::format("{} expects a str, not '{}'", what, type_name(*v)));
  return v->as_string();
}

// str.startswith / endswith with a str or a tuple of them.
bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  if (affix.is_list()) {
    return std::any_of(affix.as_list().begin(), affix.as_list().end(),
                       [&](const Value& a) { return affix_matches(s, a, prefix); });
  }
  if (!affix.is_string()) throw TemplateError("startswith/endswith expects a str or a tuple of str");
  return prefix ? s.starts_with(affix.as_string()) : s.ends_with(affix.as_string());
}

// str.format with {} / {0} / {name} fields and {{ }} escapes; format specs are unsupported.
std::string py_format(const std::string& fmt_text, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt_text.size(); ++i) {
    const char c = fmt_text[i];
    if (c == '}') {
      if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt_text.find('}', i);
    if (close == std::string::npos) throw TemplateError("str.format: single '{' encountered");
    const std::string field = fmt_text.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw TemplateError("unsupported construct: str.format field '{" + field + "}'");
    }
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) throw TemplateError("str.format: replacement index out of range");
      value = &args.positional[index];
    } else {
      for (auto& [key, v] : args.keyword) {
        if (key == field) value = &v;
      }
      if (value == nullptr) throw TemplateError(fmt::format("str.format: missing key '{}'", field));
    }
    out += py_str(*value);
    i = close;
  }
  return out;
}

template <typename Predicate>
bool all_chars(const std::string& s, Predicate p) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return p(static_cast<unsigned char>(c)); });
}

Value string_method(const Value& self, const std::string& name) {
  const std::string s = self.as_string();
  auto bind = [&](Params params, std::function<Value(std::vector<std::optional<Value>>&, CallArgs&)> body) {
    return Value::callable("str." + name, [name, params, body](CallArgs& args) {
      std::vector<std::optional<Value>> bound = bind_args(args, name, params);
      return body(bound, args);
    });
  };
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bind({"prefix"}, [s, prefix](auto& a, CallArgs&) {
      if (!a[0]) throw TemplateError("startswith/endswith takes one argument");
      return Value(affix_matches(s, *a[0], prefix));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind({"chars"}, [s, left, right](auto& a, CallArgs&) {
      return Value(py_strip(s, optional_string(a[0], "strip chars"), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool from_right = name == "rsplit";
    return bind({"sep", "maxsplit"}, [s, from_right](auto& a, CallArgs&) {
      const std::optional<std::string> sep = optional_string(a[0], "split sep");
      if (sep && sep->empty()) throw TemplateError("split: empty separator");
      const int64_t maxsplit = a[1] ? to_index(*a[1], "maxsplit") : -1;
      List parts;
      for (std::string& p : py_split(s, sep, maxsplit, from_right)) parts.emplace_back(std::move(p));
      return Value::list(std::move(parts));
    });
  }
  if (name == "splitlines") {
    return bind({}, [s](auto&, CallArgs&) {
      List lines;
      for (std::string& l : py_splitlines(s)) lines.emplace_back(std::move(l));
      return Value::list(std::move(lines));
    });
  }
  if (name == "upper") return bind({}, [s](auto&, CallArgs&) { return Value(py_upper(s)); });
  if (name == "lower") return bind({}, [s](auto&, CallArgs&) { return Value(py_lower(s)); });
  if (name == "title") return bind({}, [s](auto&, CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize") return bind({}, [s](auto&, CallArgs&) { return Value(py_capitalize(s)); });
  if (name == "replace") {
    return bind({"old", "new", "count"}, [s](auto& a, CallArgs&) {
      const int64_t count = a[2] ? to_index(*a[2], "count") : -1;
      return Value(py_replace(s, string_arg(a[0], "replace"), string_arg(a[1], "replace"), count));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return bind({"sub"}, [s, name](auto& a, CallArgs&) {
      const std::string& sub = string_arg(a[0], name);
      if (name == "count") {
        if (sub.empty()) return Value(static_cast<int64_t>(py_len(s) + 1));
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value(n);
      }
      const size_t p = name == "find" ? s.find(sub) : s.rfind(sub);
      return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(py_len(s.substr(0, p))));
    });
  }
  if (name == "join") {
    return bind({"iterable"}, [s](auto& a, CallArgs&) {
      if (!a[0]) throw TemplateError("join takes one argument");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(*a[0])) {
        if (!item.is_string()) throw TemplateError("str.join: sequence item is not a str");
        if (!first) out += s;
        first = false;
        out += item.as_string();
      }
      return Value(std::move(out));
    });
  }
  if (name == "format") {
    return Value::callable("str.format", [s](CallArgs& args) { return Value(py_format(s, args)); });
  }
  if (name == "isdigit")
    return bind({}, [s](auto&, CallArgs&) { return Value(all_chars(s, [](int c) { return c >= '0' && c <= '9'; })); });
  if (name == "isspace")
    return bind({}, [s](auto&, CallArgs&) {
      return Value(all_chars(s, [](int c) { return is_py_space(static_cast<char32_t>(c)); }));
    });
  if (name == "isalpha")
    return bind({}, [s](auto&, CallArgs&) { return Value(all_chars(s, [](int c) { return std::isalpha(c) != 0; })); });
  if (name == "isalnum")
    return bind({}, [s](auto&, CallArgs&) { return Value(all_chars(s, [](int c) { return std::isalnum(c) != 0; })); });
  if (name == "islower")
    return bind({}, [s](auto&, CallArgs&) {
      return Value(s.find_first_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos && py_lower(s) == s);
    });
  if (name == "isupper")
    return bind({}, [s](auto&, CallArgs&) {
      return Value(s.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos && py_upper(s) == s);
    });
  return Value();
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::callable("dict." + name, [self, name](CallArgs& args) {
      bind_args(args, name, {});
      List out;
      for (const auto& [key, value] : self.as_dict().items) {
        if (name == "items")
          out.push_back(Value::tuple({key, value}));
        else
          out.push_back(name == "keys" ? key : value);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [self](CallArgs& args) {
      std::vector<std::optional<Value>> a = bind_args(args, "get", {"key", "default"});
      if (!a[0]) throw TemplateError("get expected at least 1 argument, got 0");
      if (const Value* v = self.as_dict().find(*a[0])) return *v;
      return a[1] ? *a[1] : Value::none();
    });
  }
  if (name == "copy") {
    return Value::callable("dict.copy", [self](CallArgs& args) {
      bind_args(args, "copy", {});
      Value copy = Value::dict();
      copy.as_dict().items = self.as_dict().items;
      return copy;
    });
  }
  return Value();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index" || name == "count") {
    return Value::callable("list." + name, [self, name](CallArgs& args) {
      std::vector<std::optional<Value>> a = bind_args(args, name, {"value"});
      if (!a[0]) throw TemplateError(fmt::format("{} takes exactly one argument", name));
      int64_t count = 0;
      const List& items = self.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!py_equal(items[i], *a[0])) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++count;
      }
      if (name == "index") throw TemplateError("list.index(x): x not in list");
      return Value(count);
    });
  }
  if (name == "copy") {
    return Value::callable("list.copy", [self](CallArgs& args) {
      bind_args(args, "copy", {});
      return Value::list(self.as_list());
    });
  }
  return Value();
}

bool is_mutating(const Value& obj, const std::string& name) {
  static const char* const kList[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  static const char* const kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.is_list() && !obj.is_generator()) {
    return std::any_of(std::begin(kList), std::end(kList), [&](const char* n) { return name == n; });
  }
  if (obj.is_dict()) {
    return std::any_of(std::begin(kDict), std::end(kDict), [&](const char* n) { return name == n; });
  }
  return false;
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (is_mutating(obj, name)) {
    // Jinja's sandbox answers with an Undefined that fails when used (called).
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe", name, type_name(obj)));
  }
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list() && !obj.is_generator()) return list_method(obj, name);
  return Value();
}

}  // namespace tandem::jinja
