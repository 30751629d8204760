// The KV cache type flags every command that runs the model shares, spelled as llama.cpp
// spells them: --kv-type T (K and V), --cache-type-k / --cache-type-v T (one each, after
// --kv-type), and llama.cpp's -ctk / -ctv, which CLI11 cannot declare (short options are one
// letter) and main() rewrites to the long forms before parsing (llama_flag_aliases.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "tandem/tandem.h"

namespace tandem::cli {

// The flags as given (empty: not given).
struct KvTypeFlags {
  std::string both, k, v;

  // kDefaultKvTypes, then --kv-type for both, then --cache-type-k/-v for one each, whatever
  // their order on the command line. InputError for an unknown type name.
  KvTypes resolve() const;
};

// Adds the flags to `command`, writing into *flags.
void add_kv_type_options(CLI::App* command, KvTypeFlags* flags);

// The public API's name for a KV cache type (commands built on the library: run).
api::KvCacheType api_kv_type(DType type);

}  // namespace tandem::cli
