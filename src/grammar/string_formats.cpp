// The formats' grammars (see string_formats.h). Repeats are bounded so that a model cannot
// write one field forever: labels of at most 31 characters, at most four of them.
#include "grammar/string_formats.h"

#include <map>

namespace tandem::grammar {
namespace {

// Days as each month has them; February up to the 28th (the 29th only in leap years is more
// grammar than it is worth: a subset is always valid).
const char* const kDate =
    R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))";
const char* const kTime =
    R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
// A DNS label: letters, digits and single hyphens inside, 1..31 characters.
const char* const kLabel = R"(([a-zA-Z0-9] ("-"? [a-zA-Z0-9]){0,15}))";
const char* const kHex = "[0-9a-fA-F]{1,4}";

std::string ipv6() {
  // RFC 3986's IPv6address, with ls32 as two groups.
  const std::string h = kHex;
  const std::string g = "(" + h + " \":\")";  // a group and its colon
  const std::string ls32 = h + " \":\" " + h;
  auto head = [&](int n) {
    return n == 0 ? std::string("") : "((" + h + " \":\"){0," + std::to_string(n - 1) + "} " + h + ")? ";
  };
  std::string out = "(" + g + "{6} " + ls32;
  out += " | \"::\" " + g + "{5} " + ls32;
  out += " | " + head(1) + "\"::\" " + g + "{4} " + ls32;
  out += " | " + head(2) + "\"::\" " + g + "{3} " + ls32;
  out += " | " + head(3) + "\"::\" " + g + "{2} " + ls32;
  out += " | " + head(4) + "\"::\" " + g + " " + ls32;
  out += " | " + head(5) + "\"::\" " + ls32;
  out += " | " + head(6) + "\"::\" " + h;
  out += " | " + head(7) + "\"::\")";
  return out;
}

}  // namespace

bool pattern_implied_by_format(const std::string& format, const std::string& pattern) {
  // zod 4's patterns (z.toJSONSchema of z.email(), z.uuid(), z.iso.date(), z.iso.datetime(),
  // z.iso.duration(), z.ipv4()): each accepts every string the format's grammar above writes
  // (string_formats_test.cpp checks samples with an ECMAScript regex engine).
  static const std::map<std::string, std::string> kImplied = {
      {"email", R"(^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$)"},
      {"uuid",
       R"(^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$)"},
      {"date",
       R"(^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))$)"},
      {"date-time",
       R"(^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$)"},
      {"duration", R"(^P(?:(\d+W)|(?!.*W)(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+([.,]\d+)?S)?)?)$)"},
      {"ipv4",
       R"(^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$)"},
  };
  const auto it = kImplied.find(format);
  return it != kImplied.end() && it->second == pattern;
}

std::optional<std::string> string_format_gbnf(const std::string& format) {
  const std::string label = kLabel;
  const std::string octet = R"(("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]))";
  // Dot-atoms of letters, digits and _ + - (a subset of RFC 5321's atext that zod's pattern
  // also accepts).
  const std::string atom = R"([a-zA-Z0-9_+-]{1,32})";
  const std::string n = "[0-9]{1,4}";
  static const std::map<std::string, std::string> kFormats = {
      {"date", kDate},
      {"time", kTime},
      // In UTC ("Z"): what every validator and zod's pattern accept.
      {"date-time",
       std::string(kDate) + R"( "T" ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? "Z")"},
      // RFC 4122: a version 1-8 and the variant bits 10.
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [1-8] [0-9a-fA-F]{3} "-" [89abAB] [0-9a-fA-F]{3} "-" [0-9a-fA-F]{12})"},
      {"duration", "\"P\" ((" + n + " \"Y\" (" + n + " \"M\")? (" + n + " \"D\")? | " + n + " \"M\" (" + n +
                       " \"D\")? | " + n + " \"D\") (\"T\" (" + n + " \"H\" (" + n + " \"M\")? (" + n + " \"S\")? | " +
                       n + " \"M\" (" + n + " \"S\")? | " + n + " \"S\"))? | \"T\" (" + n + " \"H\" (" + n +
                       " \"M\")? (" + n + " \"S\")? | " + n + " \"M\" (" + n + " \"S\")? | " + n + " \"S\") | " + n +
                       " \"W\")"},
      {"hostname", label + " (\".\" " + label + "){0,3}"},
      {"email",
       atom + " (\".\" " + atom + "){0,3} \"@\" " + label + " (\".\" " + label + "){0,2} \".\" [a-zA-Z]{2,10}"},
      {"ipv4", octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet},
      {"ipv6", ipv6()},
  };
  const auto it = kFormats.find(format);
  if (it == kFormats.end()) return std::nullopt;
  return it->second;
}

}  // namespace tandem::grammar
