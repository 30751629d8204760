// NgramProposer: prompt lookup proposes what followed the latest earlier occurrence of the
// newest n-gram, longest n first; a continuation that runs into the present repeats itself.
#include <gtest/gtest.h>

#include <vector>

#include "engine/speculation/ngram_proposer.h"

namespace tandem {
namespace {

std::vector<int32_t> propose(const NgramProposer& proposer, const std::vector<int32_t>& tokens, int32_t max_draft) {
  std::vector<int32_t> draft = {99, 99};  // replaced, not appended to
  proposer.propose(tokens, max_draft, draft);
  return draft;
}

TEST(NgramProposer, ProposesWhatFollowedTheLatestMatch) {
  const NgramProposer proposer(1, 3);
  // "5 6" occurred twice before; the latest occurrence (index 4) was followed by 9 1 2.
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 5, 6, 9, 1, 2, 3, 5, 6};
  EXPECT_EQ(propose(proposer, tokens, 3), (std::vector<int32_t>{9, 1, 2}));
  EXPECT_EQ(propose(proposer, tokens, 1), (std::vector<int32_t>{9}));
  EXPECT_TRUE(propose(proposer, tokens, 0).empty());
}

TEST(NgramProposer, PrefersTheLongestMatchingNgram) {
  const NgramProposer proposer(1, 3);
  // The 1-gram "4" last occurred at index 6 (followed by 0), but the 3-gram "2 3 4" only at
  // index 1 (followed by 7): the longer context wins.
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 7, 8, 4, 0, 2, 3, 4};
  EXPECT_EQ(propose(proposer, tokens, 2), (std::vector<int32_t>{7, 8}));
  const NgramProposer unigrams(1, 1);
  EXPECT_EQ(propose(unigrams, tokens, 2), (std::vector<int32_t>{0, 2}));
}

TEST(NgramProposer, RespectsTheMinimumSizeAndFindsNothingNew) {
  const NgramProposer proposer(2, 3);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 3};  // only the 1-gram "3" recurs
  EXPECT_TRUE(propose(proposer, tokens, 4).empty());
  EXPECT_TRUE(propose(proposer, {7}, 4).empty());
  EXPECT_TRUE(propose(proposer, {}, 4).empty());
}

TEST(NgramProposer, ALoopKeepsLoopingPastThePresent) {
  const NgramProposer proposer(2, 2);
  // "1 2" was seen before at index 0, followed by just "1 2" up to the present: the
  // proposal continues with the period of the match.
  const std::vector<int32_t> tokens = {1, 2, 1, 2};
  EXPECT_EQ(propose(proposer, tokens, 5), (std::vector<int32_t>{1, 2, 1, 2, 1}));
  const std::vector<int32_t> repeated = {7, 7, 7};
  EXPECT_EQ(propose(proposer, repeated, 3), (std::vector<int32_t>{7, 7, 7}));
}

}  // namespace
}  // namespace tandem
