// Template source → a flat token stream: text runs, tag delimiters and the expression
// tokens inside tags. Whitespace control lives here, configured as Hugging Face does:
// trim_blocks and lstrip_blocks on, `-`/`+` markers, one trailing newline dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja {

enum class TokenType {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// Throws TemplateError for an unterminated tag, comment or string, or a stray character.
std::vector<Token> tokenize(std::string_view source);

}  // namespace tandem::jinja
