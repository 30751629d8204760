// Renders a parsed Template with a set of variables. Scoping follows Jinja: a for-loop
// iteration and a macro call each get a fresh scope whose assignments vanish at its end;
// `if` does not scope; namespaces carry state out. Runaway templates stop at the limits.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace tandem::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{32} << 20;
  int64_t max_loop_iterations = 200000;  // all loops of one render together
  int max_depth = 400;                   // nested statements, expressions, macro calls
};

// Throws TemplateError for runtime errors (including raise_exception) and exceeded limits.
std::string render_template(const Template& tmpl, const std::vector<std::pair<std::string, Value>>& variables,
                            const RenderLimits& limits = {});

// The globals Hugging Face gives templates: range, namespace, dict, raise_exception,
// strftime_now.
std::vector<std::pair<std::string, Value>> builtin_globals();

}  // namespace tandem::jinja
