// The template lexer (see lexer.h). It follows Jinja2's lexer rule by rule where the output
// depends on it: which whitespace `-`, trim_blocks and lstrip_blocks remove, that tag ends
// only count outside brackets, and Python's string-literal escapes.
#include "chat/jinja/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "chat/jinja/template_error.h"
#include "tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a literal's body, as Jinja applies it.
std::string decode_string_literal(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n_digits = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
        uint32_t code = 0;
        for (size_t k = 0; k < n_digits; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) throw TemplateError(fmt::format("truncated \\{} escape in a string", c), line);
          code = code * 16 + static_cast<uint32_t>(h);
        }
        if (code > 0x10FFFF) throw TemplateError("illegal Unicode character in a string", line);
        append_utf8(out, code);
        i += n_digits;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t code = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            code = code * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          append_utf8(out, code);
        } else {
          out += '\\';  // unknown escapes stay as written
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t start = find_tag_start();
      std::string text = src_.substr(pos_, start - pos_);
      const int text_line = line_;
      if (start == src_.size()) {
        emit_text(std::move(text), text_line);
        advance_to(start);
        break;
      }
      const char kind = src_[start + 1];
      const char sign =
          start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+') ? src_[start + 2] : 0;
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone after the indentation of its line
        // takes that indentation with it.
        const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_pos > 0 || line_starting_) {
          bool only_space = line_pos < text.size();
          for (size_t i = line_pos; i < text.size(); ++i) only_space = only_space && is_space(text[i]);
          if (only_space) text.resize(line_pos);
        }
      }
      emit_text(std::move(text), text_line);
      advance_to(start + 2 + (sign != 0 ? 1 : 0));
      const int tag_line = line_;
      if (kind == '#') {
        lex_comment(tag_line);
      } else {
        lex_tag(kind == '%', tag_line);
      }
    }
    tokens_.push_back(Token{TokenType::kEnd, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start() const {
    size_t best = src_.size();
    for (const char* opener : {"{{", "{%", "{#"}) {
      const size_t hit = src_.find(opener, pos_);
      if (hit < best) best = hit;
    }
    return best;
  }

  void advance_to(size_t pos) {
    for (size_t i = pos_; i < pos; ++i) line_ += src_[i] == '\n';
    if (pos > pos_) line_starting_ = src_[pos - 1] == '\n';
    pos_ = pos;
  }

  void skip_space() {
    size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    advance_to(p);
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::kText, std::move(text), 0, 0, line});
  }

  void emit(TokenType type, std::string text, int line) { tokens_.push_back(Token{type, std::move(text), 0, 0, line}); }

  bool at(const char* s) const { return src_.compare(pos_, std::strlen(s), s) == 0; }

  void lex_comment(int tag_line) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) throw TemplateError("missing end of comment tag '#}'", tag_line);
    const bool strip = end > pos_ && src_[end - 1] == '-';
    advance_to(end + 2);
    if (strip) {
      skip_space();
    } else if (pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);  // trim_blocks
    }
  }

  void lex_tag(bool block, int tag_line) {
    emit(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag_line);
    int depth = 0;  // open brackets: a tag end inside them is two operators, as in Jinja
    while (true) {
      skip_space();
      if (pos_ >= src_.size()) {
        throw TemplateError(fmt::format("unexpected end of template, expected '{}'", block ? "%}" : "}}"), tag_line);
      }
      if (depth == 0) {
        const char* close = block ? "%}" : "}}";
        if (src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", line_);
          advance_to(pos_ + 3);
          skip_space();
          return;
        }
        if (block && at("+%}")) {
          emit(TokenType::kBlockEnd, "", line_);
          advance_to(pos_ + 3);
          return;
        }
        if (at(close)) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", line_);
          advance_to(pos_ + 2);
          if (block && pos_ < src_.size() && src_[pos_] == '\n') advance_to(pos_ + 1);  // trim_blocks
          return;
        }
      }
      lex_expression_token(depth);
    }
  }

  void lex_expression_token(int& depth) {
    const char c = src_[pos_];
    const int line = line_;
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      emit(TokenType::kName, src_.substr(pos_, end - pos_), line);
      advance_to(end);
      return;
    }
    if (is_digit(c)) {
      lex_number(line);
      return;
    }
    if (c == '\'' || c == '"') {
      size_t end = pos_ + 1;
      while (end < src_.size() && src_[end] != c) end += src_[end] == '\\' ? 2 : 1;
      if (end >= src_.size()) throw TemplateError("unterminated string literal", line);
      emit(TokenType::kString, decode_string_literal(std::string_view(src_).substr(pos_ + 1, end - pos_ - 1), line),
           line);
      advance_to(end + 1);
      return;
    }
    for (const char* op : {"//", "**", "==", "!=", "<=", ">="}) {
      if (at(op)) {
        emit(TokenType::kOperator, op, line);
        advance_to(pos_ + 2);
        return;
      }
    }
    if (std::strchr("+-*/%~<>=()[]{},.:|", c) != nullptr) {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) throw TemplateError(fmt::format("unexpected '{}'", c), line);
        --depth;
      }
      emit(TokenType::kOperator, std::string(1, c), line);
      advance_to(pos_ + 1);
      return;
    }
    throw TemplateError(fmt::format("unexpected character '{}' in a tag", c), line);
  }

  void lex_number(int line) {
    size_t end = pos_;
    auto digits = [&](size_t p) {
      while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
        ++p;
      return p;
    };
    end = digits(end);
    // After a '.', digits are an index (`x.0.1`), never a float: Jinja's (?<!\.) rule.
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    bool is_float = false;
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      end = digits(end + 1);
    }
    if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        end = digits(p);
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token token{is_float ? TokenType::kFloat : TokenType::kInteger, text, 0, 0, line};
    if (is_float) {
      token.number = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      token.integer = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) throw TemplateError("integer literal too large", line);
    }
    tokens_.push_back(std::move(token));
    advance_to(end);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  // Jinja normalises newlines to \n and drops one trailing newline (keep_trailing_newline off).
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text)).run();
}

}  // namespace tandem::jinja
