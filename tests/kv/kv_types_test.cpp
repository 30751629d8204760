// The KV cache's storage types: names and checks (kv_types.h), row and token sizes per type,
// slot writes read back as quantize_row/dequantize_row give them (kv_cache.h), and the pool
// sizing arithmetic with its start-up line (kv_pool_plan.h), on TinyLlama's shape.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/quant.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool_plan.h"
#include "kv/kv_types.h"

namespace tandem {
namespace {

// TinyLlama 1.1B: 22 layers, 4 KV heads of 64.
const KvShape kTinyLlama{22, 4, 64};
constexpr int64_t kGiB = int64_t{1} << 30;

TEST(KvTypes, NamesParseAnyCaseAndUnknownOnesAreInputErrors) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
    EXPECT_EQ(parse_kv_type(kv_type_name(type)), type);
  EXPECT_EQ(parse_kv_type("Q8_0"), DType::Q8_0);
  EXPECT_EQ(parse_kv_type("BF16"), DType::BF16);
  EXPECT_THROW(parse_kv_type("q4_k"), InputError);
  EXPECT_THROW(parse_kv_type(""), InputError);
  EXPECT_EQ(kv_types_description({DType::Q8_0, DType::F16}), "K q8_0, V f16");
  EXPECT_TRUE(kDefaultKvTypes == (KvTypes{DType::F16, DType::F16}));
}

TEST(KvTypes, BlockTypesNeedHeadsOfWholeBlocks) {
  const KvShape head_8{2, 4, 8}, head_48{2, 2, 48};
  const KvTypes f16_bf16{DType::F16, DType::BF16}, q8_f16{DType::Q8_0, DType::F16}, f16_q4{DType::F16, DType::Q4_0};
  const KvTypes q4_q8{DType::Q4_0, DType::Q8_0}, q4k_f16{DType::Q4_K, DType::F16}, q8{DType::Q8_0, DType::Q8_0};
  EXPECT_NO_THROW(check_kv_types(head_8, f16_bf16));
  EXPECT_THROW(check_kv_types(head_8, q8_f16), InputError);
  EXPECT_THROW(check_kv_types(head_48, f16_q4), InputError);
  EXPECT_NO_THROW(check_kv_types(kTinyLlama, q4_q8));
  EXPECT_THROW(check_kv_types(kTinyLlama, q4k_f16), InputError);
  EXPECT_THROW(KvCache(head_8, 2, 4, q8), InputError);
  try {
    check_kv_types(head_48, q8);
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("head_dim is 48"), std::string::npos) << error.what();
  }
}

// Row bytes: whole 64-byte lines; F32 one line more (as before types existed); the others a line
// more only where the stride would be whole KiB.
TEST(KvCacheTypes, RowAndTokenBytesPerType) {
  EXPECT_EQ(KvCache::row_bytes(kTinyLlama, DType::F32), 1024 + 64);
  EXPECT_EQ(KvCache::row_bytes(kTinyLlama, DType::F16), 512);
  EXPECT_EQ(KvCache::row_bytes(kTinyLlama, DType::BF16), 512);
  EXPECT_EQ(KvCache::row_bytes(kTinyLlama, DType::Q8_0), 320);  // 8 blocks of 34 = 272
  EXPECT_EQ(KvCache::row_bytes(kTinyLlama, DType::Q4_0), 192);  // 8 blocks of 18 = 144
  const KvShape llama_7b{32, 32, 128};
  EXPECT_EQ(KvCache::row_bytes(llama_7b, DType::F16), 8192 + 64);
  EXPECT_EQ(KvCache::bytes_per_token(kTinyLlama, {DType::F32, DType::F32}), 22 * 2 * 1088);
  EXPECT_EQ(KvCache::bytes_per_token(kTinyLlama, {DType::Q8_0, DType::F16}), 22 * (320 + 512));
  KvCache cache(KvShape{2, 4, 64}, 3, 16, {DType::Q4_0, DType::BF16});
  EXPECT_EQ(cache.bytes_per_token(), 2 * (192 + 512));
  EXPECT_EQ(cache.bytes_per_block(), 16 * cache.bytes_per_token());
  EXPECT_EQ(cache.keys(1).row_bytes, 192);
  EXPECT_EQ(cache.values(1).type, DType::BF16);
}

