// The device forward pass on the real tiny models of ../shared: on aidreams260K, teacher-forced
// over each of llama2.c's greedy reference sequences, its argmax is the reference's next id
// wherever the CPU's is (so greedy decoding on the device reproduces run.c as the CPU does);
// on stories260K (GQA), greedy generation from BOS gives the CPU's ids. Needs a device and
// ../shared (TANDEM_SHARED_DIR may point elsewhere, as bench/device-check does).
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "backends/cuda/cuda_forward.h"
#include "base/thread_pool.h"
#include "cuda/cuda_test_device.h"
#include "model/forward.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

using testing::shared_path;

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

Batch whole_sequence(const std::vector<int32_t>& ids, const std::vector<int32_t>& blocks) {
  Batch batch;
  const int32_t seq = batch.add_sequence(blocks);
  for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), seq, true);
  return batch;
}

std::vector<int32_t> pool_blocks(int64_t n) {
  std::vector<int32_t> blocks(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) blocks[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  return blocks;
}

TEST(CudaGreedy, AidreamsFollowsRunCsReference) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_REQUIRE_SHARED("models/aidreams260K/greedy-reference.jsonl");
  const std::shared_ptr<const Model> model = load_model(shared_path("models/aidreams260K/model.gguf"));
  const int64_t vocab = model->config.vocab_size, context = model->config.context_length;
  const int32_t block_size = 16;
  const std::vector<int32_t> blocks = pool_blocks((context + block_size - 1) / block_size);
  ThreadPool pool(2);
  Forward cpu(model, context, pool);
  KvCache cache(model->config.kv_shape(), static_cast<int64_t>(blocks.size()), block_size,
                KvTypes{DType::F32, DType::F32});
  cuda::CudaForward device(model, {.max_batch_tokens = context,
                                   .kv_blocks = static_cast<int64_t>(blocks.size()),
                                   .block_size = block_size,
                                   .kv_type = DType::F32});
  std::istringstream lines(testing::read_text_file(shared_path("models/aidreams260K/greedy-reference.jsonl")));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const std::vector<int32_t> ids = nlohmann::json::parse(line).at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> input(ids.begin(), ids.end() - 1);  // each row predicts the next id
    const Batch batch = whole_sequence(input, blocks);
    const std::span<const float> cpu_span = cpu.run(batch, cache);
    const std::vector<float> cpu_logits(cpu_span.begin(), cpu_span.end());
    const std::span<const float> device_logits = device.run(batch);
    for (size_t i = 0; i < input.size(); ++i) {
      if (argmax(cpu_logits.data() + i * vocab, vocab) != ids[i + 1]) continue;  // a prompt position
      ASSERT_EQ(argmax(device_logits.data() + i * vocab, vocab), ids[i + 1]) << "position " << i << " of: " << line;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(CudaGreedy, Stories260KGeneratesTheCpusIds) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_REQUIRE_SHARED("models/stories260K/model.bin");
  const std::shared_ptr<const Model> model = load_model(shared_path("models/stories260K/model.bin"));
  const int64_t vocab = model->config.vocab_size, steps = 120;
  const int32_t block_size = 16;
  const std::vector<int32_t> blocks = pool_blocks((steps + block_size) / block_size);
  ThreadPool pool(2);
  Forward cpu(model, 1, pool);
  KvCache cache(model->config.kv_shape(), static_cast<int64_t>(blocks.size()), block_size,
                KvTypes{DType::F32, DType::F32});
  cuda::CudaForward device(model, {.max_batch_tokens = 1,
                                   .kv_blocks = static_cast<int64_t>(blocks.size()),
                                   .block_size = block_size,
                                   .kv_type = DType::F32});
  std::vector<int32_t> cpu_ids = {1}, device_ids = {1};
  for (int64_t p = 0; p < steps; ++p) {
    Batch cpu_step, device_step;
    cpu_step.add(cpu_ids.back(), static_cast<int32_t>(p), cpu_step.add_sequence(blocks), true);
    device_step.add(device_ids.back(), static_cast<int32_t>(p), device_step.add_sequence(blocks), true);
    cpu_ids.push_back(argmax(cpu.run(cpu_step, cache).data(), vocab));
    device_ids.push_back(argmax(device.run(device_step).data(), vocab));
  }
  EXPECT_EQ(device_ids, cpu_ids);
}

}  // namespace
}  // namespace tandem
#endif
