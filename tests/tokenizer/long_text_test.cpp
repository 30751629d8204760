// Issue 33: one pre-token of megabytes — SentencePiece text without a space, one byte-level
// BPE "word" — is merged in bounded parts (spm_encoder.h, bpe_encoder.h). Its time grows
// linearly with its size (a ratio of two sizes, never a clock), its memory is a small
// multiple of the text (the peak RSS, reset before), ids stay those of a whole merge
// wherever a clean cut exists, text round-trips across forced cuts, and a checkpoint that
// throws stops the encoding between parts.
#include <malloc.h>

#include <chrono>
#include <fstream>
#include <random>
#include <stdexcept>

#include "tokenizer/bpe_encoder.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

// `bytes` of letters from a fixed word list run together: no space, and vocabulary pieces
// overlap all along it (English subwords).
std::string spaceless_text(size_t bytes, uint32_t seed) {
  static const std::vector<std::string> words = {"the",   "quick", "brown", "fox",  "jumps", "over", "lazy", "dog",
                                                 "Hello", "world", "ing",   "tion", "a",     "ab",   "zz"};
  std::mt19937 rng(seed);
  std::string text;
  text.reserve(bytes + 8);
  while (text.size() < bytes) text += words[rng() % words.size()];
  text.resize(bytes);
  return text;
}

// Random CJK ideographs: no space, and many ideographs are pieces of their own.
std::string cjk_text(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() + 3 <= bytes) {
    const char32_t c = 0x4E00 + rng() % 0x600;
    text += static_cast<char>(0xE0 | (c >> 12));
    text += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    text += static_cast<char>(0x80 | (c & 0x3F));
  }
  return text;
}

// Letters and punctuation in turn ("a.q,z!..."): under GPT-2's split every byte is a piece
// of its own, so pieces and regex segments held for the whole text cost 40+ bytes a byte.
std::string one_byte_pieces(size_t bytes, uint32_t seed) {
  static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
  static const char marks[] = ".,;:!?-";
  std::mt19937 rng(seed);
  std::string text;
  text.reserve(bytes + 2);
  while (text.size() < bytes) {
    text += letters[rng() % 26];
    text += marks[rng() % 7];
  }
  text.resize(bytes);
  return text;
}

double encode_seconds(const Tokenizer& tokenizer, const std::string& text) {
  double best = 1e9;
  for (int run = 0; run < 2; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(text, false);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_FALSE(ids.empty());
  }
  return best;
}

int64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

// The peak RSS growth, in bytes, while `tokenizer` encodes `text` (and the ids' count); -1
// where the peak cannot be reset (writing 5 to clear_refs, Linux 4.0+) or means nothing (a
// sanitizer's shadow).
std::pair<int64_t, size_t> encode_peak_bytes(const Tokenizer& tokenizer, const std::string& text) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return {-1, 0};
#endif
  malloc_trim(0);  // memory the allocator holds free would hide a peak
  std::ofstream clear("/proc/self/clear_refs");
  if (!(clear << "5" << std::flush)) return {-1, 0};
  const int64_t base = status_kib("VmRSS");
  const std::vector<int32_t> ids = tokenizer.encode(text, false);
  return {(status_kib("VmHWM") - base) * 1024, ids.size()};
}

// Time for 4 MiB against 1 MiB of the same kind of text, and the memory of the 4 MiB.
void expect_linear_and_bounded(const Tokenizer& tokenizer, const std::string& what,
                               std::string (*make)(size_t, uint32_t)) {
  const std::string small = make(1 << 20, 1), large = make(4 << 20, 2);
  encode_seconds(tokenizer, small);  // warm: the first touch of the allocator's pages
  const double small_seconds = encode_seconds(tokenizer, small);
  const double large_seconds = encode_seconds(tokenizer, large);
  EXPECT_LT(large_seconds / small_seconds, 10.0)
      << what << ": 1 MiB took " << small_seconds << " s, 4 MiB " << large_seconds << " s";
  // What the encoding must hold: the text normalized (SentencePiece), the ids (grown by
  // doubling: the old and the new buffer at once) and one part's merge state (32-72 bytes a
  // byte of the part). Merged whole, the merge state alone is 32-72 bytes a byte of the text.
  const auto [peak, n_ids] = encode_peak_bytes(tokenizer, large);
  const auto allowed = static_cast<int64_t>(2 * large.size() + 3 * sizeof(int32_t) * n_ids +
                                            72 * std::max(SpmEncoder::kMaxPartBytes, BpeEncoder::kMaxPieceBytes));
  if (peak >= 0) {
    EXPECT_LT(peak, allowed) << what << ": peak RSS grew " << peak << " bytes to encode " << large.size()
                             << " bytes into " << n_ids << " ids";
  }
}

