// Python str semantics on UTF-8 bytes, as the template language sees strings: lengths and
// indices count code points, whitespace is Python's (Unicode) whitespace, repr/JSON/HTML
// quoting. Case mapping changes ASCII letters only; other letters keep their case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja {

// Byte offset of every code point in `s`, plus s.size() at the end (invalid bytes count
// as one code point each).
std::vector<size_t> codepoint_offsets(std::string_view s);
size_t py_len(std::string_view s);
bool is_py_space(char32_t c);
// Python's \w for a code point, approximated: ASCII letters, digits and _, and non-ASCII
// code points outside the common punctuation, symbol and emoji blocks.
bool is_word_char(char32_t c);
std::vector<char32_t> decode_utf8(std::string_view s);

// str.strip / lstrip / rstrip: `chars` absent strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit: `sep` absent splits on whitespace runs; maxsplit < 0 is unlimited.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(std::string_view s);
std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

std::string repr_string(std::string_view s);  // Python repr of a str, quotes included
std::string json_string(std::string_view s);  // json.dumps(s, ensure_ascii=False)
std::string html_escape(std::string_view s);  // markupsafe.escape

}  // namespace tandem::jinja
