// Scheduler with a fake model runner: every plan respects the token budget and the blocks it
// maps, no block leaks, prefix hits skip computed blocks, and preemption under a tiny pool
// still gives every request exactly the tokens it would get alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/scheduler.h"

namespace tandem {
namespace {

// The "model": the next token is a function of the whole sequence so far, so a recompute
// with wrong K/V positions or a lost token would change every later token.
int32_t fake_next(const std::vector<int32_t>& tokens) {
  uint32_t h = 2166136261u;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 16777619u;
  return static_cast<int32_t>(h % 1000);
}

std::vector<int32_t> expected_output(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  std::vector<int32_t> tokens = prompt, out;
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    out.push_back(fake_next(tokens));
    tokens.push_back(out.back());
  }
  return out;
}

struct FakeRun {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t max_step_tokens = 0;
  int64_t computed_tokens = 0;
};

// Drives the scheduler to completion, checking every plan against the budget and blocks.
// max_held: the most blocks any admitted request may hold after a step is planned.
FakeRun run_to_completion(Scheduler& scheduler, BlockManager& blocks, std::vector<std::unique_ptr<Request>>& requests,
                          int64_t arrive_every = 0, int64_t max_held = INT64_MAX) {
  FakeRun run;
  size_t next = 0;
  const auto arrive = [&] {
    if (next < requests.size()) scheduler.add(requests[next++].get());
  };
  if (arrive_every == 0) {
    while (next < requests.size()) arrive();
  } else {
    arrive();
  }
  while (!scheduler.idle() || next < requests.size()) {
    if (arrive_every > 0 && run.steps % arrive_every == 0) arrive();
    const StepPlan plan = scheduler.schedule();
    run.preemptions += static_cast<int64_t>(plan.preempted.size());
    ++run.steps;
    for (const Request* r : scheduler.running()) {
      EXPECT_LE(r->blocks.n_held(), max_held) << "request " << r->id << " at position " << r->n_computed;
    }
    EXPECT_LE(run.steps, 100000) << "no progress";
    if (run.steps > 100000) return run;
    int64_t n_tokens = 0;
    std::set<Request*> seen;
    for (const ScheduledChunk& chunk : plan.chunks) {
      Request* r = chunk.request;
      EXPECT_TRUE(seen.insert(r).second) << "a request twice in one step";
      EXPECT_TRUE(r->admitted());
      EXPECT_EQ(chunk.start, r->n_computed);
      EXPECT_GE(static_cast<int64_t>(r->blocks.table.size()) * blocks.block_size(), chunk.start + chunk.n_tokens);
      EXPECT_EQ(chunk.samples, chunk.start + chunk.n_tokens == static_cast<int64_t>(r->tokens.size()));
      for (int32_t b : r->blocks.table)
        if (b != kDroppedBlock) {
          EXPECT_GT(blocks.ref_count(b), 0);
        }
      n_tokens += chunk.n_tokens;
    }
    EXPECT_EQ(n_tokens, plan.n_tokens);
    EXPECT_LE(n_tokens, scheduler.config().max_batch_tokens);
    run.max_step_tokens = std::max(run.max_step_tokens, n_tokens);
    run.computed_tokens += n_tokens;
    scheduler.complete(plan);
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (!chunk.samples) continue;
      Request* r = chunk.request;
      r->append_token(fake_next(r->tokens));
      if (static_cast<int64_t>(r->generated.size()) >= r->params.max_tokens)
        scheduler.remove(r, RequestState::Finished);
    }
  }
  return run;
}

std::unique_ptr<Request> make_request(uint64_t id, std::vector<int32_t> prompt, int64_t max_tokens) {
  auto r = std::make_unique<Request>();
  r->id = id;
  r->prompt = std::move(prompt);
  r->params.max_tokens = max_tokens;
  return r;
}

std::vector<int32_t> prompt_of(int32_t seed, int32_t n) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back((seed * 31 + i * 7) % 500 + 1);
  return p;
}

void expect_outputs_and_no_leak(const std::vector<std::unique_ptr<Request>>& requests, const BlockManager& blocks) {
  for (const auto& r : requests) {
    EXPECT_EQ(r->state, RequestState::Finished);
    EXPECT_EQ(r->generated, expected_output(r->prompt, r->params.max_tokens)) << "request " << r->id;
    EXPECT_TRUE(r->blocks.table.empty());
  }
  const BlockStats s = blocks.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.free + s.cached, s.total);
}

