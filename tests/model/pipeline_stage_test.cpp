// Pipeline stages in one process (model/pipeline_stage.h): a model split into layer ranges, each
// loaded alone and run by its own Forward and KV cache, the hidden states handed stage to stage,
// gives the whole model's logits bit for bit, for a prefill, a chunked prefill, token-by-token
// decode and a batch of two sequences where only some rows want logits; over llama (GQA),
// qwen3 (Q/K norms, tied head), gemma3 (local and global layers, tied head) and qwen3moe, in
// F32 and Q8_0, for even, uneven and 3- and 4-stage splits. Each stage holds only its share of
// the weights (bytes, packed buffer, null views elsewhere), leaves the file pages of the other
// layers unread, and bad ranges or inputs are one-line errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "io/gguf_file.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/model.h"
#include "model/pipeline_stage.h"
#include "support/random_model.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::run_in_steps;
using test_support::RandomModelSpec;
using test_support::TempDir;

struct StageCase {
  std::string name;
  RandomModelSpec spec;
};

// gtest prints a case by its name, not its bytes.
void PrintTo(const StageCase& c, std::ostream* out) { *out << c.name; }

// Four layers each; every width a multiple of 32, so that Q8_0 holds the same shapes.
std::vector<StageCase> cases() {
  RandomModelSpec llama;  // GQA: 4 heads of 16, 2 KV heads, untied head
  llama.d_model = 64, llama.n_heads = 4, llama.n_kv_heads = 2, llama.d_ff = 96, llama.n_layers = 4, llama.seed = 201;
  RandomModelSpec qwen3 = llama;  // heads of 32 over d_model 64 (not 16), Q/K norms, tied head
  qwen3.architecture = "qwen3", qwen3.head_size = 32, qwen3.tied_output = true, qwen3.seed = 202;
  RandomModelSpec gemma3 = llama;  // window 6 in layers 0 and 2, global 1 and 3, soft-capped logits, tied head
  gemma3.architecture = "gemma3", gemma3.head_size = 32, gemma3.n_heads = 2, gemma3.n_kv_heads = 1;
  gemma3.sliding_window = 6, gemma3.window_pattern = 2, gemma3.tied_output = true, gemma3.final_logit_softcap = 3.0f;
  gemma3.rope_freq_base = 1000000.0f, gemma3.seed = 203;
  RandomModelSpec moe = llama;  // 4 experts of 64, 2 used
  moe.architecture = "qwen3moe", moe.head_size = 16, moe.n_experts = 4, moe.n_experts_used = 2;
  moe.d_ff_expert = 64, moe.seed = 204;
  std::vector<StageCase> all;
  for (DType dtype : {DType::F32, DType::Q8_0}) {
    for (StageCase c : {StageCase{"llama_gqa", llama}, StageCase{"qwen3", qwen3}, StageCase{"gemma3", gemma3},
                        StageCase{"qwen3moe", moe}}) {
      c.spec.dtype = dtype;
      c.name += dtype == DType::F32 ? "_f32" : "_q8_0";
      all.push_back(c);
    }
  }
  return all;
}

// Splits of 4 layers: even, uneven either way, three and four stages.
std::vector<std::vector<LayerRange>> splits() {
  return {{{0, 2}, {2, 4}}, {{0, 1}, {1, 4}}, {{0, 3}, {3, 4}}, {{0, 1}, {1, 3}, {3, 4}}, split_layers(4, 4)};
}

std::string describe(const std::vector<LayerRange>& split) {
  std::string text;
  for (const LayerRange& r : split) text += "[" + std::to_string(r.first) + "," + std::to_string(r.end) + ")";
  return text;
}

// One Forward and KV cache per stage over the same scrambled blocks (as run_in_steps lays
// them out); each batch runs stage after stage, the hidden states copied between them as a
// transfer would.
class Pipeline {
 public:
  Pipeline(const std::vector<std::shared_ptr<const Model>>& stages, int64_t n_positions, ThreadPool& pool,
           int32_t block_size = 4) {
    const int64_t n_blocks = (n_positions + block_size - 1) / block_size;
    for (const auto& stage : stages) {
      forwards_.push_back(std::make_unique<Forward>(stage, n_positions, pool));
      caches_.push_back(std::make_unique<KvCache>(stage->kv_shape(), n_blocks, block_size));
    }
  }
  std::vector<float> run(const Batch& batch) {
    std::vector<float> passed;  // [n_tokens, d_model] from the previous stage
    std::span<const float> out;
    for (size_t s = 0; s < forwards_.size(); ++s) {
      out = forwards_[s]->run_stage(batch, passed, *caches_[s]);
      passed.assign(out.begin(), out.end());
    }
    return passed;
  }

