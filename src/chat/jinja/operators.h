// Python/Jinja semantics of the operations expressions perform on Values: attribute and
// item lookup (sandboxed: mutating methods are unreachable), slicing, arithmetic,
// membership, iteration and calls. Pure functions of their arguments; no scopes here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace tandem::jinja {

// Caps that keep hostile templates from exhausting memory: every string, list and output
// a template builds stays below these.
inline constexpr size_t kMaxStringBytes = size_t{32} << 20;
inline constexpr size_t kMaxListItems = size_t{1} << 22;

// Throws Jinja's UndefinedError for an Undefined operand; a no-op otherwise.
void require_defined(const Value& v);

// `obj.name`: Python attributes first (methods), then items; Undefined when neither.
Value get_attr(const Value& obj, const std::string& name);
// `obj[key]`: items first, then attributes for string keys; Undefined when neither.
Value get_item(const Value& obj, const Value& key);
// `obj[start:stop:step]` (absent parts are Undefined).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Bound methods of str, dict and list (non-mutating ones only); Undefined otherwise.
Value get_method(const Value& obj, const std::string& name);

// + - * / // % ** ~ (and/or are short-circuited by the evaluator).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v);
bool contains(const Value& container, const Value& item);  // Python `item in container`
Value call_value(const Value& callee, CallArgs& args);
// The items a for loop (or list()) visits: list items, dict keys, string characters.
List iterate(const Value& v);
// len(); TemplateError where Python has no len().
int64_t py_length(const Value& v);

// Binds a builtin's arguments to its parameter names (Python call rules): one slot per
// parameter, absent where not given; throws on unknown keywords or too many arguments.
std::vector<std::optional<Value>> bind_args(CallArgs& args, const std::string& function,
                                            const std::vector<std::string>& params);
int64_t to_index(const Value& v, const std::string& what);  // an int argument

}  // namespace tandem::jinja
