// libFuzzer target for the GGUF reader: any byte string must either parse or throw
// InputError; crashes, sanitizer reports and huge allocations are the bugs it hunts.
// Seeds (small files made with GgufWriter) live in fuzz/seeds/fuzz_gguf/.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tandem::GgufFile file = tandem::GgufFile::parse({data, size});
    // Touch what a loader would: every view's bytes and the typed getters.
    uint8_t sum = 0;
    for (const tandem::GgufTensorInfo& info : file.tensors()) {
      const auto* bytes = static_cast<const uint8_t*>(info.view.data);
      const int64_t n_bytes = info.view.n_bytes();
      if (n_bytes > 0) sum ^= bytes[0] ^ bytes[n_bytes - 1];
    }
    for (const auto& [key, value] : file.metadata()) {
      try {
        file.get_float(key);
        file.get_string_array(key);
      } catch (const tandem::InputError&) {
      }
    }
    (void)sum;
  } catch (const tandem::InputError&) {
  }
  return 0;
}
