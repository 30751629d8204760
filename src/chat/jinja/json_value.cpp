// JSON in and out of template Values (see json_value.h). Output follows CPython's json
// module: separators, indentation, float repr, NaN/Infinity, key coercion to strings.
#include "chat/jinja/json_value.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja/py_string.h"

namespace tandem::jinja {
namespace {

template <typename Json>
Value from_json_impl(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = json.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(json.template get<double>());
    case nlohmann::json::value_t::string: return Value(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_impl(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value dict = Value::dict();
      for (auto it = json.begin(); it != json.end(); ++it) {
        dict.as_dict().items.emplace_back(Value(it.key()), from_json_impl(it.value()));
      }
      return dict;
    }
    default: throw TemplateError("unsupported JSON value (binary or discarded)");
  }
}

std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Kind::kString: return key.as_string();
    case Kind::kNone: return "null";
    case Kind::kBool: return key.as_bool() ? "true" : "false";
    case Kind::kInt: return std::to_string(key.as_int());
    case Kind::kFloat: return format_float(key.as_float());
    default: throw TemplateError(fmt::format("keys must be str, int, float, bool or None, not {}", type_name(key)));
  }
}

void write_json(const Value& v, const JsonFormat& format, int depth, std::string& out) {
  if (depth > 256) throw TemplateError("tojson: value nested too deeply");
  auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *format.indent;
  };
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.as_int()); return;
    case Kind::kFloat: {
      const double x = v.as_float();
      if (std::isnan(x))
        out += "NaN";
      else if (std::isinf(x))
        out += x > 0 ? "Infinity" : "-Infinity";
      else
        out += format_float(x);
      return;
    }
    case Kind::kString: out += json_string(v.as_string()); return;
    case Kind::kList: {
      if (v.is_generator()) throw TemplateError("tojson: Object of type generator is not JSON serializable");
      const List& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += format.item_separator;
        if (format.indent) newline(depth + 1);
        write_json(items[i], format, depth + 1, out);
      }
      if (format.indent) newline(depth);
      out += ']';
      return;
    }
    case Kind::kDict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [key, value] : v.as_dict().items) entries.emplace_back(json_key(key), &value);
      if (format.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += format.item_separator;
        if (format.indent) newline(depth + 1);
        out += json_string(entries[i].first);
        out += format.key_separator;
        write_json(*entries[i].second, format, depth + 1, out);
      }
      if (format.indent) newline(depth);
      out += '}';
      return;
    }
    default: throw TemplateError(fmt::format("tojson: Object of type {} is not JSON serializable", type_name(v)));
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) { return from_json_impl(json); }
Value value_from_json(const nlohmann::json& json) { return from_json_impl(json); }

std::string to_json(const Value& value, const JsonFormat& format) {
  std::string out;
  write_json(value, format, 0, out);
  return out;
}

}  // namespace tandem::jinja