TEST(Scheduler, BatchesManyRequestsUnderTheTokenBudget) {
  BlockManager blocks(64, 4);
  Scheduler scheduler({4, 8}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 10; ++i) requests.push_back(make_request(i, prompt_of(i, 3 + 5 * i), 6 + i));
  const FakeRun run = run_to_completion(scheduler, blocks, requests, 3);
  EXPECT_EQ(run.max_step_tokens, 8);  // the budget was the limit, and was used
  EXPECT_EQ(run.preemptions, 0);
  expect_outputs_and_no_leak(requests, blocks);
}

TEST(Scheduler, LongPromptIsChunkedWhileOthersKeepDecoding) {
  BlockManager blocks(64, 4);
  Scheduler scheduler({2, 4}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(make_request(0, prompt_of(1, 2), 30));
  requests.push_back(make_request(1, prompt_of(2, 40), 2));
  scheduler.add(requests[0].get());
  // Run request 0 into decoding, then let the long prompt arrive.
  for (int i = 0; i < 2; ++i) {
    const StepPlan plan = scheduler.schedule();
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples) c.request->append_token(fake_next(c.request->tokens));
  }
  scheduler.add(requests[1].get());
  int decode_steps_during_prefill = 0;
  while (requests[1]->state != RequestState::Decoding) {
    const StepPlan plan = scheduler.schedule();
    ASSERT_FALSE(plan.empty());
    EXPECT_EQ(plan.chunks.front().request, requests[0].get());  // the decode comes first
    EXPECT_EQ(plan.chunks.front().n_tokens, 1);
    EXPECT_LE(plan.n_tokens, 4);
    ++decode_steps_during_prefill;
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples) c.request->append_token(fake_next(c.request->tokens));
  }
  EXPECT_EQ(decode_steps_during_prefill, 14);  // 40 tokens at 3 per step
  for (auto& r : requests) scheduler.remove(r.get(), RequestState::Cancelled);
  EXPECT_EQ(blocks.stats().used, 0);
}

// With depth_equivalent D a prefill token at depth d takes 1 + d / D of the budget: the chunks
// of a long prompt shrink as it gets deeper (each chunk's cost, counted here independently of
// the scheduler's arithmetic, within the budget; every chunk makes progress), the concurrent
// decode still gets its token every step, and the outputs are those of the plain budget.
TEST(Scheduler, PrefillChunksShrinkWithDepthWithinTheBudget) {
  const int64_t budget = 64;
  const double depth_equivalent = 100.0;
  BlockManager blocks(256, 8);
  Scheduler scheduler({2, budget, depth_equivalent}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(make_request(0, prompt_of(1, 3), 400));
  requests.push_back(make_request(1, prompt_of(2, 1000), 2));
  scheduler.add(requests[0].get());
  for (int i = 0; i < 2; ++i) {  // request 0 into decoding
    const StepPlan plan = scheduler.schedule();
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples) c.request->append_token(fake_next(c.request->tokens));
  }
  scheduler.add(requests[1].get());
  std::vector<int64_t> chunk_sizes;
  while (requests[1]->state != RequestState::Decoding) {
    const StepPlan plan = scheduler.schedule();
    ASSERT_EQ(plan.chunks.size(), 2u);
    EXPECT_EQ(plan.chunks[0].request, requests[0].get());  // the decode first, one token
    EXPECT_EQ(plan.chunks[0].n_tokens, 1);
    const ScheduledChunk& chunk = plan.chunks[1];
    ASSERT_GE(chunk.n_tokens, 1);
    double attended = 0;  // token i of the chunk attends to start + i + 1 positions
    for (int64_t i = 0; i < chunk.n_tokens; ++i) attended += static_cast<double>(chunk.start + i + 1);
    const double cost = static_cast<double>(chunk.n_tokens) + attended / depth_equivalent;
    // Whole tokens of extra cost: the fraction below one is free.
    EXPECT_LT(cost, static_cast<double>(budget - 1) + 1.0) << "chunk at " << chunk.start;
    if (chunk.start + chunk.n_tokens < 1000) {  // not the last one: it used the budget
      const double one_more =
          static_cast<double>(chunk.n_tokens + 1) +
          std::floor((attended + static_cast<double>(chunk.start + chunk.n_tokens + 1)) / depth_equivalent);
      EXPECT_GT(one_more, static_cast<double>(budget - 1)) << "chunk at " << chunk.start << " could be longer";
    }
    chunk_sizes.push_back(chunk.n_tokens);
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples) c.request->append_token(fake_next(c.request->tokens));
  }
  ASSERT_GE(chunk_sizes.size(), 3u);
  EXPECT_GT(chunk_sizes.front(), 3 * chunk_sizes[chunk_sizes.size() - 2]) << "chunks did not shrink with depth";
  EXPECT_GE(chunk_sizes[chunk_sizes.size() - 2], 1);
  for (auto& r : requests) scheduler.remove(r.get(), RequestState::Cancelled);
  EXPECT_EQ(blocks.stats().used, 0);

  // Whole runs under the weighted budget give every request the tokens it would get alone.
  BlockManager more_blocks(64, 4);
  Scheduler weighted({4, 8, 3.0}, more_blocks);
  std::vector<std::unique_ptr<Request>> many;
  for (int i = 0; i < 6; ++i) many.push_back(make_request(i, prompt_of(i, 3 + 7 * i), 5 + i));
  run_to_completion(weighted, more_blocks, many, 2);
  expect_outputs_and_no_leak(many, more_blocks);
}

