// HF folder -> GGUF. Weights come from load_hf_model (so the Q/K permutation and every shape
// check live in one place) and are streamed into GgufWriter one tensor at a time, converted
// row by row to the target type. Tokenizer keys are derived from tokenizer.json: byte-level
// BPE becomes tokenizer.ggml.model "gpt2" (tokens, token types, merges, pre-tokenizer name);
// SentencePiece-style BPE (byte_fallback, as TinyLlama/Mistral export it) becomes "llama".
#include "model/hf_to_gguf.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quant.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/attention_window.h"
#include "model/llama_file_type.h"
#include "model/model.h"
#include "model/rope_scaling.h"

namespace tandem {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// llama.cpp's token types.
constexpr int32_t kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3, kTokenUserDefined = 4, kTokenByte = 6;

// The file type code; convert writes the float types and the 32-element block types only.
uint32_t file_type_of(DType type) {
  const bool supported = type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
                         type == DType::Q4_0 || type == DType::Q5_0 || type == DType::Q5_1 || type == DType::IQ4_NL ||
                         type == DType::MXFP4;
  if (!supported)
    throw InputError(fmt::format(
        "cannot convert to type {} (use F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL or MXFP4)", dtype_name(type)));
  return *llama_file_type(type);
}

json read_json(const fs::path& path) {
  std::ifstream stream(path);
  TANDEM_CHECK_INPUT(stream.good(), "cannot open '{}'", path.string());
  json value = json::parse(stream, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(!value.is_discarded() && value.is_object(), "'{}' is not a well-formed JSON object",
                     path.string());
  return value;
}

GgufValue string_array(const std::vector<std::string>& items) {
  GgufArray elements;
  elements.reserve(items.size());
  for (const std::string& item : items) elements.push_back(GgufValue::string(item));
  return GgufValue::array(GgufValueType::String, std::move(elements));
}

// A token id from config.json (`<name>_token_id`, an int or a list) or, failing that, from
// tokenizer_config.json (`<name>_token`, a string or {"content": ...}) looked up in `ids`.
std::optional<int64_t> special_id(const json& config, const json& tokenizer_config,
                                  const std::map<std::string, int64_t>& ids, const std::string& name) {
  const auto direct = config.find(name + "_token_id");
  if (direct != config.end()) {
    if (direct->is_number_integer()) return direct->get<int64_t>();
    if (direct->is_array() && !direct->empty() && (*direct)[0].is_number_integer()) return (*direct)[0].get<int64_t>();
  }
  const auto text = tokenizer_config.find(name + "_token");
  if (text == tokenizer_config.end()) return std::nullopt;
  std::string content;
  if (text->is_string()) content = text->get<std::string>();
  if (text->is_object() && text->contains("content") && (*text)["content"].is_string())
    content = (*text)["content"].get<std::string>();
  const auto it = ids.find(content);
  return it == ids.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

// Which llama.cpp pre-tokenizer a byte-level BPE needs, from the split regex it declares.
std::string pre_tokenizer_name(const json& tokenizer, const std::string& architecture) {
  if (architecture == "qwen2" || architecture == "qwen3" || architecture == "qwen3moe")
    return "qwen2";  // Qwen3 (and its MoE) kept Qwen2's tokenizer
  const std::string pre = tokenizer.contains("pre_tokenizer") ? tokenizer["pre_tokenizer"].dump() : "";
  if (pre.find("\\\\p{N}{1,3}") != std::string::npos) return "llama-bpe";  // Llama 3's digit triples
  return "gpt-2";  // llama.cpp spells the GPT-2 pre-tokenizer with a hyphen
}

void add_tokenizer_keys(const fs::path& dir, const ModelConfig& model_config, GgufWriter& writer) {
  const fs::path tokenizer_path = dir / "tokenizer.json";
  if (!fs::exists(tokenizer_path)) return;  // weights-only conversion
  const json tokenizer = read_json(tokenizer_path);
  const json config = read_json(dir / "config.json");
  const json tokenizer_config =
      fs::exists(dir / "tokenizer_config.json") ? read_json(dir / "tokenizer_config.json") : json::object();
  const auto model_it = tokenizer.find("model");
  TANDEM_CHECK_INPUT(model_it != tokenizer.end() && model_it->is_object(), "tokenizer.json has no 'model' object");
  const json& model = *model_it;
  const std::string type = model.value("type", "BPE");
  TANDEM_CHECK_INPUT(type == "BPE", "tokenizer.json model type '{}' is not supported (BPE)", type);
  const auto vocab_it = model.find("vocab");
  TANDEM_CHECK_INPUT(vocab_it != model.end() && vocab_it->is_object(), "tokenizer.json model has no 'vocab' object");

  // id -> token over the vocabulary and the added tokens; ids past both are padding.
  std::map<std::string, int64_t> ids;
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (text, token type)
  const bool spm_style = model.value("byte_fallback", false);
  const std::string unk =
      model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  for (const auto& [text, id_json] : vocab_it->items()) {
    TANDEM_CHECK_INPUT(id_json.is_number_unsigned(), "tokenizer.json: id of '{}' is not a non-negative integer", text);
    const auto id = id_json.get<int64_t>();
    int32_t token_type = kTokenNormal;
    if (text == unk) token_type = kTokenUnknown;
    if (spm_style && text.size() == 6 && text.starts_with("<0x") && text.back() == '>') token_type = kTokenByte;
    by_id[id] = {text, token_type};
    ids[text] = id;
  }
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
    for (const json& added : tokenizer["added_tokens"]) {
      if (!added.is_object() || !added.contains("id") || !added["id"].is_number_unsigned() ||
          !added.contains("content") || !added["content"].is_string())
        continue;
      const auto id = added["id"].get<int64_t>();
      const std::string text = added["content"].get<std::string>();
      by_id[id] = {text, added.value("special", false) ? kTokenControl : kTokenUserDefined};
      ids[text] = id;
    }
  }
  TANDEM_CHECK_INPUT(!by_id.empty() && by_id.rbegin()->first < model_config.vocab_size,
                     "tokenizer.json holds token id {}, but the model's vocabulary has {} entries",
                     by_id.empty() ? 0 : by_id.rbegin()->first, model_config.vocab_size);
  // llama.cpp wants exactly one token per embedding row: fill the unused ids.
  std::vector<std::string> tokens(static_cast<size_t>(model_config.vocab_size));
  GgufArray token_types;
  for (int64_t id = 0; id < model_config.vocab_size; ++id) {
    const auto it = by_id.find(id);
    tokens[static_cast<size_t>(id)] = it != by_id.end() ? it->second.first : fmt::format("[PAD{}]", id);
    token_types.push_back(GgufValue::i32(it != by_id.end() ? it->second.second : kTokenUserDefined));
  }

  // Merges: "a b" strings, or [a, b] pairs in newer exports.
  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& merge : model["merges"]) {
      if (merge.is_string())
        merges.push_back(merge.get<std::string>());
      else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
        merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      else
        throw InputError("tokenizer.json: a merge is neither \"a b\" nor [a, b]");
    }
  }

