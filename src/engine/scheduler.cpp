// Scheduler step planning (see scheduler.h). Decodes go first so a long prompt arriving
// never stalls the sequences already generating; prefill takes what is left of the budget
// (after proposed tokens: a draft is part of a decode, and decodes come first).
#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tandem {

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks) : config_(config), blocks_(blocks) {
  TANDEM_ASSERT(config_.max_seqs > 0);
  // Every decoding sequence must fit in one step's batch.
  config_.max_batch_tokens = std::max<int64_t>(config_.max_batch_tokens, config_.max_seqs);
}

void Scheduler::add(Request* request) {
  TANDEM_ASSERT(!request->prompt.empty());
  request->state = RequestState::Waiting;
  request->tokens = request->prompt;
  request->tokens.insert(request->tokens.end(), request->generated.begin(), request->generated.end());
  request->n_computed = 0;
  enqueue(request, /*preempted=*/false);
}

void Scheduler::enqueue(Request* request, bool preempted) {
  if (!config_.priority) {
    if (preempted) {
      waiting_.push_front(request);
    } else {
      waiting_.push_back(request);
    }
    return;
  }
  // Ids grow with submission: (priority, id) is (priority, arrival), what vLLM's queue orders by.
  const auto before = [](const Request* a, const Request* b) {
    return a->params.priority != b->params.priority ? a->params.priority < b->params.priority : a->id < b->id;
  };
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), request, before), request);
}

bool Scheduler::admit(Request* request, int64_t first_chunk) {
  if (static_cast<int32_t>(running_.size()) >= config_.max_seqs) return false;
  // A mean-pooled or per-token embedding needs every prompt row's hidden state: it computes all of them.
  const bool every_row = request->params.pooling == Pooling::Mean || request->params.pooling == Pooling::Tokens;
  const int64_t cached = blocks_.assign(request->blocks, request->tokens, !every_row, first_chunk);
  if (cached < 0) return false;
  request->n_computed = cached;
  if (request->cached_prompt_tokens < 0) {
    // Counted once per request: a recompute after preemption is not a prompt lookup.
    request->cached_prompt_tokens = request->n_computed;
    blocks_.count_lookup(static_cast<int64_t>(request->prompt.size()), request->n_computed);
    request->times.admitted = RequestClock::now();
  }
  request->admit_order = next_admit_order_++;
  request->state = RequestState::Prefilling;
  running_.push_back(request);
  return true;
}

void Scheduler::preempt(Request* request) {
  blocks_.release(request->blocks);
  request->draft.clear();
  request->n_computed = 0;
  request->awaiting_sample = false;  // its recompute's last chunk computes the logits again
  request->state = RequestState::Waiting;
  ++request->n_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), request));
  enqueue(request, /*preempted=*/true);
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  // By priority, the running requests are kept in (priority, admission) order: every rule
  // below that serves "the oldest" first and preempts "the newest" (running_.back()) first
  // then serves the most important first and preempts the least important first.
  if (config_.priority)
    std::sort(running_.begin(), running_.end(), [](const Request* a, const Request* b) {
      return std::make_pair(a->params.priority, a->admit_order) < std::make_pair(b->params.priority, b->admit_order);
    });
  int64_t budget = config_.max_batch_tokens;
  plan_decodes(plan, budget);
  plan_prefills(plan, budget);
  admit_waiting(plan, budget);
  for (const ScheduledChunk& chunk : plan.chunks) plan.n_tokens += chunk.n_tokens;
  return plan;
}

void Scheduler::plan_decodes(StepPlan& plan, int64_t& budget) {
  // Proposed tokens ride on what is left once every decoding sequence has its one token.
  int64_t draft_budget = budget;
  for (const Request* request : running_)
    if (request->state == RequestState::Decoding && !request->awaiting_sample) --draft_budget;

  // Oldest first; when the pool runs dry the newest admitted sequence gives its blocks back
  // (it may be the one asking).
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* request = running_[i];
    // A sequence waiting for its grammar mask has nothing to compute until it is sampled.
    if (request->state != RequestState::Decoding || request->awaiting_sample) continue;
    TANDEM_ASSERT(request->n_pending() == 1);
    bool preempted_self = false;
    while (!blocks_.grow(request->blocks, static_cast<int64_t>(request->tokens.size()))) {
      Request* victim = running_.back();
      preempt(victim);
      plan.preempted.push_back(victim);
      if (victim == request) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // it was the newest: nothing after it is running
    const int64_t n_draft = fit_draft(request, std::max<int64_t>(0, draft_budget));
    draft_budget -= n_draft;
    plan.chunks.push_back({request, request->n_computed, 1 + n_draft, true, n_draft});
    budget -= 1 + n_draft;
  }
}

void Scheduler::plan_prefills(StepPlan& plan, int64_t& budget) {
  for (size_t i = 0; i < running_.size(); ++i) {
    if (budget <= 0) break;
    Request* request = running_[i];
    if (request->state != RequestState::Prefilling) continue;
    const int64_t n = hold_prefill_chunk(
        request, std::min(request->n_pending(), chunk_tokens_within(request->n_computed, budget)), plan);
    if (n == 0) continue;
    plan.chunks.push_back({request, request->n_computed, n, n == request->n_pending(), 0});
    budget -= chunk_cost(request->n_computed, n);
  }
}

