// libFuzzer target for the safetensors reader: any byte string must either parse or throw
// InputError; crashes, sanitizer reports and huge allocations are the bugs it hunts.
// Seeds (small files in the HF layout) live in fuzz/seeds/fuzz_safetensors/.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "io/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tandem::SafetensorsFile file = tandem::SafetensorsFile::parse({data, size});
    // Touch what a loader would: the first and last byte of every view.
    uint8_t sum = 0;
    for (const tandem::SafetensorsTensor& tensor : file.tensors()) {
      const auto* bytes = static_cast<const uint8_t*>(tensor.view.data);
      const int64_t n_bytes = tensor.view.n_bytes();
      if (n_bytes > 0) sum ^= bytes[0] ^ bytes[n_bytes - 1];
    }
    (void)sum;
  } catch (const tandem::InputError&) {
  }
  return 0;
}