  if (spm_style) {
    // SentencePiece encoders merge the pair whose result scores highest. A BPE ranks merges
    // instead; scoring each token by minus the rank of the merge that makes it gives the
    // same order. Tokens no merge makes (single characters, bytes, specials) rank last.
    std::vector<float> scores(tokens.size(), -static_cast<float>(merges.size() + 1));
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const size_t space = merges[rank].find(' ');
      if (space == std::string::npos) continue;
      const auto it = ids.find(merges[rank].substr(0, space) + merges[rank].substr(space + 1));
      if (it != ids.end() && scores[static_cast<size_t>(it->second)] < -static_cast<float>(rank))
        scores[static_cast<size_t>(it->second)] = -static_cast<float>(rank);
    }
    GgufArray score_values;
    for (float score : scores) score_values.push_back(GgufValue::f32(score));
    writer.set("tokenizer.ggml.model", GgufValue::string("llama"));
    writer.set("tokenizer.ggml.tokens", string_array(tokens));
    writer.set("tokenizer.ggml.scores", GgufValue::array(GgufValueType::Float32, std::move(score_values)));
    writer.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::Int32, std::move(token_types)));
  } else {
    writer.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    writer.set("tokenizer.ggml.pre", GgufValue::string(pre_tokenizer_name(tokenizer, model_config.architecture)));
    writer.set("tokenizer.ggml.tokens", string_array(tokens));
    writer.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::Int32, std::move(token_types)));
    writer.set("tokenizer.ggml.merges", string_array(merges));
  }
  for (const char* name : {"bos", "eos", "unk", "pad"}) {
    const std::optional<int64_t> id = special_id(config, tokenizer_config, ids, name);
    if (id && *id >= 0 && *id < model_config.vocab_size)
      writer.set(fmt::format("tokenizer.ggml.{}_token_id", name), GgufValue::u32(static_cast<uint32_t>(*id)));
  }
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    const auto it = tokenizer_config.find(flag);
    if (it != tokenizer_config.end() && it->is_boolean())
      writer.set(fmt::format("tokenizer.ggml.{}", flag), GgufValue::boolean(it->get<bool>()));
  }
  const auto chat_template = tokenizer_config.find("chat_template");
  if (chat_template != tokenizer_config.end() && chat_template->is_string())
    writer.set("tokenizer.chat_template", GgufValue::string(chat_template->get<std::string>()));
}