 private:
  std::vector<std::unique_ptr<Forward>> forwards_;
  std::vector<std::unique_ptr<KvCache>> caches_;
};

// run_in_steps (forward_steps.h) through a pipeline: one sequence in batches of `step`.
std::vector<float> run_pipeline_in_steps(const std::vector<std::shared_ptr<const Model>>& stages,
                                         const std::vector<int32_t>& tokens, int64_t step, ThreadPool& pool) {
  const auto n = static_cast<int64_t>(tokens.size());
  constexpr int32_t kBlockSize = 4;
  Pipeline pipeline(stages, n, pool, kBlockSize);
  std::vector<int32_t> blocks(static_cast<size_t>((n + kBlockSize - 1) / kBlockSize));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(5));
  std::vector<float> logits;
  Batch batch;
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), seq, true);
    const std::vector<float> out = pipeline.run(batch);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

// Two sequences in one batch, 9 and 5 tokens, logits for the last row of the first and every
// row of the second: a middle stage must hand on rows that want no logits.
Batch mixed_batch(int64_t vocab) {
  Batch batch;
  const int32_t a = batch.add_sequence(std::vector<int32_t>{3, 0, 5});
  const int32_t b = batch.add_sequence(std::vector<int32_t>{1, 4});
  const std::vector<int32_t> ids = random_tokens(14, vocab, 77);
  for (int32_t p = 0; p < 9; ++p) batch.add(ids[static_cast<size_t>(p)], p, a, p == 8);
  for (int32_t p = 0; p < 5; ++p) batch.add(ids[static_cast<size_t>(9 + p)], p, b, true);
  return batch;
}

class PipelineStageTest : public ::testing::TestWithParam<StageCase> {
 protected:
  void SetUp() override {
    path_ = dir_.file(GetParam().name + "_" + std::to_string(::getpid()) + ".gguf");
    test_support::write_random_model(GetParam().spec, path_);
    whole_ = load_model(path_);
  }
  std::vector<std::shared_ptr<const Model>> load_stages(const std::vector<LayerRange>& split) {
    std::vector<std::shared_ptr<const Model>> stages;
    for (const LayerRange& range : split) stages.push_back(load_model(path_, {.layers = range}));
    return stages;
  }
  TempDir dir_;
  std::string path_;
  std::shared_ptr<const Model> whole_;
  ThreadPool pool_{2};
};

TEST_P(PipelineStageTest, StagesInTurnGiveTheWholeModelsLogitsBitForBit) {
  const std::vector<int32_t> tokens = random_tokens(20, whole_->config.vocab_size, 11);
  Forward whole_forward(whole_, 20, pool_);
  for (const int64_t step : {int64_t{20}, int64_t{7}, int64_t{1}}) {  // prefill, chunked prefill, decode
    const std::vector<float> expected = run_in_steps(whole_forward, tokens, step);
    ASSERT_EQ(expected.size(), tokens.size() * static_cast<size_t>(whole_->config.vocab_size));
    for (const std::vector<LayerRange>& split : splits()) {
      const std::vector<float> got = run_pipeline_in_steps(load_stages(split), tokens, step, pool_);
      EXPECT_EQ(got, expected) << describe(split) << ", batches of " << step << " tokens";
    }
  }
}

TEST_P(PipelineStageTest, AMixedBatchHandsOnRowsThatWantNoLogits) {
  const Batch batch = mixed_batch(whole_->config.vocab_size);
  Pipeline whole({whole_}, 24, pool_);
  const std::vector<float> expected = whole.run(batch);
  ASSERT_EQ(expected.size(), 6 * static_cast<size_t>(whole_->config.vocab_size));
  for (const std::vector<LayerRange>& split : splits()) {
    Pipeline pipeline(load_stages(split), 24, pool_);
    EXPECT_EQ(pipeline.run(batch), expected) << describe(split);
  }
}

