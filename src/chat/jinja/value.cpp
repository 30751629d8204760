// Value construction and the Python object protocol templates rely on: truthiness, ==,
// ordering, str() and repr(). Output must match CPython byte for byte (floats included).
#include "chat/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "chat/jinja/py_string.h"

namespace tandem::jinja {

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::generator(List items) {
  Value v = list(std::move(items));
  v.generator_ = true;
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::dict() {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::namespace_object() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !str_.empty();
    case Kind::kList: return generator_ || !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

bool Value::same_as(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kList: return list_ == other.list_;
    case Kind::kDict:
    case Kind::kNamespace: return dict_ == other.dict_;
    case Kind::kCallable: return callable_ == other.callable_;
    default: return py_equal(*this, other);
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.as_string() == b.as_string();
    case Kind::kList: {
      if (a.is_generator() || b.is_generator()) return a.same_as(b);
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!py_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      // Python dict equality ignores order.
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (other == nullptr || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_as(b);
  }
}

int py_compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is Python's str order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw TemplateError(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b)));
}

std::string format_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then laid out as CPython's repr does:
  // positional for exponents in [-4, 16), otherwise d.ddde+XX.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::scientific);
  const std::string sci(buffer, result.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out +=
          digits.substr(0, static_cast<size_t>(exponent + 1)) + "." + digits.substr(static_cast<size_t>(exponent + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);  // not "." + ...: GCC 12 -Wrestrict, bug 105329
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return v.as_string();
    default: return py_repr(v);
  }
}

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(v.as_int());
    case Kind::kFloat: return format_float(v.as_float());
    case Kind::kString: return repr_string(v.as_string());
    case Kind::kList: {
      if (v.is_generator()) return "<generator object>";
      std::string out = v.is_tuple() ? "(" : "[";
      const List& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += py_repr(items[i]);
      }
      if (v.is_tuple()) return out + (items.size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(key) + ": " + py_repr(value);
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case Kind::kCallable: return fmt::format("<function {}>", v.as_callable().name);
  }
  return "";
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.is_generator() ? "generator" : (v.is_tuple() ? "tuple" : "list");
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "object";
}

}  // namespace tandem::jinja