// The sliding window and Gemma 2's and 3's specifics under llama.cpp's keys. GGUF says which gemma3
// layers are global by a period only, and has no key for the query scale (llama.cpp derives
// it from the layer count): a config it cannot express is refused rather than changed.
void add_window_keys(const ModelConfig& c, GgufWriter& writer) {
  const std::string& arch = c.architecture;
  if (c.sliding_window > 0)
    writer.set(arch + ".attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
  if (arch == "gpt-oss") {
    TANDEM_CHECK_INPUT(c.local_layers == interleaved_local_layers(c.n_layers, 2),
                       "a gpt-oss layer pattern other than even layers local has no GGUF key");
    return;
  }
  if (arch == "gemma2") {
    // llama.cpp's gemma2: even layers local, odd global, one RoPE base; no key says otherwise.
    TANDEM_CHECK_INPUT(c.local_layers == interleaved_local_layers(c.n_layers, 2),
                       "a gemma2 layer pattern other than even layers local has no GGUF key");
    // llama.cpp falls back to 50 and 30 without the keys, so "no cap" cannot be written.
    TANDEM_CHECK_INPUT(c.attn_logit_softcap > 0.0f && c.final_logit_softcap > 0.0f,
                       "gemma2 without attention or final logit soft-capping has no GGUF key");
    writer.set(arch + ".attn_logit_softcapping", GgufValue::f32(c.attn_logit_softcap));
    writer.set(arch + ".final_logit_softcapping", GgufValue::f32(c.final_logit_softcap));
    TANDEM_CHECK_INPUT(c.attention_scale == 0.0f || c.n_layers == 46,
                       "query_pre_attn_scalar other than head_dim ({}) has no GGUF key", c.head_dim);
    return;
  }
  if (arch != "gemma3") return;
  if (c.sliding_window > 0) {
    int64_t period = -1;
    for (int64_t candidate = 0; candidate <= c.n_layers + 1 && period < 0; ++candidate)
      if (interleaved_local_layers(c.n_layers, candidate) == c.local_layers) period = candidate;
    TANDEM_CHECK_INPUT(period >= 0,
                       "the local/global layer pattern is not every-N-th-layer-global, which GGUF cannot say");
    writer.set(arch + ".attention.sliding_window_pattern", GgufValue::u32(static_cast<uint32_t>(period)));
    writer.set(arch + ".rope.freq_base_swa", GgufValue::f32(c.rope_freq_base_local));
  }
  if (c.final_logit_softcap > 0.0f)
    writer.set(arch + ".final_logit_softcapping", GgufValue::f32(c.final_logit_softcap));
  TANDEM_CHECK_INPUT(c.attention_scale == 0.0f || c.n_layers == 62,
                     "query_pre_attn_scalar other than head_dim ({}) has no GGUF key", c.head_dim);
}

// The configuration's keys (architecture, sizes, attention, RoPE, windows, experts) and the
// tokenizer's.
void add_model_keys(const HfConvertOptions& options, const ModelConfig& c, uint32_t file_type, GgufWriter& writer) {
  const std::string arch = c.architecture;
  auto u32 = [](int64_t value) { return GgufValue::u32(static_cast<uint32_t>(value)); };
  writer.set("general.architecture", GgufValue::string(arch));
  fs::path folder = fs::path(options.model_dir);
  if (folder.filename().empty()) folder = folder.parent_path();  // "dir/" names "dir"
  writer.set("general.name", GgufValue::string(folder.filename().string()));
  writer.set("general.file_type", GgufValue::u32(file_type));
  writer.set(arch + ".vocab_size", u32(c.vocab_size));
  writer.set(arch + ".context_length", u32(c.context_length));
  writer.set(arch + ".embedding_length", u32(c.d_model));
  writer.set(arch + ".block_count", u32(c.n_layers));
  writer.set(arch + ".feed_forward_length", u32(c.d_ff));
  writer.set(arch + ".attention.head_count", u32(c.n_heads));
  writer.set(arch + ".attention.head_count_kv", u32(c.n_kv_heads));
  // The head size, which Qwen3 does not derive from d_model / n_heads (llama.cpp reads these
  // for every architecture, defaulting to that quotient).
  writer.set(arch + ".attention.key_length", u32(c.head_dim));
  writer.set(arch + ".attention.value_length", u32(c.head_dim));
  writer.set(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_norm_eps));
  writer.set(arch + ".rope.freq_base", GgufValue::f32(c.rope_freq_base));
  writer.set(arch + ".rope.dimension_count", u32(c.rope_dims));
  add_window_keys(c, writer);
  if (c.has_experts()) {
    // llama.cpp's qwen3moe and llama both renormalise the chosen experts' weights, whatever the file.
    TANDEM_CHECK_INPUT(c.expert_weights_norm || c.gpt_oss_experts,
                       "norm_topk_prob false: llama.cpp's {} always renormalises the top-k weights, so a GGUF "
                       "would be another model (run the folder with -m instead)",
                       arch);
    writer.set(arch + ".expert_count", u32(c.n_experts));
    writer.set(arch + ".expert_used_count", u32(c.n_experts_used));
    if (arch != "llama") writer.set(arch + ".expert_feed_forward_length", u32(c.d_ff_expert));
  }
  write_gguf_rope_scaling(writer, arch + ".", c.rope_scaling);
  add_tokenizer_keys(options.model_dir, c, writer);
}