void Scheduler::admit_waiting(StepPlan& plan, int64_t& budget) {
  // A request's cached prefix is not known before admission, so its first chunk is sized
  // from depth 0 and then trimmed to its real start.
  while (budget > 0 && !waiting_.empty() && admit(waiting_.front(), chunk_tokens_within(0, budget))) {
    Request* request = waiting_.front();
    waiting_.pop_front();
    const int64_t n = std::min(request->n_pending(), chunk_tokens_within(request->n_computed, budget));
    plan.chunks.push_back({request, request->n_computed, n, n == request->n_pending(), 0});
    budget -= chunk_cost(request->n_computed, n);
  }
}

void Scheduler::complete(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    Request* request = chunk.request;
    TANDEM_ASSERT(request->admitted() && chunk.start == request->n_computed);
    request->n_computed += chunk.n_tokens - chunk.n_draft;
    blocks_.publish_computed(request->blocks, request->tokens, request->n_computed);
    blocks_.drop_out_of_window(request->blocks, request->n_computed);
    if (chunk.samples) request->state = RequestState::Decoding;
  }
}

int64_t Scheduler::hold_prefill_chunk(Request* request, int64_t n, StepPlan& plan) {
  const int64_t end = request->n_computed + n;
  // Only a sliding-window sequence can lack blocks here (it was given them a chunk at a
  // time); the others got their whole prompt's at admission and return at once.
  while (!blocks_.grow(request->blocks, end)) {
    // Newer sequences not in this step's plan give theirs back, newest first, as a decode
    // would make them; one already planned keeps its blocks, and this one shrinks its chunk to
    // what it holds. The oldest always progresses: a request is only ever preempted by older
    // ones, and the planned ones it waits for finish their steps.
    Request* victim = running_.back();
    const bool planned = std::any_of(plan.chunks.begin(), plan.chunks.end(),
                                     [victim](const ScheduledChunk& chunk) { return chunk.request == victim; });
    if (victim == request || planned) break;
    preempt(victim);
    plan.preempted.push_back(victim);
  }
  const int64_t held = static_cast<int64_t>(request->blocks.table.size()) * blocks_.block_size();
  return std::clamp<int64_t>(held - request->n_computed, 0, n);
}

int64_t Scheduler::chunk_cost(int64_t start, int64_t n) const {
  if (config_.depth_equivalent <= 0.0) return n;
  // Token i of the chunk attends to start + i + 1 positions. Whole tokens of extra cost only
  // (rounded down): a short prompt near depth 0 still fits a budget of its own length.
  const double attended = static_cast<double>(n) * (static_cast<double>(start) + static_cast<double>(n + 1) / 2.0);
  return n + static_cast<int64_t>(std::floor(attended / config_.depth_equivalent));
}

int64_t Scheduler::chunk_tokens_within(int64_t start, int64_t budget) const {
  if (budget <= 0) return 0;
  if (config_.depth_equivalent <= 0.0) return budget;
  // chunk_cost(start, n) <= budget, solved for n (n^2 / 2D + n (1 + (start + 1/2) / D) = budget)
  // and then corrected for the rounding.
  const double d = config_.depth_equivalent;
  const double b = 1.0 + (static_cast<double>(start) + 0.5) / d;
  int64_t n = static_cast<int64_t>(d * (std::sqrt(b * b + 2.0 * static_cast<double>(budget) / d) - b));
  n = std::clamp<int64_t>(n, 1, budget);
  while (n > 1 && chunk_cost(start, n) > budget) --n;
  while (n < budget && chunk_cost(start, n + 1) <= budget) ++n;
  return n;
}

int64_t Scheduler::fit_draft(Request* request, int64_t budget) {
  const auto n_tokens = static_cast<int64_t>(request->tokens.size());
  int64_t n_draft = std::min(static_cast<int64_t>(request->draft.size()), budget);
  // Proposals never preempt anyone: they take blocks only while the pool has them.
  while (n_draft > 0 && !blocks_.grow(request->blocks, n_tokens + n_draft)) n_draft /= 2;
  blocks_.truncate(request->blocks, n_tokens + n_draft);  // what a failed grow took
  request->draft.resize(static_cast<size_t>(n_draft));
  return n_draft;
}

void Scheduler::settle_draft(Request* request, int64_t n_accepted) {
  TANDEM_ASSERT(request->state == RequestState::Decoding);
  request->n_computed += n_accepted;
  // The kept proposals plus the token sampled after them: exactly one pending token.
  TANDEM_ASSERT(request->n_pending() == 1);
  blocks_.publish_computed(request->blocks, request->tokens, request->n_computed);
  blocks_.drop_out_of_window(request->blocks, request->n_computed);
  blocks_.truncate(request->blocks, static_cast<int64_t>(request->tokens.size()));
  request->draft.clear();
}

void Scheduler::remove(Request* request, RequestState final_state) {
  TANDEM_ASSERT(final_state == RequestState::Finished || final_state == RequestState::Cancelled);
  if (request->admitted()) {
    blocks_.release(request->blocks);
    running_.erase(std::find(running_.begin(), running_.end(), request));
  } else {
    const auto it = std::find(waiting_.begin(), waiting_.end(), request);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  request->state = final_state;
}

}  // namespace tandem
