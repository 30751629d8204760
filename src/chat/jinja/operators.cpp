// Value operations with Python's rules (see operators.h): int overflow and oversized
// results are errors rather than silent wraparound, Markup strings escape what is added to
// them, and lookups that fail yield Undefined exactly where Jinja's getattr/getitem do.
#include "chat/jinja/operators.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "chat/jinja/py_string.h"

namespace tandem::jinja {
namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
}

void check_string_size(size_t n) {
  if (n > kMaxStringBytes) throw TemplateError("string result too large");
}

// Python ints do not overflow; ours are 64-bit, so overflow is an error, never a wrap.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t result = 0;
  if (op(a, b, &result)) throw TemplateError("integer overflow");
  return result;
}
bool add_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// Python's floor division and modulo (sign follows the divisor).
int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double float_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value(std::string(), seq.is_safe()) : Value::list();
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > kMaxStringBytes / s.size()) check_string_size(kMaxStringBytes + 1);
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out), seq.is_safe());
  }
  const List& items = seq.as_list();
  if (!items.empty() && static_cast<uint64_t>(n) > kMaxListItems / items.size()) {
    throw TemplateError("list result too large");
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out));
}

// Python index normalisation for a[i]: negative counts from the end; nullopt if outside.
std::optional<size_t> normalize_index(int64_t i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(i);
}

// Python slice.indices(): the positions a[start:stop:step] visits.
std::vector<size_t> slice_positions(const Value& start, const Value& stop, const Value& step, size_t size) {
  auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return to_index(v, "slice index");
  };
  const int64_t n = static_cast<int64_t>(size);
  const int64_t s = bound(step).value_or(1);
  if (s == 0) throw TemplateError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (s > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t begin = clamp(bound(start), s > 0 ? 0 : n - 1);
  const int64_t end = clamp(bound(stop), s > 0 ? n : -1);
  std::vector<size_t> positions;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) positions.push_back(static_cast<size_t>(i));
  return positions;
}

}  // namespace

void require_defined(const Value& v) {
  if (v.is_undefined()) {
    throw TemplateError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
  }
}

int64_t to_index(const Value& v, const std::string& what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  require_defined(v);
  throw TemplateError(fmt::format("{} must be an integer, not '{}'", what, type_name(v)));
}

