// --kv-type, --cache-type-k, --cache-type-v (see kv_type_options.h).
#include "cli/kv_type_options.h"

namespace tandem::cli {

KvTypes KvTypeFlags::resolve() const {
  KvTypes types = kDefaultKvTypes;
  if (!both.empty()) types.k = types.v = parse_kv_type(both);
  if (!k.empty()) types.k = parse_kv_type(k);
  if (!v.empty()) types.v = parse_kv_type(v);
  return types;
}

void add_kv_type_options(CLI::App* command, KvTypeFlags* flags) {
  command->add_option("--kv-type", flags->both,
                      "KV cache type of K and V: f32, f16, bf16, q8_0, q4_0 (default f16; q8_0/q4_0 need a head size "
                      "that is a multiple of 32)");
  command->add_option("--cache-type-k", flags->k, "KV cache type of K (also -ctk); overrides --kv-type");
  command->add_option("--cache-type-v", flags->v, "KV cache type of V (also -ctv); overrides --kv-type");
}

api::KvCacheType api_kv_type(DType type) {
  switch (type) {
    case DType::F16: return api::KvCacheType::F16;
    case DType::BF16: return api::KvCacheType::BF16;
    case DType::Q8_0: return api::KvCacheType::Q8_0;
    case DType::Q4_0: return api::KvCacheType::Q4_0;
    default: return api::KvCacheType::F32;
  }
}

}  // namespace tandem::cli
