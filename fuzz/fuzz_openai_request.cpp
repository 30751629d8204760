// libFuzzer target for the server's request parser: any body, for either endpoint, must parse
// into a validated ApiRequest or throw ApiError (a 400) — never another exception (a 500),
// a crash or a sanitizer report. Seeds live in fuzz/seeds/fuzz_openai_request/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;  // long inputs add nothing but time
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const auto endpoint : {tandem::server::Endpoint::Completions, tandem::server::Endpoint::Chat}) {
    try {
      const tandem::server::ApiRequest request = tandem::server::parse_request(endpoint, body, 16);
      // What the parser promises the engine.
      if (request.params.max_tokens < 1) std::abort();
      for (int32_t id : request.prompt_ids)
        if (id < 0) std::abort();
    } catch (const tandem::server::ApiError& e) {
      if (e.status != 400) std::abort();
    }
  }
  return 0;
}
