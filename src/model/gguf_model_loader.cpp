// Loads a GGUF file of architecture `llama`, `qwen2`, `qwen3`, `qwen3moe`, `gemma2`, `gemma3`, `phi3` or `gpt-oss`
// into a Model:
// hyperparameters from the <arch>.* keys, tensors by llama.cpp's names (qwen2 adds
// attn_{q,k,v}.bias, qwen3 attn_{q,k}_norm and a head size of its own, attention.key_length;
// phi3 fuses gate and up in ffn_up, and Q, K, V in attn_qkv, which any architecture may),
// every shape and type checked against the config. qwen2/qwen3/gemma2/gemma3/phi3 rotate half-split
// pairs (llama.cpp's NEOX RoPE); the rows stay as stored and the forward pass pairs accordingly.
// Llama 3 RoPE scaling comes as rope_freqs.weight, the rest as rope.scaling.* keys and
// LongRoPE's rope_factors_{long,short}.weight (model/rope_scaling). attention.sliding_window
// gives a window (every layer of a llama; gemma2's and gemma3's local layers, see read_gemma*_config); phi3
// ignores it, as llama.cpp does. Experts (qwen3moe; llama with expert_count > 0, Mixtral): the
// router ffn_gate_inp and the stacked ffn_{gate,up,down}_exps [n_experts, rows, cols] (GGUF
// ne = {cols, rows, n_experts}), each expert's slice a 2-D view; or, as old Mixtral conversions
// store them, one 2-D tensor per expert, ffn_{gate,up,down}.E, each its expert's view (see
// layer_experts). gpt-oss (read_gpt_oss_config):
// biases on Q/K/V/output, the router and every expert projection, attn_sinks, and its FFN norm
// named post_attention_norm.
// Matrices stay in the memory map in their stored type; 1-D norm weights are converted to
// f32 when stored otherwise. The output head is tied to token_embd when output.weight is absent.
// With ModelLoadOptions::layers only a pipeline stage's tensors are read (model/pipeline_stage.h).
#include <cmath>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/quant.h"
#include "io/gguf_file.h"
#include "model/attention_window.h"
#include "model/model.h"
#include "model/pipeline_stage.h"
#include "model/rope_scaling.h"
#include "model/tensor_slice.h"
#include "model/weight_packing.h"

namespace tandem {
namespace {

class GgufModelBuilder {
 public:
  GgufModelBuilder(const GgufFile& file, Model& model) : file_(file), model_(model) {}

