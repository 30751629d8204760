// Sliding-window layer patterns, validation and description (see attention_window.h).
#include "model/attention_window.h"

#include <fmt/format.h>

#include "base/error.h"

namespace tandem {

std::vector<uint8_t> interleaved_local_layers(int64_t n_layers, int64_t period) {
  std::vector<uint8_t> local(static_cast<size_t>(n_layers), 1);
  if (period <= 0) return local;
  for (int64_t l = 0; l < n_layers; ++l) local[static_cast<size_t>(l)] = (l + 1) % period != 0 ? 1 : 0;
  return local;
}

void validate_attention_window(const ModelConfig& c) {
  TANDEM_CHECK_INPUT(c.sliding_window >= 0 && c.sliding_window <= (int64_t{1} << 24),
                     "sliding window {} is out of range (0..16M)", c.sliding_window);
  TANDEM_CHECK_INPUT(c.local_layers.empty() || static_cast<int64_t>(c.local_layers.size()) == c.n_layers,
                     "{} local/global layer flags for {} layers", c.local_layers.size(), c.n_layers);
  TANDEM_CHECK_INPUT(c.rope_freq_base_local == 0.0f || c.rope_freq_base_local > 1.0f,
                     "local RoPE frequency base {} is out of range", c.rope_freq_base_local);
  TANDEM_CHECK_INPUT(c.final_logit_softcap >= 0.0f && c.final_logit_softcap < 1e30f,
                     "final logit soft-cap {} is out of range", c.final_logit_softcap);
  TANDEM_CHECK_INPUT(c.attn_logit_softcap >= 0.0f && c.attn_logit_softcap < 1e30f,
                     "attention logit soft-cap {} is out of range", c.attn_logit_softcap);
}

std::string describe_attention_window(const ModelConfig& c) {
  if (c.sliding_window == 0) return "none";
  int64_t n_local = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) n_local += c.layer_window(l) > 0 ? 1 : 0;
  std::string text = fmt::format("{} positions", c.sliding_window);
  if (n_local == c.n_layers) {
    text += ", every layer (the KV cache keeps only the window)";
  } else {
    std::string globals;
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (c.layer_window(l) == 0) globals += fmt::format("{}{}", globals.empty() ? "" : ",", l);
    text += fmt::format(", {} of {} layers local, global layers {}", n_local, c.n_layers, globals);
  }
  if (c.rope_freq_base_local > 0.0f) text += fmt::format(", local RoPE base {}", c.rope_freq_base_local);
  return text;
}

}  // namespace tandem
