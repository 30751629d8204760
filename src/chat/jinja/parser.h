// Tokens → Template (ast.h). The grammar and operator precedence are Jinja2's; tags and
// filters outside the supported subset fail here, at parse time, with their name and line,
// as Jinja fails on an unknown filter before rendering anything.
#pragma once

#include <string_view>

#include "chat/jinja/ast.h"

namespace tandem::jinja {

// Throws TemplateError on a syntax error or an unsupported construct.
Template parse_template(std::string_view source);

}  // namespace tandem::jinja
