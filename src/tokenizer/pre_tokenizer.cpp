// Regex splitting for byte-level BPE (see pre_tokenizer.h). The named regexes are written
// from the published tokenizer.json pre_tokenizer blocks of each family; PCRE2 supplies
// every Unicode property (\p{L}, \p{N}, \p{P}, ...), so no character tables live here.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <array>
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

// DeepSeek's CJK runs: CJK ideographs U+4E00..U+9FA5, U+0800..U+4E00, Hangul U+AC00..U+D7FF.
constexpr const char* kDeepSeekCjkRegex = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// The names llama.cpp's converter writes to tokenizer.ggml.pre, grouped by the split they
// use. DeepSeek-LLM's published letter class lists the cased letters (Lu, Ll, Lt) range by
// range; PCRE2's \p{L&} is that set.
std::vector<std::string> regexes_for(std::string_view pre) {
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
  if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3"})) return {kLlama3Regex};
  if (is_any({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})) return {kQwen2Regex};
  if (is_any({"starcoder", "refact", "smollm"})) return {R"re(\p{N})re", kGpt2PreRegex};
  if (pre == "tekken") return {kTekkenRegex};
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

std::vector<std::string> pre_tokenizer_regexes(std::string_view pre) {
  std::vector<std::string> regexes = regexes_for(pre);
  TANDEM_CHECK_INPUT(!regexes.empty(), "pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported", pre);
  return regexes;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const std::string& regex : regexes) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: ill-formed input simply never matches, instead of failing the
    // whole match call; the encoder then sees it as an in-between piece.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error_code, message.data(), message.size());
      throw InputError(fmt::format("pre-tokenizer regex '{}' does not compile at offset {}: {}", regex, error_offset,
                                   reinterpret_cast<const char*>(message.data())));
    }
    // JIT is only a speed-up; the interpreter gives the same matches if it is unavailable.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto compiled = std::make_unique<Compiled>();
    compiled->code = code;
    compiled_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const std::unique_ptr<Compiled>& compiled : compiled_) {
    // Match data per call keeps split() const and safe to run from several threads.
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(compiled->code, nullptr);
    TANDEM_ASSERT(match != nullptr);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t kept = 0;  // end of what has been emitted so far
      size_t start = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(compiled->code, subject, piece.size(), start, 0, match, nullptr);
        if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a limit): the rest is one gap
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const size_t begin = ovector[0], end = ovector[1];
        if (end <= begin) {
          // An empty match splits nothing; step past one character and search on.
          start = begin + 1;
          while (start < piece.size() && (static_cast<uint8_t>(piece[start]) & 0xC0) == 0x80) {
            ++start;
          }
          continue;
        }
        if (begin > kept) next.push_back(piece.substr(kept, begin - kept));
        next.push_back(piece.substr(begin, end - begin));
        kept = start = end;
      }
      if (kept < piece.size()) next.push_back(piece.substr(kept));
    }
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace tandem
