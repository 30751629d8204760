// Test helpers for the Hugging Face tests: run a loaded model over one sequence and collect
// every position's logits, greedy-decode a few tokens, run `tandem convert`, compare rows.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/forward.h"
#include "support/run_binary.h"

namespace tandem::test_support {

// Logits [tokens.size(), vocab_size] for one sequence fed as a single prefill.
inline std::vector<float> prefill_logits(const std::shared_ptr<const Model>& model,
                                         const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Forward forward(model, static_cast<int64_t>(tokens.size()), pool);
  KvCache cache(model->config.kv_shape(), static_cast<int64_t>(tokens.size()), 1);
  Batch batch;
  batch.add_sequence(cache.whole_pool_blocks());
  for (size_t t = 0; t < tokens.size(); ++t) batch.add(tokens[t], static_cast<int32_t>(t), 0, true);
  const std::span<const float> logits = forward.run(batch, cache);
  return {logits.begin(), logits.end()};
}

// Greedy ids after `prompt`, decoding one token at a time.
inline std::vector<int32_t> greedy_ids(const std::shared_ptr<const Model>& model, std::vector<int32_t> prompt,
                                       int n_new) {
  const int64_t total = static_cast<int64_t>(prompt.size()) + n_new;
  ThreadPool pool(2);
  Forward forward(model, total, pool);
  KvCache cache(model->config.kv_shape(), total, 1);
  Batch batch;
  batch.add_sequence(cache.whole_pool_blocks());
  for (size_t t = 0; t < prompt.size(); ++t) batch.add(prompt[t], static_cast<int32_t>(t), 0, t + 1 == prompt.size());
  std::vector<int32_t> generated;
  for (int i = 0; i < n_new; ++i) {
    const std::span<const float> logits = forward.run(batch, cache);
    int32_t best = 0;
    for (int64_t v = 1; v < model->config.vocab_size; ++v)
      if (logits[v] > logits[best]) best = static_cast<int32_t>(v);
    generated.push_back(best);
    batch.clear();
    batch.add_sequence(cache.whole_pool_blocks());
    batch.add(best, static_cast<int32_t>(prompt.size()) + i, 0, true);
  }
  return generated;
}

inline void expect_all_close(const std::vector<float>& a, const std::vector<float>& b, double tol,
                             const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_LE(worst, tol) << what;
}

// Runs `tandem convert DIR -o OUT --type TYPE`; returns the command's result.
inline testing::CommandResult tandem_convert(const std::string& dir, const std::string& out, const std::string& type) {
  return testing::run_tandem("convert " + testing::shell_quote(dir) + " -o " + testing::shell_quote(out) + " --type " +
                             type);
}

inline std::string make_dir(const std::string& path) {
  std::filesystem::create_directories(path);
  return path;
}

}  // namespace tandem::test_support
