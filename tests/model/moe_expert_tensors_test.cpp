// Mixtral GGUFs with one tensor per expert (old conversions: blk.N.ffn_{gate,up,down}.E.weight,
// each [rows, cols]) load as the stacked ffn_*_exps do: the same random test-mixtral model
// written both ways, in F32 and Q4_0, gives bit-equal logits and the same `tandem info`. A
// missing expert, a layer mixing the two layouts, an expert past expert_count, and an expert
// whose shape or type differs from its siblings' are one-line errors naming the tensor.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/quant.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/model.h"
#include "support/random_model.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::run_in_steps;
using test_support::RandomModelSpec;
using test_support::TempDir;

// gen-model's test-mixtral shape (a llama with 4 experts of width 96, 2 per token; rows of
// whole 32-blocks, so Q4_0 fits) with the random writer's small vocabulary.
RandomModelSpec test_mixtral(DType dtype, bool experts_as_own_tensors) {
  RandomModelSpec spec;
  spec.d_model = 64, spec.n_layers = 2, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96;
  spec.n_experts = 4, spec.n_experts_used = 2, spec.dtype = dtype, spec.seed = 91;
  spec.experts_as_own_tensors = experts_as_own_tensors;
  return spec;
}

std::vector<int64_t> shape_of(const TensorView& view) { return {view.shape.begin(), view.shape.begin() + view.n_dims}; }

void copy_tensor(const GgufTensorInfo& info, GgufWriter& writer, const std::string& name, std::vector<int64_t> shape) {
  const auto* bytes = static_cast<const uint8_t*>(info.view.data);
  writer.add_tensor(name, info.view.dtype, std::move(shape), std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
}

// The GGUF at `from` again at `to`: every tensor through `edit`, which returns true when it
// wrote the tensor otherwise (or left it out); the others are copied as they are.
using TensorEdit = std::function<bool(const GgufTensorInfo&, GgufWriter&)>;
void rewrite(const std::string& from, const std::string& to, const TensorEdit& edit) {
  const GgufFile file = GgufFile::open(from);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const GgufTensorInfo& info : file.tensors())
    if (!edit(info, writer)) copy_tensor(info, writer, info.name, shape_of(info.view));
  writer.write(to);
}

std::string load_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

class MoeExpertTensorsTest : public ::testing::Test {
 protected:
  // The model of `dtype` written stacked (the name's .stacked file) and per expert (.own).
  void write_both(DType dtype) {
    stacked_ = dir_.file(fmt::format("{}.stacked.gguf", dtype_name(dtype)));
    own_ = dir_.file(fmt::format("{}.own.gguf", dtype_name(dtype)));
    test_support::write_random_model(test_mixtral(dtype, false), stacked_);
    test_support::write_random_model(test_mixtral(dtype, true), own_);
  }
  TempDir dir_;
  ThreadPool pool_{2};
  std::string stacked_, own_;
};

TEST_F(MoeExpertTensorsTest, LogitsBitEqualToTheStackedFile) {
  for (DType dtype : {DType::F32, DType::Q4_0}) {
    write_both(dtype);
    const std::string what(dtype_name(dtype));
    {
      const GgufFile file = GgufFile::open(own_);
      ASSERT_NE(file.find_tensor("blk.1.ffn_down.3.weight"), nullptr) << what;
      EXPECT_EQ(file.find_tensor("blk.1.ffn_down.3.weight")->view.shape_string(), "[64, 96]") << what;
      EXPECT_EQ(file.find_tensor("blk.1.ffn_down_exps.weight"), nullptr) << what;
    }
    const auto stacked = load_model(stacked_);
    const auto own = load_model(own_);
    EXPECT_EQ(own->config.n_experts, 4) << what;
    EXPECT_EQ(own->config.d_ff_expert, 96) << what;
    EXPECT_EQ(own->weight_bytes_total(), stacked->weight_bytes_total()) << what;
    for (size_t l = 0; l < 2; ++l) {
      const LayerWeights& a = stacked->weights.layers[l];
      const LayerWeights& b = own->weights.layers[l];
      ASSERT_EQ(b.expert_gate.size(), 4u) << what;
      ASSERT_EQ(b.expert_down.size(), 4u) << what;
      for (size_t e = 0; e < 4; ++e) {
        EXPECT_EQ(b.expert_down[e].shape_string(), a.expert_down[e].shape_string()) << what;
        EXPECT_EQ(b.expert_up[e].dtype, dtype) << what;
        EXPECT_EQ(std::memcmp(b.expert_up[e].data, a.expert_up[e].data, a.expert_up[e].n_bytes()), 0)
            << what << " layer " << l << " expert " << e;
      }
    }
    const std::vector<int32_t> tokens = random_tokens(13, 67, 92);
    Forward stacked_forward(stacked, 32, pool_), own_forward(own, 32, pool_);
    for (int64_t step : {13, 1}) {  // prefill, then decode token by token
      const std::vector<float> expected = run_in_steps(stacked_forward, tokens, step);
      const std::vector<float> got = run_in_steps(own_forward, tokens, step);
      ASSERT_EQ(got.size(), expected.size()) << what;
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << what << " step " << step;
    }
  }
}

