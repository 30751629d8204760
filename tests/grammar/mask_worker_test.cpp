// MaskWorker and the stop flag of a mask (issue 33: grammar masks are computed off the engine
// thread, and a request that ends stops its grammar work): a mask made on the worker is the
// mask made on the calling thread; a stop flag ends a mask within one check interval of
// stack work instead of at the work budget; a job stopped before it runs ends at once and is
// counted; the worker's destructor stops what it still has.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/mask_worker.h"

namespace tandem::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(std::string_view text) { return std::make_shared<const Grammar>(parse_gbnf(text)); }

// A small vocabulary: id 0 is the end token (no bytes), then runs of a, b, and filler.
std::shared_ptr<const TokenTrie> small_trie() {
  std::vector<std::string> pieces = {"", "a", "aa", "aaaa", "b", "ab"};
  for (int i = 0; i < 200; ++i) pieces.push_back(fmt::format("x{}", i));
  return std::make_shared<const TokenTrie>(pieces);
}

// ("a"?){0,2000}: one "a" can be any of 2000 places, about two million stack merges for the
// first mask, past the work budget.
constexpr const char* kOverBudget = R"(root ::= ("a"?){0,2000} "b")";

void wait_done(const MaskJob& job) {
  const auto start = std::chrono::steady_clock::now();
  while (!job.done() && std::chrono::steady_clock::now() - start < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_TRUE(job.done()) << "the worker never finished the job";
}

TEST(MaskWorker, MakesTheMaskTheCallingThreadMakes) {
  const auto trie = small_trie();
  const auto g = gbnf(R"(root ::= "a"+ "b"?)");
  GrammarMatcher here_matcher(g);
  TokenMasker here_masker(trie, {0});
  std::vector<uint32_t> here(mask_words(trie->vocab_size()));
  ASSERT_TRUE(here_masker.fill_mask(here_matcher, here));

  MaskWorker worker(nullptr);
  auto job = std::make_shared<MaskJob>(GrammarMatcher(g), TokenMasker(trie, {0}));
  worker.submit(job);
  wait_done(*job);
  EXPECT_EQ(job->outcome(), MaskJob::Outcome::Allowed);
  EXPECT_EQ(job->mask, here);
  // Then the owner advances the grammar and asks again, as the engine does every token.
  ASSERT_TRUE(job->masker.accept_token(job->matcher, 1));
  ASSERT_TRUE(here_masker.accept_token(here_matcher, 1));
  ASSERT_TRUE(here_masker.fill_mask(here_matcher, here));
  worker.submit(job);
  wait_done(*job);
  EXPECT_EQ(job->mask, here);
  EXPECT_EQ(worker.n_started(), 2u);
  EXPECT_EQ(worker.n_stopped(), 0u);
}

TEST(MaskWorker, PastTheBudgetTheJobSaysWhy) {
  MaskWorker worker(nullptr);
  auto job = std::make_shared<MaskJob>(GrammarMatcher(gbnf(kOverBudget)), TokenMasker(small_trie(), {0}));
  worker.submit(job);
  wait_done(*job);
  EXPECT_EQ(job->outcome(), MaskJob::Outcome::Error);
  EXPECT_NE(job->error().find("the per-step limit"), std::string::npos) << job->error();
}

// The stop flag is read every kStopCheckUnits units of stack work: a mask that would run to
// the budget (two million units) ends within one interval of it.
TEST(MaskWorker, AStopFlagEndsAMaskWithinACheckInterval) {
  const auto trie = small_trie();
  TokenMasker masker(trie, {0});
  GrammarMatcher m(gbnf(kOverBudget));
  std::vector<uint32_t> mask(mask_words(trie->vocab_size()));
  const std::atomic<bool> stop{true};
  EXPECT_THROW(masker.fill_mask(m, mask, &stop), MaskStopped);
  // One charge past the check can be a whole state's stacks (kMaxParseStacks).
  EXPECT_LE(m.pool().work(), StackPool::kStopCheckUnits + kMaxParseStacks + 64);
  EXPECT_GT(m.pool().work(), 0u);
}

TEST(MaskWorker, AJobStoppedBeforeItRunsEndsStopped) {
  MaskWorker worker(nullptr);
  auto job = std::make_shared<MaskJob>(GrammarMatcher(gbnf(kOverBudget)), TokenMasker(small_trie(), {0}));
  job->stop();
  worker.submit(job);
  wait_done(*job);
  EXPECT_EQ(job->outcome(), MaskJob::Outcome::Stopped);
  EXPECT_EQ(job->matcher.pool().n_slow_steps(), 0u);
  EXPECT_EQ(worker.n_stopped(), 1u);
}

// Jobs still queued or running when the worker goes are stopped, and its owner's callback
// has run for each by then.
TEST(MaskWorker, ItsDestructorStopsWhatItStillHas) {
  std::atomic<int> finished{0};
  std::vector<std::shared_ptr<MaskJob>> jobs;
  {
    MaskWorker worker([&] { ++finished; });
    for (int i = 0; i < 4; ++i) {
      jobs.push_back(std::make_shared<MaskJob>(GrammarMatcher(gbnf(kOverBudget)), TokenMasker(small_trie(), {0})));
      worker.submit(jobs.back());
    }
  }
  EXPECT_EQ(finished.load(), 4);
  for (const auto& job : jobs) {
    EXPECT_TRUE(job->done());
    // The first may have run to the budget before the destructor came.
    EXPECT_TRUE(job->outcome() == MaskJob::Outcome::Stopped || job->outcome() == MaskJob::Outcome::Error);
  }
  EXPECT_EQ(jobs.back()->outcome(), MaskJob::Outcome::Stopped);
}

}  // namespace
}  // namespace tandem::grammar