// A tensor is the rows of one or more views, one after the other (phi3's fused attn_qkv and
// ffn_up, which llama.cpp reads as one tensor, are the loader's views of Q, K, V / gate, up).
struct PendingTensor {
  std::string name;
  std::vector<TensorView> parts;
  DType type;
  bool stacked = false;  // parts are experts: [n_parts, rows, cols] rather than rows one after another

  std::vector<int64_t> shape() const {
    const TensorView& first = parts[0];
    std::vector<int64_t> dims(first.shape.begin(), first.shape.begin() + first.n_dims);
    if (stacked) {
      dims.insert(dims.begin(), static_cast<int64_t>(parts.size()));
      return dims;
    }
    for (size_t i = 1; i < parts.size(); ++i) dims[0] += parts[i].dim(0);
    return dims;
  }
};

// The tensors to write, in llama.cpp's names: matrices take the requested type unless its
// blocks do not fit the rows (then F16); norms, biases and factors stay F32.
class TensorList {
 public:
  explicit TensorList(DType matrix_type) : matrix_type_(matrix_type) {}

  void fused(const std::string& name, std::vector<TensorView> parts) {
    const int64_t block = dtype_traits(matrix_type_).block_size;
    const DType type = parts[0].row_length() % block == 0 ? matrix_type_ : DType::F16;
    tensors_.push_back({name, std::move(parts), type});
  }
  void matrix(const std::string& name, const TensorView& view) { fused(name, {view}); }
  void f32(const std::string& name, const TensorView& view) {
    if (view.data != nullptr) tensors_.push_back({name, {view}, DType::F32});
  }
  // Stacked experts (or their biases), as one [n_experts, ...] tensor of `type`.
  void stacked(const std::string& name, const std::vector<TensorView>& parts, DType type) {
    tensors_.push_back({name, parts, type, true});
  }
  void stacked_matrices(const std::string& name, const std::vector<TensorView>& parts) {
    fused(name, parts);
    tensors_.back().stacked = true;
  }
  std::vector<PendingTensor>& tensors() { return tensors_; }

