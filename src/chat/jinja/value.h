// The dynamic value a chat template computes with: Python's none, bool, int, float, str,
// list, dict (insertion-ordered), Jinja's Undefined and namespace, and callables (macros,
// bound methods, globals). Lists, dicts and namespaces are shared by reference, as in
// Python, so `set ns.x = ...` is seen by every holder. No evaluation logic lives here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/template_error.h"

namespace tandem::jinja {

class Value;
struct Dict;
using List = std::vector<Value>;

// Arguments of one call: positional, then keyword in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFunction = std::function<Value(CallArgs&)>;
struct Callable {
  std::string name;
  NativeFunction fn;
};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

class Value {
 public:
  Value() = default;  // Undefined
  Value(bool b) : kind_(Kind::kBool), int_(b) {}
  Value(int v) : kind_(Kind::kInt), int_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}
  Value(double v) : kind_(Kind::kFloat), float_(v) {}
  Value(std::string s, bool safe = false) : kind_(Kind::kString), safe_(safe), str_(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}

  // `hint` names what was undefined, for the error raised when it is used.
  static Value undefined(std::string hint) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
  }
  static Value list(List items = {});
  // A Python generator (what map/select/items filters return): iterable like a list, but
  // always true, without len() and not JSON-serialisable, as in Jinja.
  static Value generator(List items);
  // A Python tuple: a read-only list that prints as (a, b) and is never == a list.
  static Value tuple(List items);
  static Value dict();
  static Value namespace_object();
  static Value callable(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_generator() const { return generator_; }
  bool is_tuple() const { return tuple_; }
  // A markupsafe.Markup string (from |safe): `+` with a plain string escapes the other side.
  bool is_safe() const { return safe_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // also bools (Python: bool is an int)
  double as_float() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }
  const std::string& undefined_hint() const { return str_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }  // dicts and namespaces
  const Callable& as_callable() const { return *callable_; }

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Same object (lists/dicts by identity, scalars by value): Jinja's `sameas`.
  bool same_as(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool safe_ = false;
  bool generator_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> callable_;
};

// An insertion-ordered dict; keys compare with Python's == (1 == 1.0 == True). Templates
// hold small dicts, so a linear search beats hashing arbitrary values.
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value value);
};

// Python `==` (never throws; different kinds are unequal, numbers compare by value).
bool py_equal(const Value& a, const Value& b);
// Python `<`-style ordering: negative, 0 or positive; TemplateError when Python raises.
int py_compare(const Value& a, const Value& b);
// Python str() as Jinja prints it: None, True, 1.5, ['a', 1], {'k': 'v'}; Undefined is "".
std::string py_str(const Value& v);
// Python repr(): strings quoted, containers recursive.
std::string py_repr(const Value& v);
// Python repr() of a float: shortest round-trip digits, `1e-05`, `1.0`, `inf`.
std::string format_float(double x);
// Python's type name, for error messages.
std::string type_name(const Value& v);

}  // namespace tandem::jinja