TEST_P(PipelineStageTest, EachStageHoldsOnlyItsLayersAndEnds) {
  const ModelWeights& ww = whole_->weights;
  const bool tied = ww.output.data == ww.token_embedding.data;
  const int64_t layer_bytes = layer_weight_bytes(ww.layers[1]);
  for (const std::vector<LayerRange>& split : splits()) {
    int64_t bytes = 0, packed = 0;
    for (const LayerRange& range : split) {
      const auto stage = load_model(path_, {.layers = range});
      const ModelWeights& w = stage->weights;
      const std::string where = describe(split) + " stage " + describe({range});
      EXPECT_EQ(stage->held_layers().first, range.first) << where;
      EXPECT_EQ(stage->held_layers().end, range.end) << where;
      EXPECT_EQ(stage->kv_shape().n_layers, range.size()) << where;
      ASSERT_EQ(static_cast<int64_t>(w.layers.size()), 4) << where;
      for (int64_t l = 0; l < 4; ++l) {
        const bool held = l >= range.first && l < range.end;
        const LayerWeights& layer = w.layers[static_cast<size_t>(l)];
        EXPECT_EQ(layer.wq.data != nullptr && layer.attn_norm.data != nullptr, held) << where << " layer " << l;
        EXPECT_EQ(layer_weight_bytes(layer), held ? layer_weight_bytes(ww.layers[static_cast<size_t>(l)]) : 0)
            << where << " layer " << l;
      }
      EXPECT_EQ(w.token_embedding.data != nullptr, range.first == 0) << where;
      EXPECT_EQ(stage->embedding_file != nullptr, range.first == 0) << where;
      EXPECT_EQ(w.output.data != nullptr && w.output_norm.data != nullptr, range.end == 4) << where;
      // Its share: its layers (all the same size here) and its ends, nothing else.
      int64_t ends = 0;
      if (range.first == 0) ends += ww.token_embedding.n_bytes();
      if (range.end == 4) ends += ww.output_norm.n_bytes() + (tied && range.first == 0 ? 0 : ww.output.n_bytes());
      EXPECT_EQ(stage->weight_bytes_total(), range.size() * layer_bytes + ends) << where;
      EXPECT_EQ(stage->weight_bytes_total(), stage_weight_bytes(*whole_, range)) << where;
      bytes += stage->weight_bytes_total();
      packed += stage->packed_bytes;
    }
    // A tied head is the embedding's bytes: held by the first stage and, as a copy, the last.
    const int64_t head_copy = tied ? ww.output.n_bytes() : 0;
    EXPECT_EQ(bytes, whole_->weight_bytes_total() + head_copy) << describe(split);
    // Each matrix is packed (or copied) into the same bytes wherever it is held; only a tied head
    // the whole model reads from the map is copied by the last stage.
    if (tied && packed != whole_->packed_bytes)
      EXPECT_EQ(packed, whole_->packed_bytes + (head_copy + 63) / 64 * 64) << describe(split);
    else
      EXPECT_EQ(packed, whole_->packed_bytes) << describe(split);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineStageTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<StageCase>& info) { return info.param.name; });

// A real llama2.c checkpoint (stories260K: 5 layers, GQA, each tensor kind stored for every
// layer back to back) splits the same way: its stages' views are picked out of the file.
TEST(PipelineStageShared, Llama2cCheckpointStagesGiveTheWholeModelsLogits) {
  const char* kStories = "models/stories260K/model.bin";
  TANDEM_REQUIRE_SHARED(kStories);
  const std::string path = testing::shared_path(kStories);
  const auto whole = load_model(path);
  ASSERT_EQ(whole->config.n_layers, 5);
  ThreadPool pool(2);
  Forward whole_forward(whole, 24, pool);
  const std::vector<int32_t> tokens = random_tokens(24, whole->config.vocab_size, 3);
  for (const int64_t step : {int64_t{24}, int64_t{1}}) {
    const std::vector<float> expected = run_in_steps(whole_forward, tokens, step);
    for (const std::vector<LayerRange>& split : {split_layers(5, 2), split_layers(5, 3)}) {
      std::vector<std::shared_ptr<const Model>> stages;
      for (const LayerRange& range : split) stages.push_back(load_model(path, {.layers = range}));
      EXPECT_EQ(run_pipeline_in_steps(stages, tokens, step, pool), expected) << describe(split) << ", step " << step;
      EXPECT_EQ(stages.back()->weights.token_embedding.data, nullptr);
    }
  }
  try {
    load_model(path, {.layers = LayerRange{2, 6}});
    ADD_FAILURE() << "no error for layers [2, 6) of 5";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": layer range [2, 6)"), std::string::npos) << e.what();
  }
}

class PipelineStageErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("errors_" + std::to_string(::getpid()) + ".gguf");
    test_support::write_random_model(cases()[0].spec, path_);
  }
  TempDir dir_;
  std::string path_;
  ThreadPool pool_{2};
};

TEST_F(PipelineStageErrors, AnEmptyOrOutOfRangeLayerRangeIsAOneLineError) {
  for (const LayerRange range :
       {LayerRange{0, 0}, LayerRange{2, 1}, LayerRange{-1, 2}, LayerRange{0, 5}, LayerRange{4, 5}, LayerRange{3, 3}}) {
    try {
      load_model(path_, {.layers = range});
      ADD_FAILURE() << "no error for [" << range.first << ", " << range.end << ")";
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find(path_), std::string::npos) << message;
      EXPECT_NE(message.find(fmt::format("layer range [{}, {})", range.first, range.end)), std::string::npos)
          << message;
      EXPECT_NE(message.find("[0, 4)"), std::string::npos) << message;
    }
  }
  // A Hugging Face folder loads whole: a range is refused before anything is read.
  try {
    load_model(dir_.file(""), {.layers = LayerRange{0, 1}});
    ADD_FAILURE() << "no error for a folder";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a GGUF or llama2.c file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(split_layers(4, 0), InputError);
  EXPECT_THROW(split_layers(4, 5), InputError);
  const std::vector<LayerRange> five = split_layers(5, 2);
  ASSERT_EQ(five.size(), 2u);
  EXPECT_EQ(five[0].first, 0);
  EXPECT_EQ(five[0].end, 3);
  EXPECT_EQ(five[1].first, 3);
  EXPECT_EQ(five[1].end, 5);
}

TEST_F(PipelineStageErrors, AStageGivenTheWrongInputIsAnInputError) {
  const auto first = load_model(path_, {.layers = LayerRange{0, 2}});
  const auto second = load_model(path_, {.layers = LayerRange{2, 4}});
  Forward first_forward(first, 8, pool_), second_forward(second, 8, pool_);
  KvCache first_cache(first->kv_shape(), 2, 4), second_cache(second->kv_shape(), 2, 4);
  Batch batch;
  const int32_t seq = batch.add_sequence(std::vector<int32_t>{0, 1});
  for (int32_t p = 0; p < 3; ++p) batch.add(p, p, seq, true);
  const std::vector<float> hidden(static_cast<size_t>(3 * first->config.d_model), 0.5f);
  EXPECT_THROW(second_forward.run(batch, second_cache), InputError) << "no hidden states";
  EXPECT_THROW(second_forward.run_stage(batch, std::span(hidden).first(hidden.size() - 1), second_cache), InputError);
  EXPECT_THROW(first_forward.run_stage(batch, hidden, first_cache), InputError) << "the first stage embeds ids";
  EXPECT_EQ(second_forward.run_stage(batch, hidden, second_cache).size(),
            3 * static_cast<size_t>(second->config.vocab_size));
}

// Byte ranges of the file: the tensors a stage of `range` does not hold.
struct FileSpan {
  size_t offset = 0;
  size_t size = 0;
};

std::vector<FileSpan> tensors_outside(const std::string& path, const LayerRange& range, int64_t n_layers) {
  const GgufFile file = GgufFile::open(path);
  const uint8_t* base = file.mapping()->bytes().data();
  std::vector<FileSpan> spans;
  for (const GgufTensorInfo& info : file.tensors()) {
    bool held = false;
    if (info.name.rfind("blk.", 0) == 0) {
      const int64_t layer = std::stoll(info.name.substr(4));
      held = layer >= range.first && layer < range.end;
    } else if (info.name == "token_embd.weight") {
      held = range.first == 0;
    } else {
      held = range.end == n_layers;  // output_norm, output
    }
    if (!held)
      spans.push_back({static_cast<size_t>(static_cast<const uint8_t*>(info.view.data) - base),
                       static_cast<size_t>(info.view.n_bytes())});
  }
  return spans;
}

