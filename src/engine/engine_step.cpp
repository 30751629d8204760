// Engine::step (see engine.h): one iteration of the loop as named phases — take in requests,
// sample what waited for a grammar mask, propose drafts, plan (scheduler), build the ragged
// batch (step_batch.h), run the forward pass, settle its bookkeeping, pool embedding rows,
// then each sampling chunk's output (engine_output.cpp, engine_speculation.cpp). The order of
// the phases is the engine's contract: nothing samples before the scheduler has recorded the
// pass, and a phase that can finish (and free) a request comes after every phase that reads it.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_sequence.h"
#include "engine/step_batch.h"
#include "engine/step_description.h"

namespace tandem {

bool Engine::step() {
  intake();
  sample_awaiting();
  propose_drafts();
  const StepPlan plan = scheduler_.schedule();
  if (plan.empty()) {
    update_stats();
    return false;
  }
  log_step(plan);
  const bool decode_only = build_step_batch(plan, blocks_, batch_, chunk_first_rows_);
  ProfileStep profile_step(profiler_, decode_only ? Phase::Decode : Phase::Prefill, batch_.n_tokens());
  const std::span<const float> logits = run_forward();
  settle_forward(plan);
  pool_embeddings(plan);
  take_outputs(plan, logits);
  profile_step.end();
  ++steps_;
  {
    std::lock_guard lock(mutex_);
    stats_.preemptions += static_cast<int64_t>(plan.preempted.size());
  }
  update_stats();
  return true;
}

void Engine::log_step(const StepPlan& plan) {
  if (!step_logger_) return;
  if (const std::string line = describe_step(plan, steps_); !line.empty()) step_logger_(line);
}

std::span<const float> Engine::run_forward() {
  return step_forward_ != nullptr ? step_forward_->run(forward_, batch_, cache_) : forward_.run(batch_, cache_);
}

void Engine::settle_forward(const StepPlan& plan) {
  if (profiler_ != nullptr && profiler_->tracing()) trace_requests(plan, profiler_->step_start_ns());
  scheduler_.complete(plan);
  for (const ScheduledChunk& chunk : plan.chunks)
    if (chunk.request->params.kv_export && !chunk.samples) export_blocks(*sequences_.at(chunk.request->id));
  if (draft_)
    for (const Request* request : plan.preempted) draft_->remove(request->id);  // recomputed when it returns
}

void Engine::pool_embeddings(const StepPlan& plan) {
  const int64_t d_model = model_->config.d_model;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const ScheduledChunk& chunk = plan.chunks[c];
    if (chunk.request->params.pooling == Pooling::None) continue;
    Sequence& sequence = *sequences_.at(chunk.request->id);
    sequence.pool.add_rows(*model_, chunk.start,
                           forward_.final_residual().subspan(static_cast<size_t>(chunk_first_rows_[c] * d_model),
                                                             static_cast<size_t>(chunk.n_tokens * d_model)),
                           static_cast<int64_t>(sequence.request.prompt.size()));
  }
}

void Engine::take_outputs(const StepPlan& plan, std::span<const float> logits) {
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.samples) continue;
    Sequence& sequence = *sequences_.at(chunk.request->id);
    if (chunk.request->params.pooling != Pooling::None) {
      finish_embedding(sequence);  // its logits row is not used
      row += 1;
      continue;
    }
    if (chunk.request->params.kv_export) {
      finish_prefill_only(sequence);  // nor is a prefill-only request's
      row += 1;
      continue;
    }
    ProfileOp sampling_op(profiler_, OpRole::Sampling, -1, [&] {
      return elementwise_cost(static_cast<int64_t>(vocab) * (1 + chunk.n_draft), 0,
                              2 * static_cast<int64_t>(vocab) * (1 + chunk.n_draft));
    });
    if (chunk.n_draft == 0) {
      process_sample(sequence, logits.subspan(row * vocab, vocab));
    } else {
      verify_draft(sequence, chunk.n_draft,
                   logits.subspan(row * vocab, static_cast<size_t>(1 + chunk.n_draft) * vocab));
    }
    row += static_cast<size_t>(1 + chunk.n_draft);
  }
}

void Engine::trace_requests(const StepPlan& plan, int64_t step_start_ns) {
  const int64_t now = Profiler::now_ns();
  auto ns_of = [](RequestClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& request = *chunk.request;
    const bool prefill = chunk.start < static_cast<int64_t>(request.prompt.size());
    // The first chunk after its first admission: the queue wait ends where this step began.
    if (prefill && request.n_preemptions == 0 && chunk.start == std::max<int64_t>(0, request.cached_prompt_tokens))
      profiler_->trace_request({request.id, RequestSpan::Queue, ns_of(request.times.arrival), step_start_ns, 0});
    profiler_->trace_request(
        {request.id, prefill ? RequestSpan::Prefill : RequestSpan::Decode, step_start_ns, now, chunk.n_tokens});
  }
  for (const Request* request : plan.preempted)
    profiler_->trace_request({request->id, RequestSpan::Preempted, step_start_ns, step_start_ns, 0});
}

}  // namespace tandem