 private:
  DType matrix_type_;
  std::vector<PendingTensor> tensors_;
};

// The embedding, the output norm and head, and the RoPE factor tables. freq_factors must
// outlive the writer's write.
void add_global_tensors(const ModelConfig& c, const ModelWeights& w, const std::vector<float>& freq_factors,
                        TensorList& list) {
  list.matrix("token_embd.weight", w.token_embedding);
  list.f32("output_norm.weight", w.output_norm);
  if (w.output.data != w.token_embedding.data) list.matrix("output.weight", w.output);
  if (!freq_factors.empty())
    list.f32("rope_freqs.weight",
             make_view(freq_factors.data(), DType::F32, {static_cast<int64_t>(freq_factors.size())}));
  const RopeScaling& scaling = c.rope_scaling;
  if (scaling.type == RopeScalingType::LongRope) {
    const auto pairs = static_cast<int64_t>(scaling.long_factors.size());
    list.f32("rope_factors_long.weight", make_view(scaling.long_factors.data(), DType::F32, {pairs}));
    list.f32("rope_factors_short.weight", make_view(scaling.short_factors.data(), DType::F32, {pairs}));
  }
}

// Layer l's attention tensors: norms, projections (phi3's fused), biases, Q/K norms, sinks.
void add_attention_tensors(const ModelConfig& c, const LayerWeights& layer, const std::string& p, TensorList& list) {
  list.f32(p + "attn_norm.weight", layer.attn_norm);
  if (c.architecture == "phi3") {
    list.fused(p + "attn_qkv.weight", {layer.wq, layer.wk, layer.wv});
  } else {
    list.matrix(p + "attn_q.weight", layer.wq);
    list.matrix(p + "attn_k.weight", layer.wk);
    list.matrix(p + "attn_v.weight", layer.wv);
  }
  list.f32(p + "attn_q.bias", layer.bq);
  list.f32(p + "attn_k.bias", layer.bk);
  list.f32(p + "attn_v.bias", layer.bv);
  list.f32(p + "attn_q_norm.weight", layer.q_norm);
  list.f32(p + "attn_k_norm.weight", layer.k_norm);
  list.matrix(p + "attn_output.weight", layer.wo);
  list.f32(p + "post_attention_norm.weight", layer.post_attn_norm);
  // gpt-oss names its FFN input norm post_attention_norm (llama.cpp's attn_post_norm).
  list.f32(p + (c.gpt_oss_experts ? "post_attention_norm.weight" : "ffn_norm.weight"), layer.ffn_norm);
  list.f32(p + "attn_output.bias", layer.bo);
  list.f32(p + "attn_sinks.weight", layer.sinks);
}

// Layer l's FFN tensors: the router and experts (gpt-oss's expert biases as [n_experts, width]
// F32 stacks), or the dense gate/up/down (phi3's gate and up fused).
void add_ffn_tensors(const ModelConfig& c, const LayerWeights& layer, const std::string& p, TensorList& list) {
  list.f32(p + "ffn_gate_inp.bias", layer.router_bias);
  for (const auto& [name, biases] :
       {std::pair{"ffn_gate_exps.bias", &layer.expert_gate_bias}, std::pair{"ffn_up_exps.bias", &layer.expert_up_bias},
        std::pair{"ffn_down_exps.bias", &layer.expert_down_bias}}) {
    if (!biases->empty()) list.stacked(p + name, *biases, DType::F32);
  }
  if (c.has_experts()) {
    list.f32(p + "ffn_gate_inp.weight", layer.router);  // f32, as llama.cpp's converter keeps it
    for (const auto& [name, experts] :
         {std::pair{"ffn_gate_exps.weight", &layer.expert_gate}, std::pair{"ffn_up_exps.weight", &layer.expert_up},
          std::pair{"ffn_down_exps.weight", &layer.expert_down}}) {
      if (experts->front().dtype == DType::MXFP4)  // a released gpt-oss checkpoint's: its blocks as they are
        list.stacked(p + name, *experts, DType::MXFP4);
      else
        list.stacked_matrices(p + name, *experts);
    }
  } else if (c.architecture == "phi3") {
    list.fused(p + "ffn_up.weight", {layer.w_gate, layer.w_up});  // gate rows first, as HF's gate_up_proj
  } else {
    list.matrix(p + "ffn_gate.weight", layer.w_gate);
    list.matrix(p + "ffn_up.weight", layer.w_up);
  }
  if (!c.has_experts()) list.matrix(p + "ffn_down.weight", layer.w_down);
  list.f32(p + "post_ffw_norm.weight", layer.post_ffn_norm);
}