Value get_attr(const Value& obj, const std::string& name) {
  require_defined(obj);
  Value method = get_method(obj, name);
  if (!method.is_undefined() || !method.undefined_hint().empty()) return method;
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", type_name(obj), name));
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if ((obj.is_list() && !obj.is_generator()) || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      if (obj.is_list()) {
        if (auto i = normalize_index(key.as_int(), obj.as_list().size())) return obj.as_list()[*i];
      } else {
        const std::vector<size_t> offsets = codepoint_offsets(obj.as_string());
        if (auto i = normalize_index(key.as_int(), offsets.size() - 1)) {
          return Value(obj.as_string().substr(offsets[*i], offsets[*i + 1] - offsets[*i]));
        }
      }
    }
  }
  if (key.is_string()) {
    if (obj.is_namespace()) {
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
    }
    Value method = get_method(obj, key.as_string());
    if (!method.is_undefined() || !method.undefined_hint().empty()) return method;
  }
  return Value::undefined(fmt::format("'{}' has no item {}", type_name(obj), py_repr(key)));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  require_defined(obj);
  if (obj.is_list() && !obj.is_generator()) {
    const List& items = obj.as_list();
    List out;
    for (size_t i : slice_positions(start, stop, step, items.size())) out.push_back(items[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> offsets = codepoint_offsets(s);
    std::string out;
    for (size_t i : slice_positions(start, stop, step, offsets.size() - 1)) {
      out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    return Value(std::move(out), obj.is_safe());
  }
  return Value::undefined(fmt::format("'{}' cannot be sliced", type_name(obj)));
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = py_str(a) + py_str(b);
    check_string_size(out.size());
    return Value(std::move(out));
  }
  require_defined(a);
  require_defined(b);
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value(checked(add_overflow, a.as_int(), b.as_int()));
    if (numbers) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_string().size() + b.as_string().size());
      if (a.is_safe() == b.is_safe()) return Value(a.as_string() + b.as_string(), a.is_safe());
      // markupsafe: adding a plain str to a Markup escapes the plain side.
      const std::string left = a.is_safe() ? a.as_string() : html_escape(a.as_string());
      const std::string right = b.is_safe() ? b.as_string() : html_escape(b.as_string());
      return Value(left + right, true);
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator() && a.is_tuple() == b.is_tuple()) {
      if (a.as_list().size() + b.as_list().size() > kMaxListItems) throw TemplateError("list result too large");
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    type_error(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(checked(mul_overflow, a.as_int(), b.as_int()));
    if (numbers) return Value(a.as_float() * b.as_float());
    if ((a.is_string() || (a.is_list() && !a.is_generator())) && (b.is_int() || b.is_bool()))
      return repeat(a, b.as_int());
    if ((b.is_string() || (b.is_list() && !b.is_generator())) && (a.is_int() || a.is_bool()))
      return repeat(b, a.as_int());
    type_error(op, a, b);
  }
  if (!numbers) {
    if (op == "%" && a.is_string())
      throw TemplateError("unsupported construct: printf-style '%' formatting of a string");
    type_error(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(checked(sub_overflow, a.as_int(), b.as_int()));
    return Value(a.as_float() - b.as_float());
  }
  if (op == "/") {
    if (b.as_float() == 0) throw TemplateError("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) throw TemplateError("integer division or modulo by zero");
    if (ints) return Value(op == "//" ? floor_div(a.as_int(), b.as_int()) : floor_mod(a.as_int(), b.as_int()));
    const double m = float_mod(a.as_float(), b.as_float());
    if (op == "%") return Value(m);
    return Value(std::floor(a.as_float() / b.as_float()));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) {
        result = checked(mul_overflow, result, a.as_int());
        if (result == 0 || result == 1) break;
      }
      return Value(result);
    }
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  throw TemplateError(fmt::format("unknown operator '{}'", op));
}

Value unary_minus(const Value& v) {
  require_defined(v);
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow");
    return Value(-v.as_int());
  }
  if (v.is_float()) return Value(-v.as_float());
  throw TemplateError(fmt::format("bad operand type for unary -: '{}'", type_name(v)));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;  // Undefined iterates as empty
    case Kind::kString:
      if (!item.is_string()) {
        require_defined(item);
        throw TemplateError(fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.as_list()) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case Kind::kDict: return container.as_dict().find(item) != nullptr;
    default: throw TemplateError(fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

Value call_value(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.as_callable().fn(args);
  require_defined(callee);
  throw TemplateError(fmt::format("'{}' object is not callable", type_name(callee)));
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: return v.as_list();
    case Kind::kDict: {
      List keys;
      for (const auto& [key, value] : v.as_dict().items) keys.push_back(key);
      return keys;
    }
    case Kind::kString: {
      List chars;
      const std::vector<size_t> offsets = codepoint_offsets(v.as_string());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.emplace_back(v.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
      return chars;
    }
    default: throw TemplateError(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

int64_t py_length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(py_len(v.as_string()));
    case Kind::kList:
      if (v.is_generator()) throw TemplateError("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().items.size());
    default: throw TemplateError(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

std::vector<std::optional<Value>> bind_args(CallArgs& args, const std::string& function,
                                            const std::vector<std::string>& params) {
  if (args.positional.size() > params.size()) {
    throw TemplateError(
        fmt::format("{}() takes at most {} argument(s) ({} given)", function, params.size(), args.positional.size()));
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (auto& [key, value] : args.keyword) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) {
      throw TemplateError(fmt::format("{}() got an unexpected keyword argument '{}'", function, key));
    }
    const size_t i = static_cast<size_t>(it - params.begin());
    if (bound[i]) throw TemplateError(fmt::format("{}() got multiple values for argument '{}'", function, key));
    bound[i] = value;
  }
  return bound;
}

}  // namespace tandem::jinja
