// PreTokenizer: splits text into the pieces byte-level BPE merges within, by a sequence of
// PCRE2 regexes (Unicode properties via PCRE2_UCP; nothing hand-tabled here). Compiled once
// at construction; split() is const and thread-safe. Also the regexes behind each
// tokenizer.ggml.pre name. Knows nothing about tokens or merges.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class PreTokenizer {
 public:
  // Throws InputError naming the pattern when one does not compile.
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of `text`, in order, covering every byte exactly once (views into `text`).
  // Each regex is run over every piece of the previous one, so anchors and look-aheads stop
  // at piece boundaries; text between matches is kept as its own piece. Ill-formed UTF-8
  // never matches and ends up in the in-between pieces.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The pre-tokenizer regexes for a tokenizer.ggml.pre name ("default", "gpt-2", "llama-bpe",
// "qwen2", "deepseek-llm", "deepseek-coder", ...). InputError naming `pre` if unknown.
std::vector<std::string> pre_tokenizer_regexes(std::string_view pre);

// GPT-2's split, also what HF's ByteLevel pre-tokenizer applies when use_regex is true.
extern const char* const kGpt2PreRegex;

}  // namespace tandem
