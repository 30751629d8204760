// libFuzzer target for the server's request parser: any body, for either endpoint, must parse
// into a validated ApiRequest or throw ApiError (a 400) — never another exception (a 500),
// a crash or a sanitizer report. The body's JSON reader (json_body.h, linear time, limits)
// must also agree with nlohmann's own parser wherever no limit applies: the same value, or a
// syntax error both. Seeds live in fuzz/seeds/fuzz_openai_request/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/json_body.h"
#include "server/openai_protocol.h"

namespace {

void check_against_nlohmann(std::string_view text) {
  using tandem::server::RequestJson;
  RequestJson expected;
  bool expected_ok = true;
  try {
    expected = RequestJson::parse(text);
  } catch (const nlohmann::json::exception&) {
    expected_ok = false;
  }
  try {
    const RequestJson got = tandem::server::parse_json_body(text);
    if (!expected_ok || got != expected || got.dump() != expected.dump()) std::abort();
  } catch (const tandem::server::ApiError& e) {
    // A syntax error both, or a limit that nlohmann has not (256 levels, 10000 keys...).
    if (e.status != 400 || (expected_ok && std::string_view(e.what()).find("(the limit)") == std::string_view::npos))
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;  // long inputs add nothing but time
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  check_against_nlohmann(body);
  for (const auto endpoint : {tandem::server::Endpoint::Completions, tandem::server::Endpoint::Chat}) {
    try {
      const tandem::server::ApiRequest request = tandem::server::parse_request(endpoint, body, 16);
      // What the parser promises the engine.
      if (request.params.max_tokens < 1) std::abort();
      if (request.endpoint == tandem::server::Endpoint::Completions &&
          (request.prompts.empty() || request.prompts.size() > static_cast<size_t>(tandem::server::kMaxPrompts)))
        std::abort();
      for (const tandem::server::PromptInput& prompt : request.prompts)
        for (int32_t id : prompt.ids)
          if (id < 0) std::abort();
    } catch (const tandem::server::ApiError& e) {
      if (e.status != 400) std::abort();
    }
  }
  return 0;
}
