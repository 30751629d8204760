// Global functions available to every template, as transformers' sandboxed environment
// provides them. range() is capped like Jinja's sandbox (100000 items).
#include <ctime>

#include <fmt/format.h>

#include "chat/jinja/evaluator.h"
#include "chat/jinja/operators.h"

namespace tandem::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;

Value range_function(CallArgs& args) {
  if (!args.keyword.empty()) throw TemplateError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) throw TemplateError("range expected 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = to_index(args.positional[0], "range() argument");
  } else {
    start = to_index(args.positional[0], "range() argument");
    stop = to_index(args.positional[1], "range() argument");
    if (args.positional.size() == 3) step = to_index(args.positional[2], "range() argument");
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  const double count =
      step > 0
          ? std::max(0.0, (static_cast<double>(stop) - static_cast<double>(start) + static_cast<double>(step) - 1) /
                              static_cast<double>(step))
          : std::max(0.0, (static_cast<double>(start) - static_cast<double>(stop) - static_cast<double>(step) - 1) /
                              static_cast<double>(-step));
  if (count > kMaxRange)
    throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.emplace_back(i);
  return Value::list(std::move(items));
}

Value namespace_function(CallArgs& args) {
  Value ns = Value::namespace_object();
  if (args.positional.size() > 1) throw TemplateError("namespace() takes at most one positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) throw TemplateError("namespace() positional argument must be a dict");
    ns.as_dict().items = args.positional[0].as_dict().items;
  }
  for (auto& [key, value] : args.keyword) ns.as_dict().set(Value(key), value);
  return ns;
}

Value dict_function(CallArgs& args) {
  Value dict = Value::dict();
  if (args.positional.size() > 1) throw TemplateError("dict expected at most 1 argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) throw TemplateError("unsupported construct: dict() from a non-dict");
    dict.as_dict().items = args.positional[0].as_dict().items;
  }
  for (auto& [key, value] : args.keyword) dict.as_dict().set(Value(key), value);
  return dict;
}

Value raise_exception_function(CallArgs& args) {
  const std::string message = args.positional.empty() ? "" : py_str(args.positional[0]);
  throw TemplateError(message);
}

// datetime.now().strftime(fmt) in local time, as transformers' strftime_now does.
Value strftime_now_function(CallArgs& args) {
  if (args.positional.size() != 1 || !args.positional[0].is_string()) {
    throw TemplateError("strftime_now() takes one format string");
  }
  const std::string& format = args.positional[0].as_string();
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(format.size() * 4 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
  if (n == 0 && !format.empty()) throw TemplateError("strftime_now(): format produced no output or is too long");
  out.resize(n);
  return Value(std::move(out));
}

}  // namespace

std::vector<std::pair<std::string, Value>> builtin_globals() {
  return {
      {"range", Value::callable("range", range_function)},
      {"namespace", Value::callable("namespace", namespace_function)},
      {"dict", Value::callable("dict", dict_function)},
      {"raise_exception", Value::callable("raise_exception", raise_exception_function)},
      {"strftime_now", Value::callable("strftime_now", strftime_now_function)},
  };
}

}  // namespace tandem::jinja