TEST(Scheduler, PrefixHitSkipsCachedBlocksButComputesTheLastToken) {
  BlockManager blocks(32, 4);
  Scheduler scheduler({2, 64}, blocks);
  std::vector<std::unique_ptr<Request>> first;
  first.push_back(make_request(0, prompt_of(5, 12), 3));  // exactly 3 full blocks
  const FakeRun cold = run_to_completion(scheduler, blocks, first);
  EXPECT_EQ(first[0]->cached_prompt_tokens, 0);

  std::vector<std::unique_ptr<Request>> again;
  again.push_back(make_request(1, prompt_of(5, 12), 3));  // same prompt: 2 blocks reused, last computed
  again.push_back(make_request(
      2,
      [] {  // shares the first block only
        std::vector<int32_t> p = prompt_of(5, 12);
        p[6] = 999;
        return p;
      }(),
      3));
  const FakeRun warm = run_to_completion(scheduler, blocks, again);
  EXPECT_EQ(again[0]->cached_prompt_tokens, 8);
  EXPECT_EQ(again[1]->cached_prompt_tokens, 4);
  EXPECT_LT(warm.computed_tokens, 2 * cold.computed_tokens);
  expect_outputs_and_no_leak(first, blocks);
  expect_outputs_and_no_leak(again, blocks);
  const BlockStats s = blocks.stats();
  EXPECT_EQ(s.lookup_tokens, 36);
  EXPECT_EQ(s.hit_tokens, 12);
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOutAndOutputIsUnchanged) {
  // 8 blocks of 4 tokens; each request grows to 5 + 20 = 25 tokens (7 blocks).
  BlockManager blocks(8, 4);
  Scheduler scheduler({4, 16}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(make_request(i, prompt_of(i + 20, 5), 20));
  const FakeRun run = run_to_completion(scheduler, blocks, requests);
  EXPECT_GT(run.preemptions, 0);
  int64_t preempted = 0;
  for (const auto& r : requests) preempted += r->n_preemptions;
  EXPECT_EQ(preempted, run.preemptions);
  expect_outputs_and_no_leak(requests, blocks);
}

// Sliding window 6 on every layer: a request's 45 positions need 12 blocks of 4, more than the
// pool's 10, yet three run at once without preemption, each holding only its window's blocks,
// with unchanged outputs. The same prompt again reuses a cached prefix although the blocks at
// its start were dropped (only those inside the window of where it resumes are needed).
TEST(Scheduler, SlidingWindowKeepsOnlyTheWindowsBlocks) {
  BlockManager blocks(10, 4, /*window=*/6);
  Scheduler scheduler({3, 8}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(make_request(i, prompt_of(i + 40, 5), 40));
  const FakeRun run = run_to_completion(scheduler, blocks, requests);
  EXPECT_EQ(run.preemptions, 0);
  expect_outputs_and_no_leak(requests, blocks);

  std::vector<std::unique_ptr<Request>> again;
  std::vector<int32_t> long_prompt = requests[0]->prompt;
  long_prompt.insert(long_prompt.end(), requests[0]->generated.begin(), requests[0]->generated.end());
  again.push_back(make_request(7, long_prompt, 4));
  run_to_completion(scheduler, blocks, again);
  EXPECT_GE(again[0]->cached_prompt_tokens, 36) << "blocks inside the window of the resume point were cached";
  expect_outputs_and_no_leak(again, blocks);
}

// Prompts of 100 tokens (25 blocks of 4) with a window of 6 and a budget of 8 tokens a step,
// in a pool of 9 blocks: a prompt gets its blocks a chunk at a time and gives back those
// behind the window, so no request ever holds more than the window's and a step's blocks
// (positions n-5 .. n+7: 4 blocks), the first two run side by side, and every output is
// unchanged. The third waits for blocks or is preempted, never stuck.
TEST(Scheduler, SlidingWindowPromptsTakeBlocksAChunkAtATime) {
  BlockManager blocks(9, 4, /*window=*/6);
  Scheduler scheduler({3, 8}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(make_request(i, prompt_of(i + 60, 100), 10));
  const FakeRun run = run_to_completion(scheduler, blocks, requests, 0, /*max_held=*/4);
  expect_outputs_and_no_leak(requests, blocks);
  EXPECT_EQ(run.max_step_tokens, 8);
  // Without the window the pool could not take one of these prompts at all.
  BlockManager unwindowed(9, 4);
  SequenceBlocks sequence;
  EXPECT_EQ(unwindowed.assign(sequence, prompt_of(60, 100)), -1);
}

TEST(Scheduler, CancelAnywhereReturnsEveryBlock) {
  BlockManager blocks(16, 4);
  Scheduler scheduler({2, 6}, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(make_request(i, prompt_of(i, 9), 50));
  for (auto& r : requests) scheduler.add(r.get());
  for (int step = 0; step < 5; ++step) {
    const StepPlan plan = scheduler.schedule();
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples) c.request->append_token(fake_next(c.request->tokens));
  }
  // One decoding, one prefilling or waiting: all cancellable.
  for (auto& r : requests) scheduler.remove(r.get(), RequestState::Cancelled);
  EXPECT_TRUE(scheduler.idle());
  EXPECT_EQ(blocks.stats().used, 0);
}

TEST(Scheduler, DraftTokensRideOnDecodesWithinTheBudgetAndRollBack) {
  // Two decoding sequences, a budget of 8: each decode gets its token first, proposals take
  // what is left (oldest first), and settle_draft returns the blocks of rejected positions.
  BlockManager blocks(16, 4);
  Scheduler scheduler({2, 8}, blocks);
  std::unique_ptr<Request> a = make_request(0, prompt_of(1, 5), 50), b = make_request(1, prompt_of(2, 3), 50);
  scheduler.add(a.get());
  scheduler.add(b.get());
  StepPlan plan = scheduler.schedule();  // both prompts: 5 + 3 tokens
  ASSERT_EQ(plan.n_tokens, 8);
  scheduler.complete(plan);
  a->append_token(7);
  b->append_token(8);
  ASSERT_EQ(a->state, RequestState::Decoding);

  a->draft = {1, 2, 3, 4, 5, 6, 7};
  b->draft = {9, 9};
  plan = scheduler.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].n_draft, 6);  // 8 - 2 decode tokens
  EXPECT_EQ(plan.chunks[0].n_tokens, 7);
  EXPECT_EQ(plan.chunks[1].n_draft, 0);
  EXPECT_EQ(a->draft.size(), 6u);  // trimmed to what is fed
  EXPECT_TRUE(b->draft.empty());
  EXPECT_EQ(plan.n_tokens, 8);
  EXPECT_EQ(a->blocks.table.size(), 3u);  // positions 0..11
  EXPECT_TRUE(blocks.writable_from(a->blocks, 6));
  scheduler.complete(plan);
  EXPECT_EQ(a->n_computed, 6);  // the pending token only: proposals count once kept
  EXPECT_EQ(b->n_computed, 4);
  b->append_token(3);

  // None of a's proposals kept: one new token, positions 0..6 in 2 blocks, one block back.
  const int64_t used = blocks.stats().used;
  a->append_token(42);
  scheduler.settle_draft(a.get(), 0);
  EXPECT_EQ(a->n_computed, 6);
  EXPECT_EQ(a->n_pending(), 1);
  EXPECT_EQ(a->blocks.table.size(), 2u);
  EXPECT_EQ(blocks.stats().used, used - 1);
  EXPECT_TRUE(a->draft.empty());

  // Three kept: 3 + 1 tokens appended, 9 computed, the first two blocks published.
  a->draft = {10, 11, 12, 13};
  plan = scheduler.schedule();
  ASSERT_EQ(plan.chunks[0].n_draft, 4);
  scheduler.complete(plan);
  for (int32_t t : {10, 11, 12, 77}) a->append_token(t);
  scheduler.settle_draft(a.get(), 3);
  EXPECT_EQ(a->n_computed, 10);
  EXPECT_EQ(a->n_pending(), 1);
  EXPECT_EQ(a->blocks.hashes.size(), 2u);
  EXPECT_EQ(a->blocks.table.size(), 3u);

  scheduler.remove(a.get(), RequestState::Finished);
  scheduler.remove(b.get(), RequestState::Finished);
  EXPECT_EQ(blocks.stats().used, 0);
}

TEST(Scheduler, DraftTokensNeverPreemptAnyone) {
  // A pool that holds the two sequences but not a long proposal: the proposal shrinks (to
  // what the free blocks hold, halving), and nobody is preempted for it.
  BlockManager blocks(5, 4);
  Scheduler scheduler({2, 32}, blocks);
  std::unique_ptr<Request> a = make_request(0, prompt_of(1, 7), 50), b = make_request(1, prompt_of(2, 7), 50);
  scheduler.add(a.get());
  scheduler.add(b.get());
  StepPlan plan = scheduler.schedule();
  scheduler.complete(plan);
  a->append_token(1);
  b->append_token(2);  // 8 tokens each: 2 blocks each, 1 free
  a->draft = std::vector<int32_t>(16, 5);
  plan = scheduler.schedule();
  EXPECT_TRUE(plan.preempted.empty());
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].n_draft, 4);  // 16 -> 8 -> 4: one more block
  EXPECT_EQ(blocks.stats().used, 5);
  scheduler.complete(plan);
  scheduler.remove(a.get(), RequestState::Cancelled);
  scheduler.remove(b.get(), RequestState::Cancelled);
  EXPECT_EQ(blocks.stats().used, 0);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// --scheduling-policy priority: waiting requests are admitted lowest value first, ties in
