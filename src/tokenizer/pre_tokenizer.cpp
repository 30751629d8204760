// Regex splitting for BPE (see pre_tokenizer.h). The named steps are written from the
// published tokenizer.json pre_tokenizer blocks of each family; PCRE2 supplies every Unicode
// property (\p{L}, \p{N}, \p{P}, ...), so no character tables live here.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <array>
#include <span>
#include <utility>

#include "base/error.h"

namespace tandem {

const char* const kGpt2PreRegex = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

namespace {

// Llama 3's split: contractions (case-insensitive, spelt out so PCRE2's Unicode case folding
// cannot widen them), words with one leading non-letter, numbers of up to three digits.
// Qwen2 is the same with single digits.
constexpr const char* kLlama3Regex =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2Regex =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Mistral's Tekken: words split at lower-to-upper case changes.
constexpr const char* kTekkenRegex =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// OpenAI's o200k split (GPT-4o, Llama 4): Tekken's case-aware words, each with an optional
// contraction (spelt out as in Llama 3's), numbers of up to three digits.
constexpr const char* kGpt4oRegex =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// HF's Punctuation: Unicode punctuation (P*) plus Rust's ASCII punctuation, which also counts
// the ASCII symbols $ + < = > ^ ` | ~. One character per match, as HF matches it.
constexpr const char* kPunctuationChar = R"re([\p{P}!-\/:-@\[-\x60{-~])re";
// The same two classes for a step after ByteLevel, on bytes: ASCII maps to itself, and of the
// other bytes only those GPT-2's alphabet keeps as Latin-1 characters can be digits (² ³ ¹
// ¼ ½ ¾) or punctuation (¡ § « ¶ · » ¿); the rest map to letters. So HF splits a UTF-8
// character such as "м" (D0 BC -> "Ð¼") there, and so does this.
constexpr const char* kByteLevelDigitByte = R"re([0-9\xB2\xB3\xB9\xBC-\xBE])re";
constexpr const char* kByteLevelPunctuationByte = R"re([!-\/:-@\[-\x60{-~\xA1\xA7\xAB\xB6\xB7\xBB\xBF])re";

// DeepSeek's CJK runs: CJK ideographs U+4E00..U+9FA5, U+0800..U+4E00, Hangul U+AC00..U+D7FF.
constexpr const char* kDeepSeekCjkRegex = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// The names llama.cpp's converter writes to tokenizer.ggml.pre, grouped by the split they
// use. DeepSeek-LLM's published letter class lists the cased letters (Lu, Ll, Lt) range by
// range; PCRE2's \p{L&} is that set.
std::vector<PreSplit> regexes_for(std::string_view pre) {
  auto is_any = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view name : names) {
      if (pre == name) return true;
    }
    return false;
  };
  if (is_any({"", "default", "gpt-2", "gpt2", "phi-2", "roberta-bpe", "jina-v2-es", "jina-v2-de", "mpt", "olmo",
              "jais"})) {
    return {kGpt2PreRegex};
  }
  // ChatGLM/GLM-4 ("chatglm-bpe", "glm4") use cl100k's split, which is Llama 3's.
  if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3", "chatglm-bpe", "glm4"})) return {kLlama3Regex};
  if (is_any({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})) return {kQwen2Regex};
  if (is_any({"starcoder", "refact", "smollm"})) return {R"re(\p{N})re", kGpt2PreRegex};
  if (pre == "tekken") return {kTekkenRegex};
  if (is_any({"gpt-4o", "llama4"})) return {kGpt4oRegex};
  if (pre == "falcon") {
    // Falcon's tokenizer.json: Punctuation (Contiguous), ByteLevel with GPT-2's regex, Digits
    // (runs) and a split isolating each three digits; the last two run after ByteLevel.
    return {hf_punctuation(SplitBehavior::Contiguous, false), kGpt2PreRegex, hf_digits(false, true), "[0-9][0-9][0-9]"};
  }
  if (pre == "deepseek-llm") {
    return {R"re([\r\n])re",
            R"re(\s?\p{L&}+)re",
            R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
            R"re(\s+$)re",
            kDeepSeekCjkRegex,
            R"re(\p{N}+)re"};
  }
  if (pre == "deepseek-coder") {
    return {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepSeekCjkRegex, R"re(\p{N})re"};
  }
  if (pre == "deepseek-v3") {
    return {
        R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
  }
  return {};
}

}  // namespace