// Each tensor's bytes are written when the writer asks: rows of the same type copied bit for
// bit, others dequantized and quantized to the tensor's type; progress after each tensor.
void add_tensor_writers(const HfConvertOptions& options, std::vector<PendingTensor>& pending, GgufWriter& writer) {
  // Shared by the writers' callbacks, which run inside writer.write.
  struct Progress {
    int64_t bytes_total = 0, bytes_done = 0, tensors_done = 0, n_tensors = 0;
  };
  auto progress = std::make_shared<Progress>();
  for (const PendingTensor& tensor : pending)
    progress->bytes_total += GgufWriter::tensor_bytes(tensor.type, tensor.shape());
  progress->n_tensors = static_cast<int64_t>(pending.size());
  for (const PendingTensor& tensor : pending) {
    writer.add_tensor(tensor.name, tensor.type, tensor.shape(), [&options, progress, tensor](std::span<uint8_t> out) {
      const int64_t cols = tensor.parts[0].row_length(), out_row_bytes = dtype_row_bytes(tensor.type, cols);
      std::vector<float> row(static_cast<size_t>(cols));
      uint8_t* dst = out.data();
      for (const TensorView& view : tensor.parts) {
        for (int64_t r = 0; r < view.n_rows(); ++r, dst += out_row_bytes) {
          if (view.dtype == tensor.type) {  // same type: bytes as stored, bit for bit
            std::memcpy(dst, view.row(r), static_cast<size_t>(out_row_bytes));
          } else {
            dequantize_row(view.dtype, view.row(r), row.data(), cols);
            quantize_row(tensor.type, row.data(), dst, cols);
          }
        }
      }
      progress->bytes_done += static_cast<int64_t>(out.size());
      if (options.progress)
        options.progress(++progress->tensors_done, progress->n_tensors, progress->bytes_done, progress->bytes_total);
    });
  }
}

}  // namespace

void convert_hf_to_gguf(const HfConvertOptions& options) {
  uint32_t file_type = file_type_of(options.type);
  const std::shared_ptr<const Model> model = load_hf_model(options.model_dir);
  const ModelConfig& c = model->config;
  const ModelWeights& w = model->weights;
  // MXFP4 experts (the released gpt-oss checkpoints) are kept and are most of the bytes: the file
  // is llama.cpp's MXFP4_MOE whatever --type the other matrices take.
  const bool mxfp4_experts = c.has_experts() && !w.layers.empty() && !w.layers[0].expert_gate.empty() &&
                             w.layers[0].expert_gate[0].dtype == DType::MXFP4;
  if (mxfp4_experts) file_type = *llama_file_type(DType::MXFP4);

  GgufWriter writer;
  add_model_keys(options, c, file_type, writer);
  TensorList list(options.type);
  const std::vector<float> freq_factors = c.rope_freq_factors;  // must outlive writer.write
  add_global_tensors(c, w, freq_factors, list);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& layer = w.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    add_attention_tensors(c, layer, p, list);
    add_ffn_tensors(c, layer, p, list);
  }
  add_tensor_writers(options, list.tensors(), writer);
  writer.write(options.out_path);
}

}  // namespace tandem
