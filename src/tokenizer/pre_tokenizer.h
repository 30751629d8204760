// PreTokenizer: splits text into the pieces BPE merges within, by a sequence of PCRE2 regex
// steps (Unicode properties via PCRE2_UCP; nothing hand-tabled here), each with Hugging
// Face's split behaviours. Compiled once at construction; split() is const and thread-safe.
// Also the steps behind each tokenizer.ggml.pre name and HF's fixed pre-tokenizers (Digits,
// Punctuation, Whitespace, WhitespaceSplit, Metaspace's split). Knows nothing about tokens.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

// What a step does with the text its regex matches (HF's SplitDelimiterBehavior).
enum class SplitBehavior {
  Isolated,            // every match and every stretch between matches is a piece
  Removed,             // matches are dropped; the stretches between them are the pieces
  MergedWithPrevious,  // a match joins the piece before it (unless that is a match too)
  MergedWithNext,      // a match joins the piece after it (unless that is a match too)
  Contiguous,          // adjacent matches form one piece
};

// One step of a pre-tokenizer.
struct PreSplit {
  PreSplit(const char* regex) : regex(regex) {}  // implicit: lists of plain regexes stay lists of strings
  PreSplit(std::string regex, SplitBehavior behavior, bool invert = false, bool bytes = false)
      : regex(std::move(regex)), behavior(behavior), invert(invert), bytes(bytes) {}

  std::string regex;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;  // the stretches between matches are what `behavior` acts on instead
  // The regex is matched byte by byte (no UTF-8): for steps that Hugging Face runs after its
  // ByteLevel step, which sees every byte as a character of GPT-2's byte alphabet.
  bool bytes = false;
};

class PreTokenizer {
 public:
  // Throws InputError naming the pattern when one does not compile.
  explicit PreTokenizer(const std::vector<PreSplit>& steps);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of `text`, in order, none empty (views into `text`). Each step is run over
  // every piece of the previous one, so anchors and look-aheads stop at piece boundaries.
  // The pieces cover every byte exactly once unless a step removes what it matches.
  // Ill-formed UTF-8 never matches a UTF-8 step and ends up between matches.
  // `checkpoint`, if set, is called every kCheckpointPieces pieces made or matches tried
  // (megabytes of text take a while): throwing from it stops the split there.
  std::vector<std::string_view> split(std::string_view text, const std::function<void()>& checkpoint = {}) const;
  static constexpr size_t kCheckpointPieces = 4096;
  // split() one piece at a time, each handed to `on_piece` as soon as it is settled: the
  // memory held besides the text is bounded (about kCheckpointPieces segments), not
  // proportional to it, for a pre-tokenizer of one step (the pieces of a step before the last
  // are held for the next).
  void for_each_piece(std::string_view text, const std::function<void(std::string_view)>& on_piece,
                      const std::function<void()>& checkpoint = {}) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The pre-tokenizer steps for a tokenizer.ggml.pre name ("default", "gpt-2", "llama-bpe",
// "qwen2", "deepseek-llm", "falcon", "gpt-4o", "chatglm-bpe", ...). InputError naming `pre`
// if unknown.
std::vector<PreSplit> pre_tokenizer_regexes(std::string_view pre);

// GPT-2's split, also what HF's ByteLevel pre-tokenizer applies when use_regex is true.
extern const char* const kGpt2PreRegex;

// Hugging Face's fixed pre-tokenizers as steps. `after_byte_level`: the step comes after a
// ByteLevel step in a Sequence, so it classifies bytes as their byte-alphabet characters.
PreSplit hf_digits(bool individual_digits, bool after_byte_level);
PreSplit hf_punctuation(SplitBehavior behavior, bool after_byte_level);
PreSplit hf_whitespace();        // words and runs of other non-space characters; spaces dropped
PreSplit hf_whitespace_split();  // runs of non-space characters; spaces dropped
PreSplit hf_metaspace_split();   // before each "▁" (U+2581), which starts the next piece

}  // namespace tandem
