// The k-quant GEMMs (Q2_K, Q3_K and IQ4_XS included) against the scalar row kernel: every (row, token) result
// bit-identical to dot_q8k_activations on the scalar level, for odd row counts, partial row groups and token tiles, any
// row range — each kernel on the packed layout (AMX tiles, AVX-512 dpbusd, AVX2) and every level's
// kernel_table(isa).gemm_q8k on weights packed as that level's loader packs them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/kquants.h"
#include "base/quant.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/amx/attention_amx.h"
#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/gemm_packed.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/packed/kquant_layout.h"

namespace tandem {
namespace {

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return values;
}

// Random weights of `type` with rows of n_in elements; some rows get a large offset so the
// Q4_K mins and extreme Q6_K scales are exercised.
std::vector<uint8_t> random_kquant_matrix(std::mt19937& rng, DType type, int64_t n_rows, int64_t n_in) {
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_rows * row_bytes));
  for (int64_t r = 0; r < n_rows; ++r) {
    std::vector<float> row = random_floats(rng, n_in, r % 5 == 0 ? 3.0f : 0.05f);
    if (r % 3 == 0)
      for (float& v : row) v += 1.5f;
    uint8_t* out = bytes.data() + r * row_bytes;
    if (type == DType::Q4_K)
      quantize_row_q4k(row.data(), reinterpret_cast<BlockQ4K*>(out), n_in);
    else if (type == DType::Q5_K)
      quantize_row_q5k(row.data(), reinterpret_cast<BlockQ5K*>(out), n_in);
    else if (type == DType::Q6_K)
      quantize_row_q6k(row.data(), reinterpret_cast<BlockQ6K*>(out), n_in);
    else
      quantize_row(type, row.data(), out, n_in);
  }
  return bytes;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

using KquantGemmFn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                              int64_t n_tokens, float* out, int64_t out_stride);

// gemm on `w` (packed or not, as given) for every token count and two row ranges (all rows,
// and one cutting row groups in the middle): each (row, token) result bit-identical to the
// scalar row kernel, nothing written outside the range.
void expect_row_kernel_bits(const std::string& what, KquantGemmFn gemm, const TensorView& w, std::mt19937& rng,
                            const std::vector<int64_t>& token_counts) {
  const int64_t n_rows = w.n_rows(), n_in = w.row_length(), n_blocks = n_in / 256;
  for (int64_t n_tokens : token_counts) {
    const std::vector<float> x = random_floats(rng, n_tokens * n_in, n_tokens % 2 == 0 ? 1.0f : 40.0f);
    std::vector<ActivationBlockQ8K> qx(static_cast<size_t>(n_tokens * n_blocks));
    for (int64_t t = 0; t < n_tokens; ++t)
      quantize_activations_q8k_isa(Isa::Scalar, x.data() + t * n_in, n_in, qx.data() + t * n_blocks);
    for (auto [row_begin, row_end] : {std::pair<int64_t, int64_t>{0, n_rows}, {n_rows / 3, n_rows - n_rows / 4}}) {
      if (row_begin >= row_end) continue;
      std::vector<float> out(static_cast<size_t>(n_tokens * n_rows), -7.0f);
      gemm(w, row_begin, row_end, qx.data(), n_tokens, out.data(), n_rows);
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < n_rows; ++r) {
          const float got = out[t * n_rows + r];
          if (r < row_begin || r >= row_end) {
            ASSERT_EQ(got, -7.0f) << what << ": wrote outside its rows: row " << r;
            continue;
          }
          const float expected =
              dot_q8k_activations_isa(Isa::Scalar, w.dtype, w.row(r), qx.data() + t * n_blocks, n_in);
          ASSERT_TRUE(same_bits(got, expected))
              << what << " " << dtype_name(w.dtype) << " rows " << n_rows << " n_in " << n_in << " tokens " << n_tokens
              << " row " << r << " token " << t << ": " << got << " vs " << expected;
        }
    }
  }
}

TensorView kquant_view(const std::vector<uint8_t>& bytes, DType type, int64_t n_rows, int64_t n_in) {
  TensorView w;
  w.data = bytes.data();
  w.dtype = type;
  w.n_dims = 2;
  w.shape = {n_rows, n_in};
  return w;
}

