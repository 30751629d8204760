// Profiler: the op-level record of a forward step — each op (batch set-up, embedding, norms,
// every matmul by weight and type, bias, RoPE, attention, residual adds, SwiGLU, logits head,
// sampling) with its time, bytes and FLOPs, summed per phase (prefill, decode) and per op
// site (role x layer); optionally every op, step and thread-pool chunk kept for a trace.
// Off is a null Profiler*: instrumented code pays one branch per op and never allocates per
// step. Summaries and roofline arithmetic: profile_summary.h; the Chrome trace: trace_writer.h.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"

namespace tandem {

// A step is decode when every sequence in it has one token; any longer chunk makes it prefill.
enum class Phase : uint8_t { Prefill = 0, Decode = 1 };
constexpr int kPhases = 2;
std::string_view phase_name(Phase phase);

enum class OpKind : uint8_t {
  Setup,
  Embedding,
  Norm,
  Matmul,
  Bias,
  Rope,
  Attention,
  Residual,
  Swiglu,
  LogitsHead,
  Sampling
};
constexpr int kOpKinds = 11;
std::string_view op_kind_name(OpKind kind);

// One call site of the forward pass (or the engine); the per-layer ones repeat per layer.
enum class OpRole : uint8_t {
  Setup,      // input checks, KV slot map, RoPE angles
  Embedding,  // token rows -> residual stream
  AttnNorm,
  Wq,
  Wk,
  Wv,
  Bias,
  QkNorm,  // Qwen3's per-head RMSNorm of Q and K
  Rope,
  Attention,
  Wo,
  AttnResidual,
  FfnNorm,
  Gate,
  Up,
  Swiglu,
  Down,
  FfnResidual,
  OutputNorm,
  Output,    // the logits head
  Sampling,  // sampling, detokenizing and emitting one sequence's token (engine)
  Router,    // a mixture-of-experts layer's router logits, softmax, top-k and the weighted sum
};
constexpr int kOpRoles = 22;
OpKind op_kind(OpRole role);
// GGUF-style names: "attn_q", "ffn_down", "output", ...; "attention", "sampling" for the rest.
std::string_view op_role_name(OpRole role);
bool is_layer_role(OpRole role);

// Which compute ceiling an op is held against (profile/machine_ceilings.h): the GEMM ceilings
// for matrix products — 8-bit dot products (quantized weights) or f32 — and, for attention,
// the instruction ceiling of its arithmetic: f32 FMAs, bf16 dot products, bf16 weights and
// values with f32 scores (half its FLOPs each way), or AMX bf16 tile products.
enum class Peak : uint8_t { F32 = 0, Int8 = 1, FmaF32 = 2, Bf16 = 3, Bf16Values = 4, TileBf16 = 5 };

// What an op moves and computes, from shapes: bytes read and written (weights, activations,
// K/V rows), arithmetic operations, and the weight type of a matmul.
struct OpCost {
  int64_t bytes = 0;
  int64_t flops = 0;
  Peak peak = Peak::F32;
  bool has_weight = false;
  DType weight_type = DType::F32;
};

// Totals of one op site in one phase.
struct SiteStats {
  int64_t calls = 0;
  int64_t ns = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
  Peak peak = Peak::F32;
  bool has_weight = false;
  DType weight_type = DType::F32;
};

struct PhaseTotals {
  int64_t steps = 0;
  int64_t tokens = 0;
  int64_t step_ns = 0;  // wall time of the steps
  int64_t op_ns = 0;    // sum of their ops' times (<= step_ns: ops do not overlap)
};

// The trace's records (kept only with tracing on). Times are steady-clock nanoseconds.
struct TraceOp {
  int64_t start_ns = 0, end_ns = 0;
  OpRole role = OpRole::Setup;
  int32_t layer = -1;
  int32_t step = 0;  // index into the trace's steps
  OpCost cost;
};
struct TraceStep {
  int64_t start_ns = 0, end_ns = 0;
  Phase phase = Phase::Decode;
  int64_t n_tokens = 0;
};
struct TraceChunk {  // one parallel_for range run by one pool thread
  int64_t start_ns = 0, end_ns = 0;
};
// What a request did over a span of time, on its own track in a server's trace.
enum class RequestSpan : uint8_t { Queue, Prefill, Decode, Preempted };
struct TraceRequestSpan {
  uint64_t request_id = 0;
  RequestSpan span = RequestSpan::Queue;
  int64_t start_ns = 0, end_ns = 0;
  int64_t n_tokens = 0;  // the chunk's tokens (prefill, decode)
};

// A span on a named track of a named process in the trace: what the processes of a
// multi-process job did beside this one's engine (a pipeline stage's micro-batch, its wait, a
// KV block's transfer). Times are this profiler's clock; another process's times are brought
// into it by the caller (the clock offset measured at start-up).
struct TraceSpan {
  std::string process;  // e.g. "pipeline stage 2 (rank 1)", "kv transfer"
  std::string track;    // e.g. "compute", "queue (micro-batch 0)"
  std::string name;
  std::string category;
  int64_t start_ns = 0, end_ns = 0;
  int64_t tokens = -1, bytes = -1;  // shown in the event's args when >= 0
};

class Profiler final : public ThreadPool::ChunkObserver {
 public:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  Profiler() = default;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Sizes the per-site tables for a model of n_layers (Forward calls it when given the
  // profiler); the only allocation outside tracing.
  void prepare(int64_t n_layers);
  // Keeps every step, op and pool chunk (of pool threads 0..n_threads-1, once the pool's chunk
  // observer is this) for a trace, with room allocated and paged in for about `expected_ops`
  // ops; past that the buffers grow, the one allocation a traced step may make.
  void enable_trace(int n_threads, int64_t expected_ops = 1 << 16);
  bool tracing() const { return tracing_; }

  // Steps nest: only the outermost begin/end pair counts (the engine's step around the
  // forward pass and sampling; a bare Forward::run — benchmarks, perplexity — opens its own).
  void begin_step(Phase phase, int64_t n_tokens);
  // Steps of a phase left out are not recorded at all (the decode benchmark's prefill).
  void record_phases(bool prefill, bool decode) { recorded_ = {prefill, decode}; }
  void end_step();
  bool in_step() const { return step_depth_ > 0; }
  // From another thread: returns once the step running now (if any) has ended, so a
  // snapshot or trace taken after a request's final event includes the step that made it.
  void wait_for_step_end() const;

  // An op that ran from start_ns to end_ns inside the open step (outside one it is dropped).
  void record(OpRole role, int32_t layer, int64_t start_ns, int64_t end_ns, const OpCost& cost);

  // With tracing on: a request's span (the engine: its queue wait, each step's chunk of it,
  // a preemption). The stepping thread only.
  void trace_request(const TraceRequestSpan& span);
  // With tracing on: a span of the job's other processes or transfers. Thread-safe.
  void trace_span(TraceSpan span);
  // The open step's start (or the last step's), for spans that last a step.
  int64_t step_start_ns() const { return step_start_ns_; }

  // ThreadPool::ChunkObserver: with tracing on, each pool thread's chunks (its own buffer).
  void on_chunk(int thread_index, int64_t start_ns, int64_t end_ns) override;

  struct Snapshot {
    int64_t n_layers = 0;
    std::array<PhaseTotals, kPhases> phases{};
    // [phase][site]; site = role for whole-model roles, (layer + 1) * kOpRoles + role per layer.
    std::array<std::vector<SiteStats>, kPhases> sites;
  };
  Snapshot snapshot() const;  // thread-safe, also while the engine runs
  void reset();

  // Trace records; read them only while nothing runs (the engine idle, after
  // wait_for_step_end()). Steps and ops are appended under the mutex, chunks by each pool
  // thread inside a step's parallel loops.
  const std::vector<TraceStep>& trace_steps() const { return trace_steps_; }
  const std::vector<TraceOp>& trace_ops() const { return trace_ops_; }
  const std::vector<std::vector<TraceChunk>>& trace_chunks() const { return trace_chunks_; }
  const std::vector<TraceRequestSpan>& trace_requests() const { return trace_requests_; }
  const std::vector<TraceSpan>& trace_spans() const { return trace_spans_; }
  int64_t origin_ns() const { return origin_ns_; }

  static int64_t site_index(OpRole role, int32_t layer) {
    return layer < 0 ? static_cast<int64_t>(role) : (layer + 1) * int64_t{kOpRoles} + static_cast<int64_t>(role);
  }

 private:
  mutable std::mutex mutex_;  // the totals, against snapshot() from another thread
  int64_t n_layers_ = 0;
  std::array<PhaseTotals, kPhases> phases_{};
  std::array<std::vector<SiteStats>, kPhases> sites_;
  // The open step (the stepping thread only).
  int step_depth_ = 0;
  Phase phase_ = Phase::Decode;
  int64_t step_tokens_ = 0;
  int64_t step_start_ns_ = 0;
  int64_t step_op_ns_ = 0;
  bool step_ignored_ = false;
  std::array<bool, kPhases> recorded_{true, true};
  std::atomic<bool> step_open_{false};
  std::atomic<int64_t> steps_ended_{0};

  bool tracing_ = false;
  int64_t origin_ns_ = now_ns();
  std::vector<TraceStep> trace_steps_;
  std::vector<TraceOp> trace_ops_;
  std::vector<std::vector<TraceChunk>> trace_chunks_;  // [pool thread]
  std::vector<TraceRequestSpan> trace_requests_;
  std::vector<TraceSpan> trace_spans_;
};

// One op's scope: times it and records it on exit (or at end()). `cost` (a callable returning OpCost) runs
// only when profiling, so off costs the null check alone.
class ProfileOp {
 public:
  template <typename CostFn>
  ProfileOp(Profiler* profiler, OpRole role, int32_t layer, CostFn&& cost)
      : profiler_(profiler), role_(role), layer_(layer) {
    if (profiler_ == nullptr) return;
    cost_ = cost();
    start_ns_ = Profiler::now_ns();
  }
  ~ProfileOp() { end(); }
  // Records the op now rather than at the end of the scope.
  void end() {
    if (profiler_ != nullptr) profiler_->record(role_, layer_, start_ns_, Profiler::now_ns(), cost_);
    profiler_ = nullptr;
  }
  ProfileOp(const ProfileOp&) = delete;
  ProfileOp& operator=(const ProfileOp&) = delete;

 private:
  Profiler* profiler_;
  OpRole role_;
  int32_t layer_;
  int64_t start_ns_ = 0;
  OpCost cost_;
};

// One step's scope (nests, see Profiler::begin_step); end() closes it early.
class ProfileStep {
 public:
  ProfileStep(Profiler* profiler, Phase phase, int64_t n_tokens) : profiler_(profiler) {
    if (profiler_ != nullptr) profiler_->begin_step(phase, n_tokens);
  }
  ~ProfileStep() { end(); }
  void end() {
    if (profiler_ != nullptr) profiler_->end_step();
    profiler_ = nullptr;
  }
  ProfileStep(const ProfileStep&) = delete;
  ProfileStep& operator=(const ProfileStep&) = delete;

 private:
  Profiler* profiler_;
};

// Costs from shapes.
// out[n_tokens, n_out] = x[n_tokens, n_in] · weightᵀ: weight bytes + f32 activations in and out.
OpCost matmul_cost(DType weight_type, int64_t weight_bytes, int64_t n_out, int64_t n_in, int64_t n_tokens);
// An elementwise pass reading `read_floats` and writing `written_floats` f32 values.
OpCost elementwise_cost(int64_t read_floats, int64_t written_floats, int64_t flops);

}  // namespace tandem
