// gpt-oss's layer beyond the common attention, from a Hugging Face checkpoint: biases on o_proj,
// the sinks, the router with its bias, and the experts in either layout: the bf16 one
// (transposed, copied out element by element) or the MXFP4 one OpenAI released (repacked into
// BlockMXFP4 by model/hf_mxfp4). Reads tensors through HfTensorReader; config.json is the
// loader's business.
#include "model/hf_gpt_oss_layer.h"

#include <cstring>

#include "base/error.h"
#include "base/quant.h"
#include "base/quant32.h"
#include "model/hf_mxfp4.h"

namespace tandem {
namespace {

// `<name>_blocks` U8 [n, rows, cols / 32, 16] and `<name>_scales` U8 [n, rows, cols / 32].
HfMxfp4Tensor mxfp4_tensor(const HfTensorReader& reader, const std::string& name, int64_t n, int64_t rows,
                           int64_t cols) {
  TANDEM_CHECK_INPUT(cols % kQ32BlockSize == 0,
                     "tensor '{}_blocks': rows of {} inputs (from config.json) are not whole MXFP4 blocks of 32", name,
                     cols);
  auto bytes = [&](const std::string& part, const std::vector<int64_t>& shape) {
    const SafetensorsTensor& found = reader.tensor(name + part);
    TANDEM_CHECK_INPUT(!found.is_float(), "tensor '{}{}' has dtype {}, expected U8 (MXFP4 {})", name, part,
                       found.stored_dtype, part == "_blocks" ? "codes" : "exponents");
    HfTensorReader::expect_shape(found.view, name + part, shape);
    return static_cast<const uint8_t*>(found.view.data);
  };
  HfMxfp4Tensor experts{.name = name, .n_experts = n, .rows = rows, .cols = cols};
  experts.blocks = bytes("_blocks", {n, rows, cols / kQ32BlockSize, 16});
  experts.scales = bytes("_scales", {n, rows, cols / kQ32BlockSize});
  return experts;
}

// The released checkpoints' experts: gate_up_proj_blocks/_scales over [n_experts, 2 d_ff_expert]
// output rows of d_model inputs (gate the even rows, up the odd ones, as the bf16 layout's
// columns), down_proj_blocks/_scales over [n_experts, d_model] rows of d_ff_expert inputs. Each
// expert's gate, up and down become [rows, cols] MXFP4 matrices (repacked, owned).
void read_mxfp4_experts(HfTensorReader& reader, const ModelConfig& c, const std::string& p, LayerWeights& layer) {
  const int64_t n = c.n_experts, d = c.d_model, width = c.d_ff_expert;
  const HfMxfp4Tensor gate_up = mxfp4_tensor(reader, p + "mlp.experts.gate_up_proj", n, 2 * width, d);
  const HfMxfp4Tensor down = mxfp4_tensor(reader, p + "mlp.experts.down_proj", n, d, width);
  for (std::vector<uint8_t>& gate : repack_hf_mxfp4_experts(gate_up, 0, 2, width))
    layer.expert_gate.push_back(reader.own(std::move(gate), DType::MXFP4, width, d));
  for (std::vector<uint8_t>& up : repack_hf_mxfp4_experts(gate_up, 1, 2, width))
    layer.expert_up.push_back(reader.own(std::move(up), DType::MXFP4, width, d));
  for (std::vector<uint8_t>& rows : repack_hf_mxfp4_experts(down, 0, 1, d))
    layer.expert_down.push_back(reader.own(std::move(rows), DType::MXFP4, d, width));
  // The experts live in the repacked copies now: let the OS drop the mapped originals' pages
  // (they would otherwise stay resident beside the copies: 12 GB in gpt-oss-20b).
  for (const char* part : {"gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"}) {
    const std::string name = p + "mlp.experts." + part;
    if (const auto mapping = reader.checkpoint().mapping_of(name)) {
      const TensorView& view = reader.tensor(name).view;
      mapping->release_pages(view.data, static_cast<size_t>(view.n_bytes()));
    }
  }
}

}  // namespace

// The biases are stacked: gate_up_proj_bias [n_experts, 2 d_ff_expert] with gate in the even
// columns and up in the odd ones, down_proj_bias [n_experts, d_model]. The bf16 layout keeps the
// matrices transposed for x @ W: gate_up_proj [n_experts, d_model, 2 d_ff_expert] (gate and up
// interleaved as in the bias), down_proj [n_experts, d_ff_expert, d_model]; each expert's
// matrices are copied out as [rows, cols] in the stored type (element by element: no rounding).
void read_hf_gpt_oss_layer(HfTensorReader& reader, const ModelConfig& c, bool mxfp4_config, const std::string& p,
                           LayerWeights& layer) {
  const int64_t n = c.n_experts, d = c.d_model, width = c.d_ff_expert;
  layer.bo = reader.vector(p + "self_attn.o_proj.bias", d);
  layer.sinks = reader.vector(p + "self_attn.sinks", c.n_heads);
  layer.router = reader.matrix(p + "mlp.router.weight", n, d);
  layer.router_bias = reader.vector(p + "mlp.router.bias", n);
  const TensorView gate_up_bias = reader.stacked(p + "mlp.experts.gate_up_proj_bias", {n, 2 * width});
  const TensorView down_bias = reader.stacked(p + "mlp.experts.down_proj_bias", {n, d});
  // Elements first, first + step, ... (count of them) of row `expert` of a [n, cols] bias, as f32.
  auto bias = [&](const TensorView& source, int64_t expert, int64_t cols, int64_t first, int64_t step, int64_t count) {
    const auto bias_element = static_cast<int64_t>(dtype_traits(source.dtype).block_bytes);
    std::vector<uint8_t> gathered(static_cast<size_t>(count * bias_element));
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(gathered.data() + i * bias_element,
                  static_cast<const uint8_t*>(source.data) + (expert * cols + first + step * i) * bias_element,
                  static_cast<size_t>(bias_element));
    std::vector<uint8_t> bytes(static_cast<size_t>(count) * sizeof(float));
    dequantize_row(source.dtype, gathered.data(), reinterpret_cast<float*>(bytes.data()), count);
    return reader.own(std::move(bytes), DType::F32, count, 0);
  };
  for (int64_t e = 0; e < n; ++e) {
    layer.expert_gate_bias.push_back(bias(gate_up_bias, e, 2 * width, 0, 2, width));
    layer.expert_up_bias.push_back(bias(gate_up_bias, e, 2 * width, 1, 2, width));
    layer.expert_down_bias.push_back(bias(down_bias, e, d, 0, 1, d));
  }
  // A quantized config without either layout's tensor: name the MXFP4 ones as missing.
  const bool mxfp4 = reader.has(p + "mlp.experts.gate_up_proj_blocks") ||
                     (mxfp4_config && !reader.has(p + "mlp.experts.gate_up_proj"));
  if (mxfp4) return read_mxfp4_experts(reader, c, p, layer);

  const TensorView gate_up = reader.stacked(p + "mlp.experts.gate_up_proj", {n, d, 2 * width});
  const TensorView down = reader.stacked(p + "mlp.experts.down_proj", {n, width, d});
  // Column `first + step * r` of the [rows_in, cols_in] matrix `source` as row r of [rows, rows_in].
  auto transposed = [&](const TensorView& source, int64_t expert, int64_t rows_in, int64_t cols_in, int64_t first,
                        int64_t step, int64_t rows) {
    const auto element = static_cast<int64_t>(dtype_traits(source.dtype).block_bytes);
    const auto* base = static_cast<const uint8_t*>(source.data) + expert * rows_in * cols_in * element;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * rows_in * element));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < rows_in; ++k)
        std::memcpy(bytes.data() + (r * rows_in + k) * element, base + (k * cols_in + first + step * r) * element,
                    static_cast<size_t>(element));
    return reader.own(std::move(bytes), source.dtype, rows, rows_in);
  };
  for (int64_t e = 0; e < n; ++e) {
    layer.expert_gate.push_back(transposed(gate_up, e, d, 2 * width, 0, 2, width));
    layer.expert_up.push_back(transposed(gate_up, e, d, 2 * width, 1, 2, width));
    layer.expert_down.push_back(transposed(down, e, width, d, 0, 1, d));
  }
}

}  // namespace tandem
