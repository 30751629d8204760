// Profiler (see profiler.h): per-op totals under one mutex (uncontended: only the stepping
// thread records, snapshot() readers are rare), the open step's bookkeeping on the stepping
// thread alone, and the trace buffers, each pool thread appending to its own.
#include "profile/profiler.h"

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"

namespace tandem {

std::string_view phase_name(Phase phase) { return phase == Phase::Prefill ? "prefill" : "decode"; }

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Setup: return "setup";
    case OpKind::Embedding: return "embedding";
    case OpKind::Norm: return "rmsnorm";
    case OpKind::Matmul: return "matmul";
    case OpKind::Bias: return "bias";
    case OpKind::Rope: return "rope + kv store";
    case OpKind::Attention: return "attention";
    case OpKind::Residual: return "residual add";
    case OpKind::Swiglu: return "swiglu";
    case OpKind::LogitsHead: return "logits head";
    case OpKind::Sampling: return "sampling";
  }
  return "?";
}

OpKind op_kind(OpRole role) {
  switch (role) {
    case OpRole::Setup: return OpKind::Setup;
    case OpRole::Embedding: return OpKind::Embedding;
    case OpRole::AttnNorm:
    case OpRole::QkNorm:
    case OpRole::FfnNorm:
    case OpRole::OutputNorm: return OpKind::Norm;
    case OpRole::Wq:
    case OpRole::Wk:
    case OpRole::Wv:
    case OpRole::Wo:
    case OpRole::Gate:
    case OpRole::Up:
    case OpRole::Down:
    case OpRole::Router: return OpKind::Matmul;
    case OpRole::Bias: return OpKind::Bias;
    case OpRole::Rope: return OpKind::Rope;
    case OpRole::Attention: return OpKind::Attention;
    case OpRole::AttnResidual:
    case OpRole::FfnResidual: return OpKind::Residual;
    case OpRole::Swiglu: return OpKind::Swiglu;
    case OpRole::Output: return OpKind::LogitsHead;
    case OpRole::Sampling: return OpKind::Sampling;
  }
  return OpKind::Setup;
}

std::string_view op_role_name(OpRole role) {
  switch (role) {
    case OpRole::Setup: return "setup";
    case OpRole::Embedding: return "token_embd";
    case OpRole::AttnNorm: return "attn_norm";
    case OpRole::Wq: return "attn_q";
    case OpRole::Wk: return "attn_k";
    case OpRole::Wv: return "attn_v";
    case OpRole::Bias: return "qkv_bias";
    case OpRole::QkNorm: return "attn_qk_norm";
    case OpRole::Rope: return "rope";
    case OpRole::Attention: return "attention";
    case OpRole::Wo: return "attn_output";
    case OpRole::AttnResidual: return "attn_residual";
    case OpRole::FfnNorm: return "ffn_norm";
    case OpRole::Gate: return "ffn_gate";
    case OpRole::Up: return "ffn_up";
    case OpRole::Swiglu: return "swiglu";
    case OpRole::Down: return "ffn_down";
    case OpRole::FfnResidual: return "ffn_residual";
    case OpRole::OutputNorm: return "output_norm";
    case OpRole::Output: return "output";
    case OpRole::Sampling: return "sampling";
    case OpRole::Router: return "ffn_gate_inp";
  }
  return "?";
}

bool is_layer_role(OpRole role) {
  switch (role) {
    case OpRole::Setup:
    case OpRole::Embedding:
    case OpRole::OutputNorm:
    case OpRole::Output:
    case OpRole::Sampling: return false;
    default: return true;
  }
}

void Profiler::prepare(int64_t n_layers) {
  TANDEM_ASSERT(n_layers >= 0);
  std::lock_guard lock(mutex_);
  if (n_layers <= n_layers_ && !sites_[0].empty()) return;
  n_layers_ = std::max(n_layers_, n_layers);
  for (std::vector<SiteStats>& sites : sites_) sites.resize(static_cast<size_t>((n_layers_ + 1) * kOpRoles));
}

void Profiler::enable_trace(int n_threads, int64_t expected_ops) {
  TANDEM_ASSERT(n_threads >= 1 && step_depth_ == 0);
  std::lock_guard lock(mutex_);
  tracing_ = true;
  // Reserved and touched now (resize, then clear keeps the pages): a first touch of a fresh
  // page during a step is a page fault, some 15 us on a VM, that would land between two ops.
  auto prepare_buffer = [](auto& buffer, int64_t n) {
    buffer.resize(static_cast<size_t>(n));
    buffer.clear();
  };
  prepare_buffer(trace_ops_, expected_ops);
  prepare_buffer(trace_steps_, expected_ops / 16);
  prepare_buffer(trace_requests_, expected_ops / 16);
  trace_chunks_.resize(static_cast<size_t>(n_threads));
  // A parallel op is a few chunks per thread (ThreadPool's kChunksPerThread).
  for (std::vector<TraceChunk>& chunks : trace_chunks_) prepare_buffer(chunks, expected_ops * 4);
}

