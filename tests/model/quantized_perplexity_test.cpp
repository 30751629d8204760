// Quantization keeps the model: the trained aidreams260K model re-stored with Q8_0 matrices
// (every matrix whose rows are whole 32-element blocks) scores a text from its own domain
// within 1 % of the F32 original's perplexity. The same for Q4_0 within a looser bound.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "engine/perplexity.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

// Copies every key and tensor of `source`, storing 2-D tensors whose rows allow it as `type`.
std::string requantize(const std::string& source, DType type, const std::string& out_path) {
  const GgufFile file = GgufFile::open(source);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const GgufTensorInfo& info : file.tensors()) {
    const TensorView& view = info.view;
    std::vector<int64_t> shape(view.shape.begin(), view.shape.begin() + view.n_dims);
    const bool quantize = view.n_dims == 2 && view.row_length() % 32 == 0 && view.dtype == DType::F32;
    const DType stored = quantize ? type : view.dtype;
    std::vector<uint8_t> bytes(static_cast<size_t>(GgufWriter::tensor_bytes(stored, shape)));
    const int64_t out_row_bytes = dtype_row_bytes(stored, view.row_length());
    for (int64_t r = 0; r < view.n_rows(); ++r) {
      if (quantize)
        quantize_row(stored, view.f32() + r * view.row_length(), bytes.data() + r * out_row_bytes, view.row_length());
      else
        std::memcpy(bytes.data() + r * out_row_bytes, view.row(r), static_cast<size_t>(out_row_bytes));
    }
    writer.add_tensor(info.name, stored, shape, std::move(bytes));
  }
  writer.write(out_path);
  return out_path;
}

double perplexity_of(const std::string& model_path, const std::vector<int32_t>& tokens) {
  std::shared_ptr<const Model> model = load_model(model_path);
  ThreadPool pool(1);
  Forward forward(model, 64, pool);
  return compute_perplexity(forward, tokens, 64, 64, 1, KvTypes{}).perplexity;
}

TEST(QuantizedPerplexity, Q8_0WithinOnePercentOfF32) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string f32_path = testing::shared_path(testing::kAidreamsGguf);
  // In-domain text: the reference generations, one after another.
  std::ifstream lines(testing::shared_path("models/aidreams260K/greedy-reference.jsonl"));
  std::string text;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) text += nlohmann::json::parse(line).at("text").get<std::string>() + "\n";
  const Tokenizer tokenizer = load_tokenizer(f32_path, "", 512);
  const std::vector<int32_t> tokens = tokenizer.encode(text, true);
  ASSERT_GE(tokens.size(), 256u);

  const test_support::TempDir dir;  // its own folder: the test runs at several levels at once
  const double f32 = perplexity_of(f32_path, tokens);
  const double q8 = perplexity_of(requantize(f32_path, DType::Q8_0, dir.file("aidreams-q8_0.gguf")), tokens);
  const double q4 = perplexity_of(requantize(f32_path, DType::Q4_0, dir.file("aidreams-q4_0.gguf")), tokens);
  RecordProperty("ppl_f32", std::to_string(f32));
  RecordProperty("ppl_q8_0", std::to_string(q8));
  RecordProperty("ppl_q4_0", std::to_string(q4));
  std::printf("perplexity F32 %.4f, Q8_0 %.4f (%+.3f %%), Q4_0 %.4f (%+.3f %%)\n", f32, q8, 100 * (q8 / f32 - 1), q4,
              100 * (q4 / f32 - 1));
  EXPECT_LT(std::fabs(q8 / f32 - 1.0), 0.01);
  EXPECT_LT(std::fabs(q4 / f32 - 1.0), 0.10);
}

}  // namespace
}  // namespace tandem