// What store() writes is what quantize_row makes of the row, at the slot's place in the layer.
TEST(KvCacheTypes, StoredRowsReadBackAsTheirType) {
  const KvShape shape{3, 2, 32};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    KvCache cache(shape, 4, 4, {type, DType::F32});
    std::vector<float> key(64), value(64), read(64), expected(64);
    for (float& x : key) x = uniform(rng);
    for (float& x : value) x = uniform(rng);
    cache.store(2, 13, key.data(), value.data());
    const KvRows keys = cache.keys(2), values = cache.values(2);
    dequantize_row(type, keys.data + 13 * keys.row_bytes, read.data(), 64);
    std::vector<uint8_t> bytes(static_cast<size_t>(dtype_row_bytes(type, 64)));
    quantize_row(type, key.data(), bytes.data(), 64);
    dequantize_row(type, bytes.data(), expected.data(), 64);
    EXPECT_EQ(0, std::memcmp(read.data(), expected.data(), sizeof(float) * 64)) << dtype_name(type);
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(read[i], key[i], 0.3) << dtype_name(type);  // Q4_0: step 2/8
    EXPECT_EQ(0, std::memcmp(values.data + 13 * values.row_bytes, value.data(), sizeof(float) * 64));
    // Other slots and layers are untouched (zero).
    dequantize_row(type, cache.keys(1).data + 13 * keys.row_bytes, read.data(), 64);
    for (float x : read) EXPECT_EQ(x, 0.0f);
  }
}

// `tandem serve --kv-memory 1G` on TinyLlama: full 2048-token contexts per type; F16 holds at
// least twice F32's.
TEST(KvPoolPlan, OneGibOfTinyLlamaContextsPerType) {
  auto plan = [](DType type) { return plan_kv_pool(kTinyLlama, {type, type}, 16, 2048, kGiB, 4); };
  const KvPoolPlan f32 = plan(DType::F32), f16 = plan(DType::F16), q8 = plan(DType::Q8_0), q4 = plan(DType::Q4_0);
  EXPECT_EQ(f32.bytes_per_token, 47872);
  EXPECT_EQ(f32.bytes_per_block, 47872 * 16);
  EXPECT_EQ(f32.blocks_per_context, 128);
  EXPECT_EQ(f32.n_blocks, kGiB / (47872 * 16));  // 1401
  EXPECT_EQ(f32.full_contexts, 10);
  EXPECT_EQ(f16.bytes_per_token, 22528);
  EXPECT_EQ(f16.n_blocks, 2978);
  EXPECT_EQ(f16.full_contexts, 23);
  EXPECT_GE(f16.full_contexts, 2 * f32.full_contexts);
  EXPECT_EQ(plan(DType::BF16).full_contexts, 23);
  EXPECT_EQ(q8.bytes_per_token, 14080);
  EXPECT_EQ(q8.full_contexts, 37);
  EXPECT_EQ(q4.bytes_per_token, 8448);
  EXPECT_EQ(q4.full_contexts, 62);
  EXPECT_EQ(describe_kv_pool(f16, 2048),
            "KV pool: 2978 blocks of 16 tokens, 22528 bytes/token (K f16, V f16), fits 23 full contexts of 2048");
}

// Every layer local (window 4096, Mistral 7B v0.1's) on a 32768-token context: a sequence holds
// its window and one step's tokens (512), (4095 + 511) / 16 rounded up, plus one: 289 blocks,
// not 2048; the default pool (--parallel 2) is that many per sequence.
TEST(KvPoolPlan, WindowedSequencesHoldTheirWindowAndAStep) {
  const KvPoolPlan plan = plan_kv_pool(kTinyLlama, kDefaultKvTypes, 16, 32768, 0, 2, 4096, 512);
  EXPECT_EQ(plan.blocks_per_context, 289);
  EXPECT_EQ(plan.n_blocks, 578);
  EXPECT_EQ(plan.full_contexts, 2);
  EXPECT_EQ(plan.window, 4096);
  EXPECT_NE(describe_kv_pool(plan, 32768).find("fits 2 full contexts of 32768 (window 4096: 289 blocks each)"),
            std::string::npos)
      << describe_kv_pool(plan, 32768);
  // A window longer than the context changes nothing.
  EXPECT_EQ(plan_kv_pool(kTinyLlama, kDefaultKvTypes, 16, 100, 0, 3, 4096, 512).blocks_per_context, 7);
}

TEST(KvPoolPlan, WithoutAMemoryBudgetParallelFullContexts) {
  const KvPoolPlan plan = plan_kv_pool(kTinyLlama, kDefaultKvTypes, 16, 100, 0, 3);
  EXPECT_EQ(plan.blocks_per_context, 7);
  EXPECT_EQ(plan.n_blocks, 21);
  EXPECT_EQ(plan.full_contexts, 3);
  // A budget below one block: no blocks (the Engine refuses it).
  EXPECT_EQ(plan_kv_pool(kTinyLlama, kDefaultKvTypes, 16, 100, 1000, 3).n_blocks, 0);
}

}  // namespace
}  // namespace tandem
