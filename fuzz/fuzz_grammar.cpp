// libFuzzer target for the grammar engine's front ends and matcher: any GBNF text (or, when
// the input starts with '{', a JSON Schema) must compile or throw InputError; a compiled
// grammar then runs over the input's own bytes (accept, can_end, rollback) without crashes,
// sanitizer reports or runaway memory. Seeds live in fuzz/seeds/fuzz_grammar/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 14) return 0;  // long inputs add nothing but time
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::shared_ptr<const tandem::grammar::Grammar> grammar;
    if (!text.empty() && text[0] == '{') {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      grammar = std::make_shared<const tandem::grammar::Grammar>(tandem::grammar::json_schema_grammar(schema));
    } else {
      grammar = std::make_shared<const tandem::grammar::Grammar>(tandem::grammar::parse_gbnf(text));
    }
    tandem::grammar::GrammarMatcher matcher(grammar, 4);
    for (size_t i = 0; i < text.size() && i < 256; ++i) {
      if (!matcher.accept_byte(static_cast<uint8_t>(text[i])) && i % 3 == 0) matcher.rollback(1);
    }
    (void)matcher.can_end();
  } catch (const tandem::InputError&) {
  }
  return 0;
}