// `tandem info` says the same of both files, the expert line included (the file line aside).
TEST_F(MoeExpertTensorsTest, InfoPrintsTheExpertsAsForTheStackedFile) {
  write_both(DType::Q4_0);
  auto info_without_path = [](const std::string& path) {
    const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(path));
    EXPECT_EQ(info.exit_code, 0) << info.err;
    std::string out = info.out;
    const size_t at = out.find(path);
    if (at != std::string::npos) out.erase(at, path.size());
    return out;
  };
  const std::string stacked = info_without_path(stacked_), own = info_without_path(own_);
  EXPECT_NE(own.find("experts:         4 per layer, 2 used per token, expert width 96"), std::string::npos) << own;
  EXPECT_EQ(own, stacked);
}

TEST_F(MoeExpertTensorsTest, MalformedExpertTensorsAreOneLineErrorsNamingTheTensor) {
  write_both(DType::Q4_0);
  const std::string stacked_q4 = stacked_, own_q4 = own_;
  write_both(DType::F32);
  const GgufFile stacked_file = GgufFile::open(stacked_q4), own_file = GgufFile::open(own_q4);
  struct Bad {
    std::string name, from, expected;
    TensorEdit edit;
  };
  const std::vector<Bad> bad = {
      {"missing.gguf", own_q4, "missing tensor 'blk.1.ffn_up.2.weight'",
       [](const GgufTensorInfo& info, GgufWriter&) { return info.name == "blk.1.ffn_up.2.weight"; }},
      // Layer 1's down projections stacked, its gate and up per expert.
      {"stacked_down.gguf", own_q4, "tensor 'blk.1.ffn_down_exps.weight' is stacked, but 'blk.1.ffn_gate.0.weight'",
       [&](const GgufTensorInfo& info, GgufWriter& writer) {
         if (info.name.rfind("blk.1.ffn_down.", 0) != 0) return false;
         if (info.name == "blk.1.ffn_down.0.weight") {
           const GgufTensorInfo* down = stacked_file.find_tensor("blk.1.ffn_down_exps.weight");
           copy_tensor(*down, writer, down->name, shape_of(down->view));
         }
         return true;
       }},
      // A stacked layer 0 with one stray expert tensor.
      {"stray_expert.gguf", stacked_q4,
       "tensor 'blk.0.ffn_up.0.weight' is one expert's, but 'blk.0.ffn_gate.0.weight' is missing",
       [&](const GgufTensorInfo& info, GgufWriter& writer) {
         if (info.name != "blk.0.ffn_up_exps.weight") return false;
         copy_tensor(info, writer, info.name, shape_of(info.view));
         const GgufTensorInfo* up = own_file.find_tensor("blk.0.ffn_up.0.weight");
         copy_tensor(*up, writer, up->name, shape_of(up->view));
         return true;
       }},
      {"fifth_expert.gguf", own_q4, "tensor 'blk.0.ffn_gate.4.weight' is past the 4 experts of expert_count",
       [](const GgufTensorInfo& info, GgufWriter& writer) {
         if (info.name != "blk.0.ffn_gate.3.weight") return false;
         copy_tensor(info, writer, info.name, shape_of(info.view));
         copy_tensor(info, writer, "blk.0.ffn_gate.4.weight", shape_of(info.view));
         return true;
       }},
      {"transposed.gguf", own_, "tensor 'blk.1.ffn_down.3.weight' has shape [96, 64], expected [64, 96]",
       [](const GgufTensorInfo& info, GgufWriter& writer) {
         if (info.name != "blk.1.ffn_down.3.weight") return false;
         copy_tensor(info, writer, info.name, {96, 64});
         return true;
       }},
      // Expert 1's gate dequantized to F32 among Q4_0 siblings.
      {"f32_expert.gguf", own_q4, "tensor 'blk.0.ffn_gate.1.weight' has type F32, but expert 0's is Q4_0",
       [](const GgufTensorInfo& info, GgufWriter& writer) {
         if (info.name != "blk.0.ffn_gate.1.weight") return false;
         const int64_t rows = info.view.dim(0), cols = info.view.dim(1);
         std::vector<float> values(static_cast<size_t>(rows * cols));
         for (int64_t r = 0; r < rows; ++r)
           dequantize_row(info.view.dtype, info.view.row(r), values.data() + r * cols, cols);
         std::vector<uint8_t> bytes(values.size() * sizeof(float));
         std::memcpy(bytes.data(), values.data(), bytes.size());
         writer.add_tensor(info.name, DType::F32, {rows, cols}, std::move(bytes));
         return true;
       }},
  };
  for (const Bad& b : bad) {
    const std::string out = dir_.file(b.name);
    rewrite(b.from, out, b.edit);
    const std::string error = load_error(out);
    EXPECT_NE(error.find(b.expected), std::string::npos) << b.name << ": " << error;
    EXPECT_NE(error.find(out), std::string::npos) << b.name << ": the error names the file: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << b.name << ": one line: " << error;
  }
}

}  // namespace
}  // namespace tandem