PreSplit hf_digits(bool individual_digits, bool after_byte_level) {
  // Individual: each digit alone; otherwise runs of digits (HF's Contiguous).
  const SplitBehavior behavior = individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
  return after_byte_level ? PreSplit(kByteLevelDigitByte, behavior, false, /*bytes=*/true)
                          : PreSplit(R"re(\p{N})re", behavior);
}

PreSplit hf_punctuation(SplitBehavior behavior, bool after_byte_level) {
  return after_byte_level ? PreSplit(kByteLevelPunctuationByte, behavior, false, /*bytes=*/true)
                          : PreSplit(kPunctuationChar, behavior);
}

PreSplit hf_whitespace() {
  // HF's \w+|[^\w\s]+, kept, with what lies between (white space) removed. Its \w is
  // Oniguruma's Unicode word class: letters, marks, numbers and connector punctuation.
  return {R"re([\p{L}\p{M}\p{N}\p{Pc}]+|[^\p{L}\p{M}\p{N}\p{Pc}\s]+)re", SplitBehavior::Removed, /*invert=*/true};
}

PreSplit hf_whitespace_split() { return {R"re(\s)re", SplitBehavior::Removed}; }

PreSplit hf_metaspace_split() { return {R"re(\x{2581})re", SplitBehavior::MergedWithNext}; }

std::vector<PreSplit> pre_tokenizer_regexes(std::string_view pre) {
  std::vector<PreSplit> regexes = regexes_for(pre);
  TANDEM_CHECK_INPUT(!regexes.empty(), "pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported", pre);
  return regexes;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool bytes = false;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<PreSplit>& steps) {
  for (const PreSplit& step : steps) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: ill-formed input simply never matches, instead of failing the
    // whole match call; the encoder then sees it as an in-between piece.
    const uint32_t options = step.bytes ? 0 : PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(step.regex.data()), step.regex.size(), options,
                                     &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error_code, message.data(), message.size());
      throw InputError(fmt::format("pre-tokenizer regex '{}' does not compile at offset {}: {}", step.regex,
                                   error_offset, reinterpret_cast<const char*>(message.data())));
    }
    // JIT is only a speed-up; the interpreter gives the same matches if it is unavailable.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto compiled = std::make_unique<Compiled>();
    compiled->code = code;
    compiled->behavior = step.behavior;
    compiled->invert = step.invert;
    compiled->bytes = step.bytes;
    compiled_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

// A stretch [begin, end) of a piece: a match of the step's regex, or text between matches.
// `delimiter`: what the step's behaviour acts on (the matches, or with invert the rest).
struct Segment {
  size_t begin = 0, end = 0;
  bool delimiter = false;
};

// The pieces `segments` (in order, covering `piece`) make under `behavior`.
void join_segments(std::string_view piece, std::span<const Segment> segments, SplitBehavior behavior,
                   std::vector<std::string_view>& out) {
  auto emit = [&](size_t begin, size_t end) { out.push_back(piece.substr(begin, end - begin)); };
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Segment& s : segments) emit(s.begin, s.end);
      return;
    case SplitBehavior::Removed:
      for (const Segment& s : segments) {
        if (!s.delimiter) emit(s.begin, s.end);
      }
      return;
    case SplitBehavior::Contiguous:
      // Neighbours of the same kind form one piece (two stretches between matches are never
      // neighbours, but two matches, or with invert two non-delimiters, can be).
      for (size_t i = 0; i < segments.size();) {
        size_t j = i + 1;
        while (j < segments.size() && segments[j].delimiter == segments[i].delimiter) ++j;
        emit(segments[i].begin, segments[j - 1].end);
        i = j;
      }
      return;
    case SplitBehavior::MergedWithPrevious:
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].delimiter && i > 0 && !segments[i - 1].delimiter) {
          // The previous segment was the last one emitted: extend it.
          out.back() = piece.substr(segments[i - 1].begin, segments[i].end - segments[i - 1].begin);
        } else {
          emit(segments[i].begin, segments[i].end);
        }
      }
      return;
    case SplitBehavior::MergedWithNext:
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].delimiter && i + 1 < segments.size() && !segments[i + 1].delimiter) {
          emit(segments[i].begin, segments[i + 1].end);
          ++i;  // the next segment is emitted with it
        } else {
          emit(segments[i].begin, segments[i].end);
        }
      }
      return;
  }
}

}  // namespace

