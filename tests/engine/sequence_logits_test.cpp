// sequence_logits (engine/sequence_logits.h) and `tandem logits`: every position's logits of a
// teacher-forced sequence equal decoding it one token at a time, whatever the batch pieces; the
// command writes exactly those floats; bad input is an InputError or exit code 1.
#include "engine/sequence_logits.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "support/random_model.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

class SequenceLogitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_support::RandomModelSpec spec;
    spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96, spec.vocab_size = 67;
    spec.context_length = 64, spec.seed = 23, spec.dtype = DType::Q8_0;
    path_ = dir_.file("model.gguf");
    test_support::write_random_model(spec, path_);
    model_ = load_model(path_);
    std::mt19937 rng(9);
    std::uniform_int_distribution<int32_t> id(0, 66);
    for (int i = 0; i < 50; ++i) tokens_.push_back(id(rng));
  }
  test_support::TempDir dir_;
  std::string path_;
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  ThreadPool pool_{2};
};

TEST_F(SequenceLogitsTest, EveryRowIsWhatDecodingGivesWhateverTheBatch) {
  Forward forward(model_, 64, pool_);
  const int64_t vocab = 67;
  const std::vector<float> whole = sequence_logits(forward, tokens_, 64, kDefaultKvTypes);
  ASSERT_EQ(whole.size(), tokens_.size() * vocab);
  // Pieces of 1 are decoding: each token alone after the cached prefix.
  for (int64_t batch : {1, 7, 16}) {
    const std::vector<float> pieces = sequence_logits(forward, tokens_, batch, kDefaultKvTypes);
    ASSERT_EQ(std::memcmp(pieces.data(), whole.data(), whole.size() * sizeof(float)), 0) << "batch " << batch;
  }
  // Row i depends on tokens 0..i only: a prefix's rows are the whole sequence's first rows.
  const std::vector<float> prefix =
      sequence_logits(forward, std::span(tokens_).first(20), 64, KvTypes{DType::F16, DType::F16});
  EXPECT_EQ(std::memcmp(prefix.data(), whole.data(), prefix.size() * sizeof(float)), 0);
  // Not all rows alike (the positions see different histories).
  EXPECT_NE(std::memcmp(whole.data(), whole.data() + vocab, vocab * sizeof(float)), 0);
}

TEST_F(SequenceLogitsTest, BadSequencesAreInputErrors) {
  Forward forward(model_, 64, pool_);
  EXPECT_THROW(sequence_logits(forward, {}, 64, kDefaultKvTypes), InputError);
  const std::vector<int32_t> too_long(65, 1);
  EXPECT_THROW(sequence_logits(forward, too_long, 64, kDefaultKvTypes), InputError);
  const std::vector<int32_t> out_of_vocab = {1, 67};
  EXPECT_THROW(sequence_logits(forward, out_of_vocab, 64, kDefaultKvTypes), InputError);
}

TEST_F(SequenceLogitsTest, CommandWritesTheRowsAsFloat32) {
  const std::string ids_path = dir_.file("ids.txt"), out_path = dir_.file("logits.f32");
  {
    std::ofstream ids(ids_path);
    for (size_t i = 0; i < tokens_.size(); ++i) ids << tokens_[i] << (i % 2 ? ", " : "\n");
  }
  const testing::CommandResult result =
      testing::run_tandem("logits -m " + testing::shell_quote(path_) + " -f " + testing::shell_quote(ids_path) +
                          " -o " + testing::shell_quote(out_path) + " -b 13 -t 1 --kv-type f32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("50 positions x 67 vocabulary"), std::string::npos) << result.err;
  const std::string bytes = testing::read_text_file(out_path);
  Forward forward(model_, 64, pool_);
  const std::vector<float> expected = sequence_logits(forward, tokens_, 64, KvTypes{DType::F32, DType::F32});
  ASSERT_EQ(bytes.size(), expected.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), bytes.size()), 0);

  std::ofstream(ids_path) << "1 2 x3";
  const testing::CommandResult bad =
      testing::run_tandem("logits -m " + testing::shell_quote(path_) + " -f " + testing::shell_quote(ids_path) +
                          " -o " + testing::shell_quote(out_path));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("'x3' is not a token id"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tandem