  void read_config() {
    const std::string arch = file_.get_string("general.architecture").value_or("");
    TANDEM_CHECK_INPUT(arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" ||
                           arch == "gemma2" || arch == "gemma3" || arch == "phi3" || arch == "gpt-oss",
                       "unsupported architecture '{}' (Tandem runs 'llama', 'qwen2', 'qwen3', 'qwen3moe', 'gemma2', "
                       "'gemma3', 'phi3', 'gpt-oss')",
                       arch);
    // The architectures name their keys alike, under their own prefix.
    const std::string p = arch + ".";
    ModelConfig& config = model_.config;
    config.architecture = arch;
    config.d_model = required_int(p + "embedding_length");
    config.n_layers = required_int(p + "block_count");
    config.d_ff = required_int(p + "feed_forward_length");
    config.n_heads = required_int(p + "attention.head_count");
    config.n_kv_heads = file_.get_int(p + "attention.head_count_kv").value_or(config.n_heads);
    config.context_length = file_.get_int(p + "context_length").value_or(2048);
    config.rms_norm_eps = static_cast<float>(file_.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    config.rope_freq_base = static_cast<float>(file_.get_float(p + "rope.freq_base").value_or(10000.0));
    // A head's size is d_model / n_heads unless attention.key_length says otherwise (Qwen3:
    // 128 with d_model 1024 and 16 heads). Tandem keeps K and V heads the same size.
    const std::optional<int64_t> key_length = file_.get_int(p + "attention.key_length");
    if (key_length) {
      config.head_dim = *key_length;
    } else {
      TANDEM_CHECK_INPUT(config.n_heads > 0 && config.d_model % config.n_heads == 0,
                         "embedding width {} is not a multiple of the head count {}", config.d_model, config.n_heads);
      config.head_dim = config.d_model / config.n_heads;
    }
    const int64_t value_length = file_.get_int(p + "attention.value_length").value_or(config.head_dim);
    TANDEM_CHECK_INPUT(value_length == config.head_dim,
                       "attention.value_length {} differs from the key length {} (not supported)", value_length,
                       config.head_dim);
    config.rope_pairing = arch == "llama" ? RopePairing::Adjacent : RopePairing::HalfSplit;  // phi3: NEOX too
    config.qk_norm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3";
    if (arch == "llama" || arch == "qwen3moe") read_expert_config(p);
    // Only where a window means one: Qwen2 configs carry a sliding_window they do not use.
    if (arch == "llama" || arch == "gemma3")
      config.sliding_window = file_.get_int(p + "attention.sliding_window").value_or(0);
    if (arch == "gemma2") read_gemma2_config(p);
    if (arch == "gemma3") read_gemma3_config(p);
    if (arch == "gpt-oss") read_gpt_oss_config(p);
    config.rope_dims = file_.get_int(p + "rope.dimension_count").value_or(config.head_dim);
    if (file_.find_tensor("rope_freqs.weight") != nullptr) {
      const TensorView factors = vector("rope_freqs.weight", config.rope_dims / 2);
      config.rope_freq_factors.assign(factors.f32(), factors.f32() + factors.n_elements());
    }
    config.rope_scaling = read_gguf_rope_scaling(file_, p, config.rope_dims, config.context_length);
    // llama.cpp's gemma3 scales the global layers only by freq_scale, which only linear scaling
    // sets alone (its converter asserts linear); the local layers turn unscaled either way.
    if (arch == "gemma3")
      TANDEM_CHECK_INPUT(config.rope_freq_factors.empty() && (config.rope_scaling.type == RopeScalingType::None ||
                                                              config.rope_scaling.type == RopeScalingType::Linear),
                         "{}rope.scaling.type '{}' is not supported for gemma3 (linear only)", p,
                         config.rope_freq_factors.empty() ? rope_scaling_type_name(config.rope_scaling.type)
                                                          : "llama3 (rope_freqs.weight)");
    const GgufTensorInfo* embedding = file_.find_tensor("token_embd.weight");
    TANDEM_CHECK_INPUT(embedding != nullptr, "missing tensor 'token_embd.weight'");
    TANDEM_CHECK_INPUT(embedding->view.n_dims == 2, "'token_embd.weight' must be 2-D, is {}",
                       embedding->view.shape_string());
    config.vocab_size = embedding->view.dim(0);
    config.validate();
  }

  // Only the tensors of `range` (a pipeline stage's layers; the embedding at its start, the
  // final norm and head at its end) are looked at: a norm stored in another type is converted
  // here, which would read the file's pages of layers the stage does not hold.
  void read_weights(const LayerRange& range) {
    const ModelConfig& c = model_.config;
    ModelWeights& w = model_.weights;
    if (range.first == 0) w.token_embedding = matrix("token_embd.weight", c.vocab_size, c.d_model);
    if (range.end == c.n_layers) {
      w.output_norm = vector("output_norm.weight", c.d_model);
      // gpt-oss's head is never tied (llama.cpp requires output.weight). A tied head is the
      // embedding's view (the same data pointer: code tells tying by it).
      w.output =
          matrix(file_.find_tensor("output.weight") != nullptr || c.architecture == "gpt-oss" ? "output.weight"
                                                                                              : "token_embd.weight",
                 c.vocab_size, c.d_model);
    }
    w.layers.resize(static_cast<size_t>(c.n_layers));
    for (int64_t l = range.first; l < range.end; ++l) {
      const std::string prefix = fmt::format("blk.{}.", l);
      LayerWeights& layer = w.layers[static_cast<size_t>(l)];
      layer.attn_norm = vector(prefix + "attn_norm.weight", c.d_model);
      // Fused tensors are split into views of their rows (each row is whole blocks of its type,
      // so a row range is a valid matrix of the same type): the kernels see separate matrices.
      if (file_.find_tensor(prefix + "attn_qkv.weight") != nullptr) {
        const TensorView qkv = matrix(prefix + "attn_qkv.weight", c.q_width() + 2 * c.kv_width(), c.d_model);
        layer.wq = qkv.rows(0, c.q_width());
        layer.wk = qkv.rows(c.q_width(), c.kv_width());
        layer.wv = qkv.rows(c.q_width() + c.kv_width(), c.kv_width());
      } else {
        layer.wq = matrix(prefix + "attn_q.weight", c.q_width(), c.d_model);
        layer.wk = matrix(prefix + "attn_k.weight", c.kv_width(), c.d_model);
        layer.wv = matrix(prefix + "attn_v.weight", c.kv_width(), c.d_model);
      }
      layer.wo = matrix(prefix + "attn_output.weight", c.d_model, c.q_width());
      // gpt-oss names its FFN input norm post_attention_norm (llama.cpp's attn_post_norm).
      layer.ffn_norm =
          vector(prefix + (c.gpt_oss_experts ? "post_attention_norm.weight" : "ffn_norm.weight"), c.d_model);
      if (c.has_experts()) {
        layer.router = matrix(prefix + "ffn_gate_inp.weight", c.n_experts, c.d_model);
        layer.expert_gate = layer_experts(prefix, "ffn_gate", c.d_ff_expert, c.d_model);
        layer.expert_up = layer_experts(prefix, "ffn_up", c.d_ff_expert, c.d_model);
        layer.expert_down = layer_experts(prefix, "ffn_down", c.d_model, c.d_ff_expert);
      } else if (c.architecture == "phi3") {  // ffn_up holds gate (rows 0..d_ff) then up, as HF's gate_up_proj
        const TensorView gate_up = matrix(prefix + "ffn_up.weight", 2 * c.d_ff, c.d_model);
        layer.w_gate = gate_up.rows(0, c.d_ff);
        layer.w_up = gate_up.rows(c.d_ff, c.d_ff);
      } else {
        layer.w_gate = matrix(prefix + "ffn_gate.weight", c.d_ff, c.d_model);
        layer.w_up = matrix(prefix + "ffn_up.weight", c.d_ff, c.d_model);
      }
      if (!c.has_experts()) layer.w_down = matrix(prefix + "ffn_down.weight", c.d_model, c.d_ff);
      if (file_.find_tensor(prefix + "attn_qkv.bias") != nullptr) {
        const TensorView bias = vector(prefix + "attn_qkv.bias", c.q_width() + 2 * c.kv_width());
        layer.bq = make_view(bias.f32(), DType::F32, {c.q_width()});
        layer.bk = make_view(bias.f32() + c.q_width(), DType::F32, {c.kv_width()});
        layer.bv = make_view(bias.f32() + c.q_width() + c.kv_width(), DType::F32, {c.kv_width()});
      } else if (file_.find_tensor(prefix + "attn_q.bias") != nullptr || c.architecture == "qwen2" ||
                 c.architecture == "gpt-oss") {
        layer.bq = vector(prefix + "attn_q.bias", c.q_width());
        layer.bk = vector(prefix + "attn_k.bias", c.kv_width());
        layer.bv = vector(prefix + "attn_v.bias", c.kv_width());
      }
      if (c.qk_norm) {
        layer.q_norm = vector(prefix + "attn_q_norm.weight", c.head_dim);
        layer.k_norm = vector(prefix + "attn_k_norm.weight", c.head_dim);
      }
      if (c.gemma_blocks) {
        layer.post_attn_norm = vector(prefix + "post_attention_norm.weight", c.d_model);
        layer.post_ffn_norm = vector(prefix + "post_ffw_norm.weight", c.d_model);
      }
      if (c.architecture == "gpt-oss") {
        layer.bo = vector(prefix + "attn_output.bias", c.d_model);
        layer.sinks = vector(prefix + "attn_sinks.weight", c.n_heads);
        layer.router_bias = vector(prefix + "ffn_gate_inp.bias", c.n_experts);
        layer.expert_gate_bias = expert_vectors(prefix + "ffn_gate_exps.bias", c.d_ff_expert);
        layer.expert_up_bias = expert_vectors(prefix + "ffn_up_exps.bias", c.d_ff_expert);
        layer.expert_down_bias = expert_vectors(prefix + "ffn_down_exps.bias", c.d_model);
      }
    }
  }

 private:
  // Experts as llama.cpp reads them: expert_count and expert_used_count; the experts' width is
  // expert_feed_forward_length for qwen3moe (d_ff / n_experts_used without it, llama.cpp's
  // fallback) and feed_forward_length for a llama (Mixtral). Both renormalise the chosen
  // experts' weights (llama.cpp's build_moe_ffn with norm_w) unless expert_weights_norm is false.
  void read_expert_config(const std::string& p) {
    ModelConfig& config = model_.config;
    const int64_t count = file_.get_int(p + "expert_count").value_or(0);
    if (count == 0) {
      TANDEM_CHECK_INPUT(config.architecture != "qwen3moe", "missing metadata key '{}expert_count'", p);
      return;
    }
    config.n_experts = count;
    config.n_experts_used = required_int(p + "expert_used_count");
    config.d_ff_expert = config.architecture == "llama"
                             ? config.d_ff
                             : file_.get_int(p + "expert_feed_forward_length")
                                   .value_or(config.n_experts_used > 0 ? config.d_ff / config.n_experts_used : 0);
    config.expert_weights_norm = file_.get_bool(p + "expert_weights_norm").value_or(true);
    const int64_t shared = file_.get_int(p + "expert_shared_count").value_or(0);
    TANDEM_CHECK_INPUT(shared == 0, "{} shared experts (not supported)", shared);
  }

  // Gemma 3 as llama.cpp writes it: GeGLU and post-norms (gemma_blocks), Q/K head norms,
  // half-split RoPE. Its norm weights are stored with Gemma's "1 +" already added, so they are
  // plain RMSNorm weights here. With a sliding window, every `sliding_window_pattern`-th layer
  // (default 6) is global and the others local, turning at rope.freq_base_swa (default 10000).
  // The query scale is 1/sqrt(head_dim), except for the 27B shape (62 layers), whose
  // query_pre_attn_scalar is d_model / n_heads: GGUF has no key for it, and llama.cpp decides
  // by the layer count too.
  void read_gemma3_config(const std::string& p) {
    ModelConfig& config = model_.config;
    config.gemma_blocks = true;
    if (config.sliding_window > 0) {
      const int64_t period = file_.get_int(p + "attention.sliding_window_pattern").value_or(6);
      TANDEM_CHECK_INPUT(period >= 0 && period <= config.n_layers + 1,
                         "attention.sliding_window_pattern {} is out of range", period);
      config.local_layers = interleaved_local_layers(config.n_layers, period);
      config.rope_freq_base_local = static_cast<float>(file_.get_float(p + "rope.freq_base_swa").value_or(10000.0));
    }
    config.final_logit_softcap = static_cast<float>(file_.get_float(p + "final_logit_softcapping").value_or(0.0));
    if (config.n_layers == 62)
      config.attention_scale = 1.0f / std::sqrt(static_cast<float>(config.d_model / config.n_heads));
  }

  // Gemma 2 as llama.cpp reads it: Gemma blocks without Q/K head norms, half-split RoPE with
  // one base, even layers local (window attention.sliding_window, 4096 when absent) and odd
  // layers global, scores soft-capped at attn_logit_softcapping (50 when absent) and logits at
  // final_logit_softcapping (30 when absent). The query scale is 1/sqrt(key_length), except for
  // the 27B shape (46 layers), whose query_pre_attn_scalar is d_model / n_heads (as for gemma3,
  // GGUF has no key for it and llama.cpp decides by the model's size).
  void read_gemma2_config(const std::string& p) {
    ModelConfig& config = model_.config;
    config.gemma_blocks = true;
    config.sliding_window = file_.get_int(p + "attention.sliding_window").value_or(4096);
    TANDEM_CHECK_INPUT(config.sliding_window > 0, "{}attention.sliding_window {} must be positive", p,
                       config.sliding_window);
    config.local_layers = interleaved_local_layers(config.n_layers, 2);
    config.attn_logit_softcap = checked_softcap(p + "attn_logit_softcapping", 50.0);
    config.final_logit_softcap = checked_softcap(p + "final_logit_softcapping", 30.0);
    if (config.n_layers == 46)
      config.attention_scale = 1.0f / std::sqrt(static_cast<float>(config.d_model / config.n_heads));
  }

  // gpt-oss as llama.cpp reads it (LLM_ARCH_OPENAI_MOE): experts of expert_feed_forward_length
  // chosen by top-k on the biased router logits with a softmax over the chosen ones, clamped
  // SwiGLU experts with biases, attention sinks, half-split RoPE (YaRN from the rope.scaling
  // keys), and attention.sliding_window (required) in the even layers, the odd ones global
  // (llama.cpp's swa pattern 2). Scores are scaled by 1/sqrt(head_dim), as everywhere.
  void read_gpt_oss_config(const std::string& p) {
    ModelConfig& config = model_.config;
    config.n_experts = required_int(p + "expert_count");
    config.n_experts_used = required_int(p + "expert_used_count");
    config.d_ff_expert = required_int(p + "expert_feed_forward_length");
    config.gpt_oss_experts = true;
    config.attention_sinks = true;
    config.sliding_window = required_int(p + "attention.sliding_window");
    TANDEM_CHECK_INPUT(config.sliding_window > 0, "{}attention.sliding_window {} must be positive", p,
                       config.sliding_window);
    config.local_layers = interleaved_local_layers(config.n_layers, 2);
  }

  // A soft-cap key: positive and finite, `fallback` when absent.
  float checked_softcap(const std::string& key, double fallback) {
    const double cap = file_.get_float(key).value_or(fallback);
    TANDEM_CHECK_INPUT(cap > 0.0 && cap < 1e30, "'{}' is {} (a soft-cap must be positive and finite)", key, cap);
    return static_cast<float>(cap);
  }

  int64_t required_int(const std::string& key) {
    const std::optional<int64_t> value = file_.get_int(key);
    TANDEM_CHECK_INPUT(value.has_value(), "missing metadata key '{}'", key);
    return *value;
  }

  const GgufTensorInfo& tensor(const std::string& name) {
    const GgufTensorInfo* info = file_.find_tensor(name);
    TANDEM_CHECK_INPUT(info != nullptr, "missing tensor '{}'", name);
    TANDEM_CHECK_INPUT(dtype_is_computable(info->view.dtype),
                       "tensor '{}' has type {}, which Tandem cannot run yet (supported: F32, F16, BF16, Q8_0, Q4_0, "
                       "Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS)",
                       name, dtype_name(info->view.dtype));
    return *info;
  }

  TensorView matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo& info = tensor(name);
    TANDEM_CHECK_INPUT(info.view.n_dims == 2 && info.view.dim(0) == rows && info.view.dim(1) == cols,
                       "tensor '{}' has shape {}, expected [{}, {}]", name, info.view.shape_string(), rows, cols);
    return info.view;
  }