TEST(LongText, SpmWithoutSpacesIsLinearAndBounded) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  expect_linear_and_bounded(tokenizer, "Llama 2 SentencePiece, letters without spaces", spaceless_text);
  expect_linear_and_bounded(tokenizer, "Llama 2 SentencePiece, CJK", cjk_text);
}

TEST(LongText, OneHugeBpeWordIsLinearAndBounded) {
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kGpt2Gguf);
  expect_linear_and_bounded(tokenizer, "GPT-2 byte-level BPE, one word of letters", spaceless_text);
}

// Megabytes of one-byte pieces: the pre-tokenizer hands each piece to the merges as it is
// settled (pre_tokenizer.h), so what is held is the ids, not every piece and segment of the
// text at once (an 8 MB /tokenize of them peaked at +352 MB before).
TEST(LongText, BpeOneBytePiecesAreLinearAndBounded) {
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kGpt2Gguf);
  expect_linear_and_bounded(tokenizer, "GPT-2 byte-level BPE, letters and punctuation in turn", one_byte_pieces);
}

// Text without spaces is cut at character boundaries no piece spans where there are some
// (CJK: most ideographs stand alone), so small parts still give the whole merge's ids.
TEST(LongText, SpmCutsWithoutSpacesKeepTheIds) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const SpmEncoder whole(tokenizer.vocab(), SIZE_MAX);
  for (uint32_t seed = 0; seed < 5; ++seed) {
    std::string text = cjk_text(6000, seed);
    text.insert(text.size() / 2, "Hello");
    std::vector<int32_t> expected, ids;
    whole.encode(text, true, expected, {});
    SpmEncoder(tokenizer.vocab(), 100, 1 << 20).encode(text, true, ids, {});
    ASSERT_EQ(ids, expected) << "seed " << seed;
  }
}

// Where no clean cut exists (one letter repeated: "aa" is a piece everywhere), the parts end
// at max_part_bytes all the same, at a character boundary: the text still round-trips (a
// character split by a cut would not), and a piece below the limit is merged as before.
TEST(LongText, ForcedCutsRoundTrip) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const Tokenizer spm = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const Tokenizer gpt2 = testing::gguf_tokenizer(testing::kGpt2Gguf);
  for (const std::string& text : {std::string(5000, 'a'), spaceless_text(5000, 3), cjk_text(5000, 4) + "\xF0\x9F"}) {
    std::vector<int32_t> spm_ids, bpe_ids;
    SpmEncoder(spm.vocab(), 64, 256).encode(text, true, spm_ids, {});
    EXPECT_EQ(spm.decode(spm_ids), sanitize_utf8(text));
    BpeEncoder(gpt2.vocab(), 100).encode(text, false, bpe_ids, {});
    EXPECT_EQ(gpt2.decode(bpe_ids), sanitize_utf8(text));
  }
  const std::string word(3000, 'a');
  std::vector<int32_t> limited;
  BpeEncoder(gpt2.vocab(), 4000).encode(word, false, limited, {});
  EXPECT_EQ(limited, gpt2.encode(word, false));  // under the limit: one merge, as before
}

// A checkpoint that throws stops a long encoding between parts: it is called for every
// part, so a 2 MiB pre-token sees it many times, and the first throw leaves encode.
TEST(LongText, CheckpointStopsBetweenParts) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const std::string text = spaceless_text(2 << 20, 5);
  for (const char* vocab : {testing::kLlamaSpmGguf, testing::kGpt2Gguf}) {
    const Tokenizer tokenizer = testing::gguf_tokenizer(vocab);
    int calls = 0;
    tokenizer.encode(text, false, false, [&] { ++calls; });
    EXPECT_GE(calls, 8) << vocab;  // parts of at most 64 KiB (BPE) or 256 KiB (SPM)
    int before_stop = 0;
    EXPECT_THROW(tokenizer.encode(text, false, false,
                                  [&] {
                                    if (++before_stop == 3) throw std::runtime_error("stop");
                                  }),
                 std::runtime_error);
    EXPECT_EQ(before_stop, 3) << vocab;
  }
}

}  // namespace
}  // namespace tandem