// arrival order; first come, first served without it.
TEST(Scheduler, PriorityOrdersTheWaitingQueue) {
  for (const bool by_priority : {false, true}) {
    BlockManager blocks(64, 4);
    SchedulerConfig config{1, 8};
    config.priority = by_priority;
    Scheduler scheduler(config, blocks);
    std::vector<std::unique_ptr<Request>> requests;
    const int64_t priorities[] = {5, 1, 3, 1, -2};
    for (int i = 0; i < 5; ++i) {
      requests.push_back(make_request(i, prompt_of(i, 6), 3));
      requests.back()->params.priority = priorities[i];
    }
    run_to_completion(scheduler, blocks, requests);
    std::vector<uint64_t> order(5);
    for (const auto& r : requests) order[static_cast<size_t>(r->admit_order)] = r->id;
    EXPECT_EQ(order, by_priority ? std::vector<uint64_t>({4, 1, 3, 2, 0}) : std::vector<uint64_t>({0, 1, 2, 3, 4}));
    expect_outputs_and_no_leak(requests, blocks);
  }
}

// Out of blocks, the running request of the highest priority value gives its blocks back even
// when it is the oldest; outputs are unchanged.
TEST(Scheduler, PriorityPreemptsTheLowestPriorityFirst) {
  BlockManager blocks(8, 4);
  SchedulerConfig config{4, 16};
  config.priority = true;
  Scheduler scheduler(config, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  const int64_t priorities[] = {9, 0, 0, -1};
  for (int i = 0; i < 4; ++i) {
    requests.push_back(make_request(i, prompt_of(i + 20, 5), 20));
    requests.back()->params.priority = priorities[i];
  }
  const FakeRun run = run_to_completion(scheduler, blocks, requests, 1);  // the priority-9 one first
  EXPECT_GT(run.preemptions, 0);
  EXPECT_GT(requests[0]->n_preemptions, 0);
  EXPECT_EQ(requests[3]->n_preemptions, 0);
  expect_outputs_and_no_leak(requests, blocks);
}

}  // namespace
}  // namespace tandem
