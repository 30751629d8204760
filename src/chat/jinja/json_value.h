// Conversions between JSON documents and template Values: messages and tools come in as
// nlohmann JSON; `tojson` goes out as Python's json.dumps(ensure_ascii=False) writes it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/value.h"

namespace tandem::jinja {

// JSON → Value. ordered_json keeps the document's key order (what Python's json.load
// gives); plain nlohmann::json has already sorted keys alphabetically.
Value value_from_json(const nlohmann::ordered_json& json);
Value value_from_json(const nlohmann::json& json);

struct JsonFormat {
  std::optional<std::string> indent;  // the per-level indent text; absent: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Python json.dumps(value, ensure_ascii=False, ...). TemplateError for values JSON cannot
// hold (Undefined, callables, namespaces), as Python raises TypeError for them.
std::string to_json(const Value& value, const JsonFormat& format);

}  // namespace tandem::jinja