namespace {

// Whether join_segments can cut `segments` between a and b (neighbours) without changing the
// pieces: no behaviour joins across that boundary.
bool separable(const Segment& a, const Segment& b, SplitBehavior behavior) {
  switch (behavior) {
    case SplitBehavior::Isolated:
    case SplitBehavior::Removed: return true;
    case SplitBehavior::Contiguous: return a.delimiter != b.delimiter;
    case SplitBehavior::MergedWithPrevious: return !(b.delimiter && !a.delimiter);
    case SplitBehavior::MergedWithNext: return !(a.delimiter && !b.delimiter);
  }
  return false;
}

// What split_piece needs of a compiled step.
struct StepView {
  const pcre2_code* code;
  SplitBehavior behavior;
  bool invert, bytes;
};

// One step over one piece, its pieces handed to `emit` as they are settled: the segments are
// joined every kCheckpointPieces of them at a boundary no behaviour joins across, so the
// memory held is bounded by that, not by the piece (megabytes of one-character pieces made
// 24 bytes of segment and 16 of piece per byte, held all at once).
void split_piece(const StepView& compiled, pcre2_match_data* match, std::string_view piece,
                 const std::function<void(std::string_view)>& emit, const std::function<void()>& count) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  std::vector<Segment> segments;
  std::vector<std::string_view> joined;
  const auto flush = [&](size_t n) {
    joined.clear();
    join_segments(piece, std::span<const Segment>(segments.data(), n), compiled.behavior, joined);
    segments.erase(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(n));
    for (std::string_view p : joined) emit(p);
  };
  size_t kept = 0;  // end of what has been segmented so far
  size_t start = 0;
  while (start < piece.size()) {
    count();
    const int rc = pcre2_match(compiled.code, subject, piece.size(), start, 0, match, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a limit): the rest is one gap
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t begin = ovector[0], end = ovector[1];
    if (end <= begin) {
      // An empty match splits nothing; step past one character and search on.
      start = begin + 1;
      while (!compiled.bytes && start < piece.size() && (static_cast<uint8_t>(piece[start]) & 0xC0) == 0x80) {
        ++start;
      }
      continue;
    }
    if (begin > kept) segments.push_back({kept, begin, compiled.invert});
    segments.push_back({begin, end, !compiled.invert});
    kept = start = end;
    if (segments.size() >= PreTokenizer::kCheckpointPieces) {
      // Up to the last boundary that can be cut (the last segment may still join the next).
      size_t n = segments.size() - 1;
      while (n > 0 && !separable(segments[n - 1], segments[n], compiled.behavior)) --n;
      if (n > 0) flush(n);
    }
  }
  if (kept < piece.size()) segments.push_back({kept, piece.size(), compiled.invert});
  flush(segments.size());
}

}  // namespace

void PreTokenizer::for_each_piece(std::string_view text, const std::function<void(std::string_view)>& on_piece,
                                  const std::function<void()>& checkpoint) const {
  if (text.empty()) return;
  if (compiled_.empty()) {
    on_piece(text);
    return;
  }
  size_t until_checkpoint = kCheckpointPieces;
  const std::function<void()> count = [&] {
    if (--until_checkpoint != 0) return;
    until_checkpoint = kCheckpointPieces;
    if (checkpoint) checkpoint();
  };
  // Steps before the last hold their pieces for the next step; the last step's go straight
  // to on_piece.
  std::vector<std::string_view> pieces{text};
  for (size_t s = 0; s < compiled_.size(); ++s) {
    const Compiled& compiled = *compiled_[s];
    // Match data per call keeps this const and safe to run from several threads. Owned, so
    // that a checkpoint that throws does not leak it.
    const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match_data(
        pcre2_match_data_create_from_pattern(compiled.code, nullptr), pcre2_match_data_free);
    TANDEM_ASSERT(match_data != nullptr);
    const bool last = s + 1 == compiled_.size();
    std::vector<std::string_view> next;
    const std::function<void(std::string_view)> emit =
        last ? on_piece : std::function<void(std::string_view)>([&next](std::string_view p) { next.push_back(p); });
    const StepView view{compiled.code, compiled.behavior, compiled.invert, compiled.bytes};
    for (std::string_view piece : pieces) {
      count();
      split_piece(view, match_data.get(), piece, emit, count);
    }
    pieces = std::move(next);
  }
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text,
                                                  const std::function<void()>& checkpoint) const {
  std::vector<std::string_view> pieces;
  for_each_piece(
      text, [&pieces](std::string_view piece) { pieces.push_back(piece); }, checkpoint);
  return pieces;
}

}  // namespace tandem
