// JSON Schema string formats as grammar: the content of the string (without its quotes) for
// date-time, date, time, duration, email, hostname, ipv4, ipv6 and uuid, as RFC 3339, ISO 8601,
// RFC 5321/1123, RFC 4291 and RFC 4122 write them. Each grammar emits a subset of what a
// validator accepts (e.g. times carry a time zone, emails a dot-atom local part and a domain
// with a letters-only top label, date-times in UTC, dates up to February 28th, RFC 4122 uuids,
// IPv6 without an embedded IPv4 tail), never more. Every format
// is ASCII without '"' or '\', so the text is the same inside a JSON string.
#pragma once

#include <optional>
#include <string>

namespace tandem::grammar {

// A GBNF expression (no rules of its own) for `format`; nullopt for a format not listed above.
std::optional<std::string> string_format_gbnf(const std::string& format);

// Whether `pattern` is known to accept every string string_format_gbnf(format) writes, so a
// schema with both (zod 4 writes a pattern beside each format) is followed exactly by the
// format's grammar. Only the patterns zod 4 writes are known; a schema with another pattern
// beside a format is refused (the grammar cannot intersect the two).
bool pattern_implied_by_format(const std::string& format, const std::string& pattern);

}  // namespace tandem::grammar
