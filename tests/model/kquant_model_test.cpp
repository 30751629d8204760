// Q4_K_M and Q5_K_M models (Q4_K or Q5_K with Q6_K for output and some attn_v / ffn_down,
// rows of whole 256-element blocks) through the whole forward pass: prefill equals token-by-token decode
// bit for bit — on an AMX machine the first runs the tile kernels and the second the dpbusd
// decode path over the repacked weights — and the repacked weights give the same bits as
// the row kernels reading the file's own blocks. Q2_K, Q3_K and IQ4_XS files as gen-model
// writes them: prefill equals decode bit for bit, and the logits match the same model with its
// matrices dequantized to F32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/model_generator.h"
#include "support/random_model.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

constexpr const char* kVocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
std::string vocab_path() { return testing::shared_path(kVocab); }

std::vector<float> logits_in_steps(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& tokens,
                                   int64_t step) {
  ThreadPool pool(2);
  Forward forward(model, static_cast<int64_t>(tokens.size()), pool);
  KvCache cache(model->config.kv_shape(), static_cast<int64_t>(tokens.size()), 1);
  std::vector<float> logits;
  Batch batch;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(cache.whole_pool_blocks());
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(tokens[p], static_cast<int32_t>(p), seq, true);
    std::span<const float> out = forward.run(batch, cache);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

int64_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t differing = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

TEST(KQuantModel, PrefillDecodeAndRowKernelsAgreeBitForBit) {
  TANDEM_REQUIRE_SHARED(kVocab);
  for (const DType base : {DType::Q4_K, DType::Q5_K}) {
    SCOPED_TRACE(dtype_name(base));
    GeneratorOptions options;
    options.shape = "test-kquant";
    options.q4_k_m = base == DType::Q4_K;
    options.q5_k_m = base == DType::Q5_K;
    options.vocab_path = vocab_path();
    options.seed = 3;
    const test_support::TempDir dir;  // its own folder: the test runs at several levels at once
    options.out_path = dir.file("kquant_model.gguf");
    generate_random_gguf(options);
    const std::shared_ptr<const Model> model = load_model(options.out_path);
    ASSERT_EQ(model->weights.layers[0].wq.dtype, base);
    ASSERT_EQ(model->weights.output.dtype, DType::Q6_K);
    const bool packed = kernel_table().packer.packable != nullptr;  // every level but scalar repacks k-quants
    EXPECT_EQ(model->weights.layers[0].wq.packed != nullptr, packed) << isa_name(kernel_table().isa);

    std::mt19937 rng(4);
    std::vector<int32_t> tokens(37);
    for (int32_t& token : tokens) token = static_cast<int32_t>(rng() % model->config.vocab_size);
    const std::vector<float> prefill = logits_in_steps(model, tokens, 37);
    const std::vector<float> chunked = logits_in_steps(model, tokens, 7);
    const std::vector<float> decode = logits_in_steps(model, tokens, 1);
    EXPECT_EQ(differing_bits(prefill, decode), 0) << "prefill vs decode";
    EXPECT_EQ(differing_bits(prefill, chunked), 0) << "prefill vs chunks of 7";

    // The same model reading the file's blocks through the row kernels.
    auto unpacked = std::make_shared<Model>(*model);
    for (LayerWeights& layer : unpacked->weights.layers)
      for (TensorView* view : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down})
        view->packed = nullptr;
    unpacked->weights.output.packed = nullptr;
    EXPECT_EQ(differing_bits(prefill, logits_in_steps(unpacked, tokens, 37)), 0) << "repacked vs file blocks";
  }
}

// A copy of `model` whose matrices (not the token embedding, whose rows are dequantized on
// lookup anyway) are F32 holding exactly the dequantized values of the file's blocks.
std::shared_ptr<const Model> dequantized_copy(const std::shared_ptr<const Model>& model) {
  auto copy = std::make_shared<Model>(*model);
  auto dequantize = [&](TensorView& view) {
    const int64_t rows = view.n_rows(), cols = view.row_length();
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(view.dtype, view.row(r), values->data() + r * cols, cols);
    view = make_view(values->data(), DType::F32, {rows, cols});
    copy->storage.push_back(values);
  };
  for (LayerWeights& layer : copy->weights.layers)
    for (TensorView* view : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down})
      dequantize(*view);
  dequantize(copy->weights.output);
  return copy;
}

// Against the float weights only the 8-bit rounding of the activations (256-element blocks)
// separates the two: a few percent of a row's largest logit at most. A block decoded
// differently by the kernels than by dequantize_row would be off by the logits' own size.
TEST(KQuantModel, LowBitTypesMatchTheirDequantizedWeights) {
  TANDEM_REQUIRE_SHARED(kVocab);
  for (DType type : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
    GeneratorOptions options;
    options.shape = "test-kquant";
    options.type = type;
    options.vocab_path = vocab_path();
    options.seed = 5;
    const test_support::TempDir dir;
    options.out_path = dir.file("low_bit.gguf");
    generate_random_gguf(options);
    const std::shared_ptr<const Model> model = load_model(options.out_path);
    ASSERT_EQ(model->weights.layers[0].w_down.dtype, type);
    ASSERT_EQ(model->weights.output.dtype, type);

    std::mt19937 rng(6);
    std::vector<int32_t> tokens(6);
    for (int32_t& token : tokens) token = static_cast<int32_t>(rng() % model->config.vocab_size);
    const std::vector<float> prefill = logits_in_steps(model, tokens, 6);
    EXPECT_EQ(differing_bits(prefill, logits_in_steps(model, tokens, 1)), 0)
        << dtype_name(type) << " prefill vs decode";

    const std::vector<float> reference = logits_in_steps(dequantized_copy(model), tokens, 6);
    ASSERT_EQ(reference.size(), prefill.size());
    const int64_t vocab = model->config.vocab_size;
    for (size_t t = 0; t < tokens.size(); ++t) {
      double max_abs = 0, max_err = 0;
      for (int64_t i = 0; i < vocab; ++i) {
        max_abs = std::max(max_abs, std::fabs(double{reference[t * vocab + i]}));
        max_err = std::max(max_err, std::fabs(double{prefill[t * vocab + i]} - reference[t * vocab + i]));
      }
      EXPECT_LE(max_err, 0.05 * max_abs) << dtype_name(type) << " token " << t;
      if (t == 0)
        std::printf("%s: max |logit - float weights' logit| %.4g of row max %.4g\n",
                    std::string(dtype_name(type)).c_str(), max_err, max_abs);
    }
  }
}

}  // namespace
}  // namespace tandem