// Pages wholly inside `spans` that are in the page cache (mincore on a map of our own, which
// touches nothing).
int64_t cached_pages(const std::string& path, const std::vector<FileSpan>& spans) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  const auto size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int status = ::mincore(map, size, resident.data());
  ::munmap(map, size);
  if (status != 0) return -1;
  int64_t cached = 0;
  for (const FileSpan& span : spans)
    for (size_t p = (span.offset + page - 1) / page; (p + 1) * page <= span.offset + span.size; ++p)
      cached += resident[p] & 1;
  return cached;
}

// The stage's loader must not read the file where the other layers' tensors lie. Those ranges
// are dropped from the page cache and everything else stays cached, so nothing the loader
// legitimately reads misses the cache, and the kernel reads nothing ahead: a page of the dropped
// ranges cached after loading is one the loader touched. Loading the whole model then caches
// them (the check can see a read).
TEST_F(PipelineStageErrors, AStageLeavesTheFilePagesOfOtherLayersUnread) {
  RandomModelSpec spec = cases()[0].spec;
  spec.d_model = 128, spec.d_ff = 384, spec.vocab_size = 1000;  // a layer and the ends: hundreds of KiB each
  const std::string path = dir_.file("paging_" + std::to_string(::getpid()) + ".gguf");
  test_support::write_random_model(spec, path);
  const LayerRange range{1, 3};
  const std::vector<FileSpan> others = tensors_outside(path, range, spec.n_layers);
  int64_t total_pages = 0;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (const FileSpan& span : others) total_pages += static_cast<int64_t>(span.size / page) - 1;
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  for (const FileSpan& span : others)
    ::posix_fadvise(fd, static_cast<off_t>(span.offset), static_cast<off_t>(span.size), POSIX_FADV_DONTNEED);
  ::close(fd);
  const int64_t before = cached_pages(path, others);
  ASSERT_GE(before, 0) << "mincore failed";
  if (before > total_pages / 2)
    GTEST_SKIP() << before << " of about " << total_pages
                 << " pages still cached after POSIX_FADV_DONTNEED (a memory file system?): cannot tell reads";
  const auto stage = load_model(path, {.layers = range});
  EXPECT_EQ(cached_pages(path, others), before) << "pages of other layers' tensors read by the stage's load";
  const auto whole = load_model(path);
  EXPECT_GT(cached_pages(path, others), before + total_pages / 2) << "the whole model's load reads them";
}

TEST_F(PipelineStageErrors, InfoPrintsEachStagesLayersAndWeightBytes) {
  const auto whole = load_model(path_);
  const testing::CommandResult result = testing::run_tandem("info -m " + testing::shell_quote(path_) + " --pipeline 3");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<LayerRange> split = split_layers(4, 3);
  for (size_t s = 0; s < split.size(); ++s) {
    const std::string line = fmt::format("stage {}:       layers [{}, {})", s, split[s].first, split[s].end);
    const size_t at = result.out.find(line);
    ASSERT_NE(at, std::string::npos) << result.out;
    const std::string bytes = fmt::format("({} bytes)", stage_weight_bytes(*whole, split[s]));
    EXPECT_LT(result.out.find(bytes, at), result.out.find('\n', at)) << line << " lacks " << bytes;
  }
  const testing::CommandResult zero = testing::run_tandem("info -m " + testing::shell_quote(path_) + " --pipeline 0");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.err.find("--pipeline 0"), std::string::npos) << zero.err;
  const testing::CommandResult five = testing::run_tandem("info -m " + testing::shell_quote(path_) + " --pipeline 5");
  EXPECT_EQ(five.exit_code, 1);
  EXPECT_NE(five.err.find("5 stages over 4 layers"), std::string::npos) << five.err;
}

}  // namespace
}  // namespace tandem
