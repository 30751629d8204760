// Jinja's filters (`x | trim`) and tests (`x is defined`) in the subset chat templates
// use, with the signatures and edge cases of Jinja 3.1 plus transformers' `tojson`
// override. The parser asks which names exist so unknown ones fail before rendering.
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace tandem::jinja {

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
bool apply_test(const std::string& name, const Value& value, CallArgs& args);

}  // namespace tandem::jinja