  // One layer's experts of one kind (`kind` ffn_gate, ffn_up or ffn_down; `prefix` blk.N.), a
  // 2-D view [rows, cols] each: slices of the stacked <kind>_exps, or, where the layer's experts
  // are tensors of their own (old Mixtral conversions: <kind>.E for E = 0..n_experts-1), those
  // tensors as they are. A layer is one or the other for all three kinds: a file mixing them, or
  // missing an expert, is damaged rather than a layout to guess at.
  std::vector<TensorView> layer_experts(const std::string& prefix, const std::string& kind, int64_t rows,
                                        int64_t cols) {
    const std::string first_own = prefix + "ffn_gate.0.weight";
    if (file_.find_tensor(first_own) == nullptr) {
      for (const char* other : {"ffn_gate", "ffn_up", "ffn_down"}) {
        const std::string own = fmt::format("{}{}.0.weight", prefix, other);
        TANDEM_CHECK_INPUT(file_.find_tensor(own) == nullptr,
                           "tensor '{}' is one expert's, but '{}' is missing: a layer's experts are either all "
                           "stacked (ffn_{{gate,up,down}}_exps) or all tensors of their own",
                           own, first_own);
      }
      return stacked_experts(prefix + kind + "_exps.weight", rows, cols);
    }
    for (const char* other : {"ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string stacked = fmt::format("{}{}_exps.weight", prefix, other);
      TANDEM_CHECK_INPUT(file_.find_tensor(stacked) == nullptr,
                         "tensor '{}' is stacked, but '{}' holds one expert: a layer's experts are either all "
                         "stacked or all tensors of their own",
                         stacked, first_own);
    }
    const int64_t n = model_.config.n_experts;
    const std::string past_last = fmt::format("{}{}.{}.weight", prefix, kind, n);
    TANDEM_CHECK_INPUT(file_.find_tensor(past_last) == nullptr, "tensor '{}' is past the {} experts of expert_count",
                       past_last, n);
    std::vector<TensorView> views;
    for (int64_t e = 0; e < n; ++e) {
      const std::string name = fmt::format("{}{}.{}.weight", prefix, kind, e);
      views.push_back(matrix(name, rows, cols));
      // The stacked layout has one type per kind, and the cost model and `tandem info` count a
      // kind's experts as one tensor of one type.
      TANDEM_CHECK_INPUT(views.back().dtype == views.front().dtype,
                         "tensor '{}' has type {}, but expert 0's is {}: a layer's experts of one kind share a type",
                         name, dtype_name(views.back().dtype), dtype_name(views.front().dtype));
    }
    return views;
  }

  // A stacked expert tensor [n_experts, rows, cols] as one 2-D view per expert.
  std::vector<TensorView> stacked_experts(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo& info = tensor(name);
    const int64_t n = model_.config.n_experts;
    TANDEM_CHECK_INPUT(
        info.view.n_dims == 3 && info.view.dim(0) == n && info.view.dim(1) == rows && info.view.dim(2) == cols,
        "tensor '{}' has shape {}, expected [{}, {}, {}] (experts, rows, columns)", name, info.view.shape_string(), n,
        rows, cols);
    std::vector<TensorView> views;
    for (int64_t e = 0; e < n; ++e) {
      TensorView view = make_view(info.view.row(e * rows), info.view.dtype, {rows, cols});
      views.push_back(view);
    }
    return views;
  }

  // A stacked per-expert vector [n_experts, length] (gpt-oss's expert biases) as one f32 view per expert.
  std::vector<TensorView> expert_vectors(const std::string& name, int64_t length) {
    const GgufTensorInfo& info = tensor(name);
    const int64_t n = model_.config.n_experts;
    TANDEM_CHECK_INPUT(info.view.n_dims == 2 && info.view.dim(0) == n && info.view.dim(1) == length,
                       "tensor '{}' has shape {}, expected [{}, {}] (experts, elements)", name,
                       info.view.shape_string(), n, length);
    const float* values = static_cast<const float*>(info.view.data);
    if (info.view.dtype != DType::F32) {
      auto converted = std::make_shared<std::vector<float>>(static_cast<size_t>(n * length));
      for (int64_t e = 0; e < n; ++e)
        dequantize_row(info.view.dtype, info.view.row(e), converted->data() + e * length, length);
      model_.storage.push_back(converted);
      values = converted->data();
    }
    std::vector<TensorView> views;
    for (int64_t e = 0; e < n; ++e) views.push_back(make_view(values + e * length, DType::F32, {length}));
    return views;
  }

  // Norm weights are used as f32 by the kernels; convert (once, at load) if stored otherwise.
  TensorView vector(const std::string& name, int64_t length) {
    const GgufTensorInfo& info = tensor(name);
    TANDEM_CHECK_INPUT(info.view.n_elements() == length && info.view.row_length() == length,
                       "tensor '{}' has shape {}, expected [{}]", name, info.view.shape_string(), length);
    if (info.view.dtype == DType::F32) return make_view(info.view.data, DType::F32, {length});
    auto converted = std::make_shared<std::vector<float>>(static_cast<size_t>(length));
    dequantize_row(info.view.dtype, info.view.data, converted->data(), length);
    model_.storage.push_back(converted);
    return make_view(converted->data(), DType::F32, {length});
  }

  const GgufFile& file_;
  Model& model_;
};

}  // namespace

ModelConfig read_gguf_config(const std::string& path) {
  GgufFile file = GgufFile::open(path);
  Model model;
  try {
    GgufModelBuilder(file, model).read_config();
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", path, error.what()));
  }
  return model.config;
}

std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options) {
  GgufFile file = GgufFile::open(path);
  auto model = std::make_shared<Model>();
  model->source_path = path;
  model->format = "gguf";
  try {
    GgufModelBuilder builder(file, *model);
    builder.read_config();
    const LayerRange range = options.layers.value_or(LayerRange{0, model->config.n_layers});
    check_layer_range(range, model->config.n_layers);
    builder.read_weights(range);
    if (options.layers) keep_layer_range(*model, range);
    if (options.tensor_slice) keep_tensor_slice(*model, *options.tensor_slice, file.mapping().get());
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", path, error.what()));
  }
  pack_weights_for_kernels(*model, file.mapping().get());
  model->storage.push_back(file.mapping());
  return model;
}

}  // namespace tandem