void Profiler::begin_step(Phase phase, int64_t n_tokens) {
  if (step_depth_++ > 0) return;
  step_ignored_ = !recorded_[static_cast<size_t>(phase)];
  if (step_ignored_) return;
  phase_ = phase;
  step_tokens_ = n_tokens;
  step_op_ns_ = 0;
  step_open_.store(true, std::memory_order_release);
  step_start_ns_ = now_ns();
  if (tracing_) {
    std::lock_guard lock(mutex_);
    trace_steps_.push_back({step_start_ns_, step_start_ns_, phase, n_tokens});
  }
}

void Profiler::end_step() {
  TANDEM_ASSERT(step_depth_ > 0);
  if (--step_depth_ > 0 || step_ignored_) return;
  const int64_t end_ns = now_ns();
  {
    std::lock_guard lock(mutex_);
    if (tracing_) trace_steps_.back().end_ns = end_ns;
    PhaseTotals& totals = phases_[static_cast<size_t>(phase_)];
    ++totals.steps;
    totals.tokens += step_tokens_;
    totals.step_ns += end_ns - step_start_ns_;
    totals.op_ns += step_op_ns_;
  }
  steps_ended_.fetch_add(1, std::memory_order_release);
  step_open_.store(false, std::memory_order_release);
}

void Profiler::wait_for_step_end() const {
  const int64_t seen = steps_ended_.load(std::memory_order_acquire);
  while (step_open_.load(std::memory_order_acquire) && steps_ended_.load(std::memory_order_acquire) == seen)
    std::this_thread::yield();
}

void Profiler::record(OpRole role, int32_t layer, int64_t start_ns, int64_t end_ns, const OpCost& cost) {
  if (step_depth_ == 0 || step_ignored_) return;
  const int64_t ns = end_ns - start_ns;
  step_op_ns_ += ns;
  const auto site = static_cast<size_t>(site_index(role, layer));
  std::lock_guard lock(mutex_);
  if (tracing_)
    trace_ops_.push_back({start_ns, end_ns, role, layer, static_cast<int32_t>(trace_steps_.size()) - 1, cost});
  std::vector<SiteStats>& sites = sites_[static_cast<size_t>(phase_)];
  TANDEM_ASSERT(site < sites.size());  // prepare() was given the model's layer count
  SiteStats& stats = sites[site];
  ++stats.calls;
  stats.ns += ns;
  stats.bytes += cost.bytes;
  stats.flops += cost.flops;
  stats.peak = cost.peak;
  stats.has_weight = cost.has_weight;
  stats.weight_type = cost.weight_type;
}

void Profiler::trace_request(const TraceRequestSpan& span) {
  if (!tracing_) return;
  std::lock_guard lock(mutex_);
  trace_requests_.push_back(span);
}

void Profiler::trace_span(TraceSpan span) {
  if (!tracing_) return;
  std::lock_guard lock(mutex_);
  trace_spans_.push_back(std::move(span));
}

void Profiler::on_chunk(int thread_index, int64_t start_ns, int64_t end_ns) {
  if (!tracing_ || thread_index < 0 || static_cast<size_t>(thread_index) >= trace_chunks_.size()) return;
  trace_chunks_[static_cast<size_t>(thread_index)].push_back({start_ns, end_ns});
}

Profiler::Snapshot Profiler::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot snapshot;
  snapshot.n_layers = n_layers_;
  snapshot.phases = phases_;
  snapshot.sites = sites_;
  return snapshot;
}

void Profiler::reset() {
  std::lock_guard lock(mutex_);
  phases_ = {};
  for (std::vector<SiteStats>& sites : sites_) std::fill(sites.begin(), sites.end(), SiteStats{});
  trace_steps_.clear();
  trace_ops_.clear();
  trace_requests_.clear();
  trace_spans_.clear();
  for (std::vector<TraceChunk>& chunks : trace_chunks_) chunks.clear();
}

OpCost matmul_cost(DType weight_type, int64_t weight_bytes, int64_t n_out, int64_t n_in, int64_t n_tokens) {
  OpCost cost;
  cost.bytes = weight_bytes + n_tokens * (n_in + n_out) * static_cast<int64_t>(sizeof(float));
  cost.flops = 2 * n_out * n_in * n_tokens;
  cost.peak = uses_q8_activations(weight_type) || uses_q8k_activations(weight_type) ? Peak::Int8 : Peak::F32;
  cost.has_weight = true;
  cost.weight_type = weight_type;
  return cost;
}

OpCost elementwise_cost(int64_t read_floats, int64_t written_floats, int64_t flops) {
  OpCost cost;
  cost.bytes = (read_floats + written_floats) * static_cast<int64_t>(sizeof(float));
  cost.flops = flops;
  return cost;
}

}  // namespace tandem
