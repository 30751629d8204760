// Loads a llama2.c checkpoint (model.bin): a header of 7 int32 — dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size (negative: the classifier is a separate tensor, else it is
// shared with the embedding), seq_len — then f32 tensors in a fixed order. The views point
// straight into the memory map. llama2.c rotates pairs (2i, 2i+1) like GGUF llama files.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "io/mapped_file.h"
#include "model/model.h"
#include "model/pipeline_stage.h"
#include "model/tensor_slice.h"
#include "model/weight_packing.h"

namespace tandem {

namespace {

constexpr size_t kHeaderBytes = 28;

// The configuration a header gives: every llama2.c checkpoint is a Llama with RoPE base 10000.
ModelConfig config_from_header(const int32_t (&header)[7], const std::string& path) {
  ModelConfig config;
  config.d_model = header[0];
  config.d_ff = header[1];
  config.n_layers = header[2];
  config.n_heads = header[3];
  config.n_kv_heads = header[4];
  config.vocab_size = std::abs(static_cast<int64_t>(header[5]));
  config.context_length = header[6];
  config.head_dim = config.n_heads > 0 ? config.d_model / config.n_heads : 0;
  config.rope_dims = config.head_dim;
  config.rms_norm_eps = 1e-5f;
  config.rope_freq_base = 10000.0f;
  try {
    // llama2.c has no head size of its own: wq is [d_model, d_model].
    TANDEM_CHECK_INPUT(config.n_heads > 0 && config.d_model % config.n_heads == 0,
                       "embedding width {} is not a multiple of the head count {}", config.d_model, config.n_heads);
    config.validate();
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: not a valid llama2.c checkpoint: {}", path, error.what()));
  }
  return config;
}

}  // namespace

ModelConfig read_llama2c_config(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  TANDEM_CHECK_INPUT(file.good(), "cannot open model '{}'", path);
  int32_t header[7];
  file.read(reinterpret_cast<char*>(header), sizeof(header));
  TANDEM_CHECK_INPUT(file.gcount() == static_cast<std::streamsize>(kHeaderBytes),
                     "{}: too short for a llama2.c checkpoint ({} bytes)", path, file.gcount());
  return config_from_header(header, path);
}

std::shared_ptr<const Model> load_llama2c_model(const std::string& path, const ModelLoadOptions& options) {
  auto mapping = std::make_shared<MappedFile>(path);
  const auto bytes = mapping->bytes();
  TANDEM_CHECK_INPUT(bytes.size() >= kHeaderBytes, "{}: too short for a llama2.c checkpoint ({} bytes)", path,
                     bytes.size());
  int32_t header[7];
  std::memcpy(header, bytes.data(), sizeof(header));

  auto model = std::make_shared<Model>();
  model->source_path = path;
  model->format = "llama2.c";
  model->config = config_from_header(header, path);
  const ModelConfig& config = model->config;
  const bool shared_classifier = header[5] > 0;

  // 128-bit arithmetic: a hostile header must not overflow the size check.
  using Wide = __int128;
  const Wide d = config.d_model, L = config.n_layers, kv = config.kv_width(), ff = config.d_ff;
  const Wide V = config.vocab_size, half_head = config.head_dim / 2, ctx = config.context_length;
  // Floats in file order, to check the size before making any view.
  const Wide expected_floats = V * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d + 3 * L * ff * d + d +
                               2 * ctx * half_head + (shared_classifier ? 0 : V * d);
  const Wide expected_bytes = 28 + expected_floats * 4;
  TANDEM_CHECK_INPUT(static_cast<Wide>(bytes.size()) >= expected_bytes,
                     "{}: truncated llama2.c checkpoint: {} bytes, the header implies {}", path, bytes.size(),
                     static_cast<double>(expected_bytes));

  const float* cursor = reinterpret_cast<const float*>(bytes.data() + 28);
  auto take = [&](std::initializer_list<int64_t> shape) {
    TensorView view = make_view(cursor, DType::F32, shape);
    cursor += view.n_elements();
    return view;
  };
  ModelWeights& w = model->weights;
  w.token_embedding = take({config.vocab_size, config.d_model});
  w.layers.resize(static_cast<size_t>(L));
  // Each tensor kind is stored for all layers back to back.
  auto fill = [&](TensorView LayerWeights::*member, Wide rows, Wide cols) {
    for (LayerWeights& layer : w.layers)
      layer.*member = cols > 0 ? take({static_cast<int64_t>(rows), static_cast<int64_t>(cols)})
                               : take({static_cast<int64_t>(rows)});
  };
  fill(&LayerWeights::attn_norm, d, 0);
  fill(&LayerWeights::wq, d, d);
  fill(&LayerWeights::wk, kv, d);
  fill(&LayerWeights::wv, kv, d);
  fill(&LayerWeights::wo, d, d);
  fill(&LayerWeights::ffn_norm, d, 0);
  fill(&LayerWeights::w_gate, ff, d);  // llama2.c's w1
  fill(&LayerWeights::w_down, d, ff);  // w2
  fill(&LayerWeights::w_up, ff, d);    // w3
  w.output_norm = take({config.d_model});
  cursor += static_cast<int64_t>(2 * ctx * half_head);  // legacy freq_cis tables: RoPE is computed, not read
  w.output = shared_classifier ? w.token_embedding : take({config.vocab_size, config.d_model});
  // Views are only pointers into the map: dropping a stage's other layers before packing
  // leaves their pages unread.
  if (options.layers || options.tensor_slice) {
    try {
      if (options.layers) keep_layer_range(*model, *options.layers);
      if (options.tensor_slice) keep_tensor_slice(*model, *options.tensor_slice, mapping.get());
    } catch (const InputError& error) {
      throw InputError(fmt::format("{}: {}", path, error.what()));
    }
  }
  model->storage.push_back(mapping);
  pack_weights_for_kernels(*model, mapping.get());  // the layout the kernels read, as for GGUF
  return model;
}

}  // namespace tandem
