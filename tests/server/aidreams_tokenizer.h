// The aidreams260K model's tokenizer (../shared), loaded once per test process: for the tests of
// the server's pure request and response functions that tokenize.
#pragma once

#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::testing {

inline const Tokenizer& aidreams_tokenizer() {
  static const Tokenizer tokenizer = load_tokenizer(shared_path(kAidreamsGguf), "", 512);
  return tokenizer;
}

}  // namespace tandem::testing
