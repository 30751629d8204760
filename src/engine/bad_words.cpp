// Bad words (see bad_words.h).
#include "engine/bad_words.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

std::vector<std::vector<int32_t>> bad_word_sequences(const Tokenizer& tokenizer, std::span<const std::string> words) {
  std::vector<std::vector<int32_t>> sequences;
  for (const std::string& word : words) {
    const std::string_view stripped = std::string_view(word).substr(std::min(word.find_first_not_of(' '), word.size()));
    TANDEM_CHECK_INPUT(!stripped.empty(), "a bad word is empty");
    std::vector<int32_t> plain = tokenizer.encode(stripped, /*add_bos=*/false);
    std::string spaced_text(1, ' ');
    spaced_text.append(stripped);
    std::vector<int32_t> spaced = tokenizer.encode(spaced_text, /*add_bos=*/false);
    TANDEM_CHECK_INPUT(!plain.empty(), "a bad word encodes to no tokens");
    const bool spaced_differs = !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
    sequences.push_back(std::move(plain));
    if (spaced_differs) sequences.push_back(std::move(spaced));
  }
  return sequences;
}

void append_bad_word_bans(std::span<const std::vector<int32_t>> words, std::span<const int32_t> generated,
                          std::vector<int32_t>& banned) {
  for (const std::vector<int32_t>& word : words) {
    const size_t prefix = word.size() - 1;
    if (prefix > generated.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, generated.end() - static_cast<std::ptrdiff_t>(prefix)))
      banned.push_back(word.back());
  }
}

}  // namespace tandem
