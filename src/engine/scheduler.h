// Scheduler: iteration-level (continuous) batching as plain bookkeeping. Each schedule()
// plans one step: a decode token for every decoding sequence, then prefill chunks of
// admitted and newly admitted requests under the token budget. Admission is by free KV
// blocks, reusing the longest cached prefix; when blocks run out mid-generation the newest
// sequence is preempted (blocks freed, re-queued, recomputed later). A decoding sequence with
// a proposed draft gets its proposed tokens after its pending one, from the budget left once
// every decode has its token, and only from blocks free without preempting anyone. A prefill
// chunk's tokens are weighed by their depth (SchedulerConfig::depth_equivalent).
// No model, no threads.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/request.h"
#include "kv/block_manager.h"

namespace tandem {

struct SchedulerConfig {
  int32_t max_seqs = 4;            // sequences admitted at once
  int64_t max_batch_tokens = 512;  // tokens per step, decode and prefill together (>= max_seqs)
  // A prefill token at depth d takes 1 + d / depth_equivalent of the budget (its attention
  // grows with d; ModelConfig::attention_depth_equivalent), so a step's work, and the decode
  // latency of the sequences sharing it, stays about the same deep into a long prompt. 0:
  // every token takes 1.
  double depth_equivalent = 0.0;
  // Order the waiting queue by GenerationParams::priority (lower first, then arrival), and
  // preempt the running request of the highest value (then the newest) first: vLLM's
  // --scheduling-policy priority. False: arrival order, the newest preempted first.
  bool priority = false;
};

// A run of consecutive positions of one request to compute this step.
struct ScheduledChunk {
  Request* request = nullptr;
  int64_t start = 0;  // first position
  int64_t n_tokens = 0;
  bool samples = false;  // ends at the request's last token: its logits choose the next token
  // Of n_tokens, how many are proposed tokens (request->draft) after the pending one; each
  // wants logits, and their K/V counts as computed only once verified (settle_draft()).
  int64_t n_draft = 0;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  std::vector<Request*> preempted;     // sent back to the waiting queue this step
  int64_t n_tokens = 0;

  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // `blocks` must outlive the scheduler; it decides which blocks each request holds.
  Scheduler(SchedulerConfig config, BlockManager& blocks);

  // Queues a request (tokens = prompt, state Waiting). The caller checked that it fits: its
  // prompt plus output never needs more blocks than the pool has.
  void add(Request* request);
  // Plans the next step; empty when nothing can run.
  StepPlan schedule();
  // The plan's K/V is now in the cache: advances computed positions, publishes newly full
  // blocks to the prefix cache, and moves requests whose chunk sampled to Decoding.
  void complete(const StepPlan& plan);
  // After a speculative chunk: the first n_accepted proposed tokens were kept (and appended
  // to tokens, with the next one after them); their K/V counts as computed, and the blocks
  // past the kept positions go back (the rejected positions' K/V is never read: attention
  // stops at each token's own position, and the next step overwrites it). Clears the draft.
  void settle_draft(Request* request, int64_t n_accepted);
  // Ends a request in any state (Finished or Cancelled), returning its blocks.
  void remove(Request* request, RequestState final_state);

  const std::vector<Request*>& running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  const SchedulerConfig& config() const { return config_; }
  int64_t blocks_for(int64_t n_tokens) const { return blocks_.blocks_for(n_tokens); }

 private:
  // schedule()'s three parts, each taking what it plans from `budget`, in this order:
  // 1. one decode token (plus proposals) per decoding sequence, preempting the newest when
  //    blocks run out; 2. prefill chunks of admitted requests, oldest first; 3. admission of
  //    waiting requests in order while the budget, max_seqs and blocks allow.
  void plan_decodes(StepPlan& plan, int64_t& budget);
  void plan_prefills(StepPlan& plan, int64_t& budget);
  void admit_waiting(StepPlan& plan, int64_t& budget);
  // Admits a request with blocks for its reused prefix and (windowed models) its first chunk
  // of at most first_chunk positions.
  bool admit(Request* request, int64_t first_chunk);
  // Blocks for the next n positions of a prefilling request, preempting newer requests not
  // planned this step if the pool is short; returns how many of the n it can compute now.
  int64_t hold_prefill_chunk(Request* request, int64_t n, StepPlan& plan);
  void preempt(Request* request);
  // The most tokens of a prefill chunk starting at `start` whose cost fits `budget` (at least
  // 1 while the budget is positive: every chunk makes progress).
  int64_t chunk_tokens_within(int64_t start, int64_t budget) const;
  // What a chunk of n tokens starting at `start` takes of the budget (>= n).
  int64_t chunk_cost(int64_t start, int64_t n) const;
  // Grows the request's blocks for as many of its proposed tokens as `budget` and the free
  // blocks allow, trims its draft to that, and returns the count.
  int64_t fit_draft(Request* request, int64_t budget);
  // Puts a request into the waiting queue: at the back (or, preempted, the front) in arrival
  // order; by (priority, arrival) with config_.priority.
  void enqueue(Request* request, bool preempted);

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::vector<Request*> running_;  // admitted, oldest admission first (by priority: in (priority, admission) order)
  std::deque<Request*> waiting_;   // FIFO; preempted requests go to the front
  int64_t next_admit_order_ = 0;
};

}  // namespace tandem
