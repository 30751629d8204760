// Forward::experts_ffn, a mixture-of-experts FFN over a chunk of tokens:
//   router logits (f32, the router matrix times each normed row) -> softmax, top-k, weights
//   (model/moe_router) -> each expert's rows gathered (tokens in batch order) through that
//   expert's gate/up/down with the same matmul kernels as a dense FFN -> each token's output the
//   sum of its experts' outputs times their weights, in the token's own rank order.
// gpt-oss (ModelConfig::gpt_oss_experts): the router's bias joins its logits, top-k comes before
// a softmax over the chosen logits, and each expert adds its biases after gate, up and down,
// with clamped SwiGLU (kernels/swiglu_oai.h) between.
// Only the experts some token chose are read: a decode step reads n_experts_used of them.
// Batch invariance: the matmul kernels give every row the same bits whatever the other rows
// (kernels/kernel_table.h), routing is per row, and the sum runs over a token's own ranks, so
// which tokens share an expert, or a batch, changes no bit of any token's output.
#include <algorithm>

#include "base/error.h"
#include "kernels/elementwise.h"
#include "kernels/swiglu_oai.h"
#include "model/forward.h"
#include "model/moe_router.h"

namespace tandem {

void Forward::experts_ffn(int64_t layer, float* rows, int64_t n_rows) {
  const ModelConfig& c = model_->config;
  const LayerWeights& weights = model_->weights.layers[static_cast<size_t>(layer)];
  const int64_t d = c.d_model, width = c.d_ff_expert, n_experts = c.n_experts, n_used = c.n_experts_used;
  const auto li = static_cast<int32_t>(layer);
  TANDEM_ASSERT(n_rows <= kFfnChunkTokens && n_rows <= max_batch_tokens_);
  auto project = [&](OpRole role, const TensorView& weight, const float* x, int64_t count, float* out) {
    ProfileOp op(profiler_, role, li, [&] {
      return matmul_cost(weight.dtype, weight.n_bytes(), weight.n_rows(), weight.row_length(), count);
    });
    matmul(weight, x, count, out, pool_, matmul_scratch_);
  };
  // rows [count, bias width] += bias, when the model has it (gpt-oss).
  auto add_bias = [](const TensorView& bias, float* out, int64_t count) {
    if (bias.data == nullptr) return;
    const int64_t width = bias.n_elements();
    const float* b = bias.f32();
    for (int64_t j = 0; j < count; ++j)
      for (int64_t i = 0; i < width; ++i) out[j * width + i] += b[i];
  };
  auto bias_of = [](const std::vector<TensorView>& biases, size_t expert) {
    return biases.empty() ? TensorView{} : biases[expert];
  };

  // Route every token: [n_rows, n_experts] logits, then its n_used experts and weights.
  project(OpRole::Router, weights.router, rows, n_rows, router_logits_.data());
  ProfileOp route_op(profiler_, OpRole::Router, li,
                     [&] { return elementwise_cost(n_rows * n_experts, n_rows * n_used * 2, 4 * n_rows * n_experts); });
  add_bias(weights.router_bias, router_logits_.data(), n_rows);
  for (int64_t t = 0; t < n_rows; ++t) {
    const float* logits = router_logits_.data() + t * n_experts;
    if (c.gpt_oss_experts)
      route_token_topk_softmax(logits, n_experts, n_used, routed_experts_.data() + t * n_used,
                               routed_weights_.data() + t * n_used);
    else
      route_token(logits, n_experts, n_used, c.expert_weights_norm, router_probabilities_.data(),
                  routed_experts_.data() + t * n_used, routed_weights_.data() + t * n_used);
  }
  // Group the (token, rank) entries by expert, tokens ascending within each (a counting sort).
  std::fill(expert_first_.begin(), expert_first_.end(), 0);
  for (int64_t i = 0; i < n_rows * n_used; ++i) ++expert_first_[static_cast<size_t>(routed_experts_[i]) + 1];
  for (int64_t e = 0; e < n_experts; ++e) expert_first_[e + 1] += expert_first_[e];
  std::copy(expert_first_.begin(), expert_first_.end() - 1, router_fill_.begin());
  for (int64_t i = 0; i < n_rows * n_used; ++i)
    expert_entries_[static_cast<size_t>(router_fill_[static_cast<size_t>(routed_experts_[i])]++)] =
        static_cast<int32_t>(i);
  route_op.end();

  for (int64_t e = 0; e < n_experts; ++e) {
    const int32_t begin = expert_first_[e], end = expert_first_[e + 1];
    const int64_t count = end - begin;
    if (count == 0) continue;  // no token chose it: its weights are not read
    for (int64_t j = 0; j < count; ++j)
      std::copy_n(rows + (expert_entries_[begin + j] / n_used) * d, d, expert_in_.data() + j * d);
    const auto expert = static_cast<size_t>(e);
    project(OpRole::Gate, weights.expert_gate[expert], expert_in_.data(), count, gate_.data());
    project(OpRole::Up, weights.expert_up[expert], expert_in_.data(), count, up_.data());
    ProfileOp swiglu_op(profiler_, OpRole::Swiglu, li,
                        [&] { return elementwise_cost(2 * count * width, count * width, 5 * count * width); });
    add_bias(bias_of(weights.expert_gate_bias, expert), gate_.data(), count);
    add_bias(bias_of(weights.expert_up_bias, expert), up_.data(), count);
    const auto activation = c.gpt_oss_experts ? swiglu_oai_row : swiglu_row;
    pool_.parallel_for(count, [&](int64_t first, int64_t last, int) {
      for (int64_t j = first; j < last; ++j)
        activation(gate_.data() + j * width, up_.data() + j * width, width, gate_.data() + j * width);
    });
    swiglu_op.end();
    project(OpRole::Down, weights.expert_down[expert], gate_.data(), count, expert_out_.data());
    add_bias(bias_of(weights.expert_down_bias, expert), expert_out_.data(), count);
    for (int64_t j = 0; j < count; ++j)
      std::copy_n(expert_out_.data() + j * d, d,
                  routed_out_.data() + static_cast<int64_t>(expert_entries_[begin + j]) * d);
  }

  // Each token's weighted sum, rank 0 first: the order its own routing gave.
  ProfileOp combine_op(profiler_, OpRole::Router, li,
                       [&] { return elementwise_cost(n_rows * n_used * d, n_rows * d, 2 * n_rows * n_used * d); });
  pool_.parallel_for(n_rows, [&](int64_t first, int64_t last, int) {
    for (int64_t t = first; t < last; ++t) {
      float* out = rows + t * d;
      const float* weight = routed_weights_.data() + t * n_used;
      const float* routed = routed_out_.data() + t * n_used * d;
      for (int64_t i = 0; i < d; ++i) out[i] = weight[0] * routed[i];
      for (int64_t k = 1; k < n_used; ++k)
        for (int64_t i = 0; i < d; ++i) out[i] += weight[k] * routed[k * d + i];
    }
  });
}

}  // namespace tandem