// The kernels on the packed layout (packed/kquant_layout.h), each on the CPUs that have it:
// the AMX tile kernel (its decode path <= 4 tokens and its tile path) and the AVX-512 dpbusd one.
TEST(PackedKquantGemm, EveryKernelEqualsScalarRowKernelBitForBit) {
  struct Kernel {
    const char* name;
    Isa needs;
    KquantGemmFn gemm;
  };
  const Kernel kernels[] = {{"amx tiles", Isa::Amx, amx::gemm_kquant},
                            {"avx512 dpbusd", Isa::Avx512, avx512::gemm_kquant_packed},
                            {"avx2 maddubs", Isa::Avx2, avx2::gemm_kquant_packed}};
  std::mt19937 rng(31);
  for (const Kernel& kernel : kernels) {
    if (static_cast<int>(kernel.needs) > static_cast<int>(detect_isa())) {
      std::printf("%s: not on this CPU, skipped\n", kernel.name);
      continue;
    }
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
      for (int64_t n_rows : {1, 16, 17, 40, 70})
        for (int64_t n_in : {256, 768}) {
          const std::vector<uint8_t> weights = random_kquant_matrix(rng, type, n_rows, n_in);
          TensorView w = kquant_view(weights, type, n_rows, n_in);
          ASSERT_TRUE(packed::kquant_packable(w));
          std::vector<uint8_t> packed(static_cast<size_t>(packed::kquant_packed_bytes(w)));
          packed::kquant_pack_into(w, packed.data());
          w.packed = packed.data();
          expect_row_kernel_bits(kernel.name, kernel.gemm, w, rng, {1, 3, 4, 5, 8, 16, 17, 35});
        }
  }
}

// The AMX GEMM and the AMX-BF16 attention kernel load different tile palettes on the thread
// they run on (amx_tiles.h): a GEMM after the attention (the forward pass alternates them on
// the same worker threads) still equals the scalar row kernel bit for bit, and the attention
// after the GEMM gives the bits it gave before. A GEMM on the attention's palette would fault
// (its tile shapes differ) or multiply the wrong shapes.
TEST(KquantGemm, AmxGemmAndTileAttentionTakeTurnsOnOneThread) {
  if (detect_isa() != Isa::Amx || !cpu_has_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this machine";
  std::mt19937 rng(43);
  const int64_t n_rows = 33, n_in = 512, head_dim = 128, n_ctx = 150, group = 2;
  const std::vector<uint8_t> weights = random_kquant_matrix(rng, DType::Q4_K, n_rows, n_in);
  TensorView w = kquant_view(weights, DType::Q4_K, n_rows, n_in);
  std::vector<uint8_t> packed(static_cast<size_t>(packed::kquant_packed_bytes(w)));
  packed::kquant_pack_into(w, packed.data());
  w.packed = packed.data();
  const std::vector<float> keys = random_floats(rng, n_ctx * head_dim, 1.0f);
  const std::vector<float> values = random_floats(rng, n_ctx * head_dim, 1.0f);
  const std::vector<float> queries = random_floats(rng, n_ctx * group * head_dim, 1.0f);
  std::vector<int32_t> slots(static_cast<size_t>(n_ctx)), positions(static_cast<size_t>(n_ctx));
  for (int32_t p = 0; p < n_ctx; ++p) slots[static_cast<size_t>(p)] = positions[static_cast<size_t>(p)] = p;
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  const auto attend = [&] {
    std::vector<float> out(queries.size());
    amx::attention_tokens_bf16(queries.data(), group * head_dim, n_ctx, group, positions.data(),
                               f32_kv_rows(keys.data(), head_dim), f32_kv_rows(values.data(), head_dim), 0,
                               slots.data(), head_dim, scratch.data(), out.data(), group * head_dim, 0.0f, nullptr,
                               nullptr);
    return out;
  };
  const std::vector<float> attention_first = attend();
  expect_row_kernel_bits("amx gemm after tile attention", amx::gemm_kquant, w, rng, {16, 35});
  const std::vector<float> attention_again = attend();
  ASSERT_EQ(0, std::memcmp(attention_first.data(), attention_again.data(), attention_first.size() * sizeof(float)));
  expect_row_kernel_bits("amx gemm after the second attention", amx::gemm_kquant, w, rng, {16});
}

// Every level's table as the model uses it: weights packed when the level packs them.
TEST(KquantGemm, EveryLevelEqualsScalarRowKernelBitForBit) {
  std::mt19937 rng(37);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    if (static_cast<int>(isa) > static_cast<int>(detect_isa())) {
      std::printf("level %s: not on this CPU, skipped\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    const KernelTable& table = kernel_table(isa);
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_XS})
      for (int64_t n_rows : {1, 5, 17, 33})
        for (int64_t n_in : {256, 768}) {
          const std::vector<uint8_t> weights = random_kquant_matrix(rng, type, n_rows, n_in);
          TensorView w = kquant_view(weights, type, n_rows, n_in);
          const std::vector<uint8_t> packed = pack_for_level(table, w);  // as the loader does
          expect_row_kernel_bits(std::string(isa_name(isa)), table.gemm_q8k, w, rng, {1, 2, 3, 4, 5, 6, 7, 8, 9, 35});
        }
  }
}

}  // namespace
}  // namespace tandem
