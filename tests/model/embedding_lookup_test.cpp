// Embedding rows of a model whose token table stays in the file are read with pread
// (MappedFile::read), not through the map: a prefill over every token id leaves no page of
// the table resident in this process, where lookups through the map had faulted in 64 KiB
// around each row (llama-160m: a 512-token prompt kept most of a 26 MB table resident).
// Also MappedFile::read itself: the map's bytes at any offset, and a clear error when the
// file shrinks under the map.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "io/mapped_file.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/model.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

const std::string kModel = testing::shared_path(testing::kAidreamsGguf);

// Pages of [begin, end) mapped in this process (/proc/self/pagemap, bit 63: page present).
int64_t present_pages(uintptr_t begin, uintptr_t end) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return -1;
  int64_t present = 0;
  for (uintptr_t p = begin / page; p * page < end; ++p) {
    uint64_t entry = 0;
    if (::pread(fd, &entry, sizeof entry, static_cast<off_t>(p * sizeof entry)) != sizeof entry) {
      present = -1;
      break;
    }
    present += static_cast<int64_t>(entry >> 63);
  }
  ::close(fd);
  return present;
}

TEST(EmbeddingLookup, PrefillOverEveryTokenLeavesTheTableUnmapped) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  std::shared_ptr<const Model> model = load_model(kModel);
  const ModelWeights& w = model->weights;
  ASSERT_NE(model->embedding_file, nullptr) << "the GGUF loader leaves the embedding in the file";
  if (w.output.data == w.token_embedding.data)
    GTEST_SKIP() << "this level reads the tied output head from the map (no packed layout for "
                 << dtype_name(w.output.dtype) << "), so the table's pages are in use";
  const auto begin = reinterpret_cast<uintptr_t>(w.token_embedding.data);
  const auto end = begin + static_cast<uintptr_t>(w.token_embedding.n_bytes());

  const int64_t vocab = model->config.vocab_size, context = model->config.context_length;
  ThreadPool pool(2);
  Forward forward(model, context, pool);
  std::vector<float> first_logits;
  for (int64_t first = 0; first < vocab; first += context) {  // every token id once
    KvCache cache(model->config.kv_shape(), context, 1);
    const int64_t n = std::min(context, vocab - first);
    Batch batch;
    const int32_t seq = batch.add_sequence(cache.whole_pool_blocks());
    for (int64_t i = 0; i < n; ++i)
      batch.add(static_cast<int32_t>(first + i), static_cast<int32_t>(i), seq, i == n - 1);
    const std::span<const float> logits = forward.run(batch, cache);
    if (first == 0) first_logits.assign(logits.begin(), logits.end());
  }
  // The first and last pages may hold a neighbouring tensor's bytes, read through the map.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const int64_t mapped = present_pages(begin, end);
  ASSERT_GE(mapped, 0) << "/proc/self/pagemap unreadable";
  EXPECT_LE(mapped, 2) << "of " << (end - begin + page - 1) / page << " embedding pages mapped after lookups";
  // The rows read are the table's: the same prompt through a fresh Forward gives the same logits.
  Forward again(model, context, pool);
  KvCache cache(model->config.kv_shape(), context, 1);
  Batch batch;
  const int32_t seq = batch.add_sequence(cache.whole_pool_blocks());
  for (int64_t i = 0; i < context; ++i)
    batch.add(static_cast<int32_t>(i), static_cast<int32_t>(i), seq, i == context - 1);
  const std::span<const float> logits = again.run(batch, cache);
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.end()), first_logits);
}

class MappedFileRead : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("tandem_mapped_" + std::to_string(::getpid()))).string();
    bytes_.resize(3 * 4096 + 123);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes_.data()), static_cast<std::streamsize>(bytes_.size()));
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
  std::vector<uint8_t> bytes_;
};

TEST_F(MappedFileRead, CopiesTheMappedBytesAtAnyOffset) {
  const MappedFile file(path_);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{8000}, bytes_.size() - 7}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{816}, size_t{5000}}) {
      if (offset + n > bytes_.size()) continue;
      std::vector<uint8_t> out(n, 0xAA);
      file.read(file.bytes().data() + offset, n, out.data());
      EXPECT_EQ(out, std::vector<uint8_t>(bytes_.begin() + offset, bytes_.begin() + offset + n))
          << "offset " << offset << ", " << n << " bytes";
    }
  }
}

TEST_F(MappedFileRead, AFileShrunkUnderTheMapIsAnInputError) {
  const MappedFile file(path_);
  std::filesystem::resize_file(path_, 100);
  std::vector<uint8_t> out(64);
  EXPECT_NO_THROW(file.read(file.bytes().data() + 10, 64, out.data()));
  try {
    file.read(file.bytes().data() + 5000, 64, out.data());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
