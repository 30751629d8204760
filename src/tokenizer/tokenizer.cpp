// Tokenizer (see tokenizer.h): splits text at special tokens, hands the plain runs to the
// vocabulary's encoder, and keeps every token's decoded bytes in a table so decoding (whole
// or streaming) is a lookup.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string markers_to_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      i += kSpaceMarker.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// What a token decodes to. Byte-level pieces map back through GPT-2's character table;
// user-defined tokens of byte-level vocabs are stored as plain text, so they stay as is.
std::string bytes_of(const Vocab& vocab, int32_t id) {
  const std::string& piece = vocab.pieces[id];
  const bool spm = vocab.kind == VocabKind::Spm;
  switch (vocab.types[id]) {
    case TokenType::Normal:
    case TokenType::Undefined: return spm ? markers_to_spaces(piece) : byte_level_decode(piece);
    case TokenType::UserDefined: return spm ? markers_to_spaces(piece) : piece;
    case TokenType::Byte:
      if (int value = parse_byte_piece(piece); value >= 0) {
        return std::string(1, static_cast<char>(value));
      }
      return spm ? markers_to_spaces(piece) : byte_level_decode(piece);
    case TokenType::Unknown: return spm ? " \xE2\x81\x87 " : piece;  // " ⁇ ", SentencePiece's surface for unknown
    case TokenType::Control:
    case TokenType::Unused: break;  // no text: <s>, </s> and friends never show up in decoded output
  }
  return {};
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::make_shared<const Vocab>(std::move(vocab))) {
  const Vocab& v = *vocab_;
  const int64_t n = v.size();
  TANDEM_CHECK_INPUT(n > 0, "empty vocabulary");
  TANDEM_CHECK_INPUT(static_cast<int64_t>(v.scores.size()) == n && static_cast<int64_t>(v.types.size()) == n,
                     "vocabulary has {} pieces, {} scores and {} types", n, v.scores.size(), v.types.size());
  for (int32_t id : {v.bos_id, v.eos_id, v.unk_id}) {
    TANDEM_CHECK_INPUT(id >= -1 && id < n, "special token id {} is outside the vocabulary of {}", id, n);
  }

  bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    bytes_[id] = bytes_of(v, id);
    max_token_bytes_ = std::max({max_token_bytes_, bytes_[id].size(), v.pieces[id].size()});
    const TokenType type = v.types[id];
    if ((type == TokenType::Control || type == TokenType::UserDefined) && !v.pieces[id].empty()) {
      specials_.push_back(id);
    }
  }
  // Longest first, so "<|end|>" cannot shadow "<|endoftext|>"; then by id for determinism.
  std::sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    if (v.pieces[a].size() != v.pieces[b].size()) return v.pieces[a].size() > v.pieces[b].size();
    return a < b;
  });

  if (v.kind == VocabKind::Spm) {
    encoder_ = std::make_shared<const SpmEncoder>(v);
  } else {
    encoder_ = std::make_shared<const BpeEncoder>(v);
  }
}

size_t Tokenizer::find_piece(std::string_view text, size_t from, int32_t id,
                             std::span<const TextSpan> special_spans) const {
  const std::string& piece = vocab_->pieces[id];
  if (vocab_->types[id] != TokenType::Control) return text.find(piece, from);
  // A control token must lie wholly inside one span, so it is searched for span by span:
  // text outside the spans (message content) is never scanned for it at all. The first span
  // that ends after `from` is the first that can hold it.
  auto span = std::upper_bound(special_spans.begin(), special_spans.end(), from,
                               [](size_t pos, const TextSpan& s) { return pos < s.end; });
  for (; span != special_spans.end(); ++span) {
    const size_t begin = std::max(from, span->begin);
    if (span->end < begin + piece.size()) continue;
    const size_t at = text.substr(0, span->end).find(piece, begin);
    if (at != std::string_view::npos) return at;
  }
  return std::string_view::npos;
}

std::pair<int32_t, size_t> Tokenizer::find_special(std::string_view text, size_t from,
                                                   std::span<const TextSpan> special_spans,
                                                   std::vector<size_t>& next_at) const {
  std::pair<int32_t, size_t> best{-1, text.size()};
  for (size_t i = 0; i < specials_.size(); ++i) {
    // next_at[i] is the first occurrence at or after an earlier `from` with none between, so
    // it stays right until `from` passes it: each piece's search moves forward through the
    // text once per encode instead of rescanning it after every special (a chat with
    // thousands of turn markers and Llama 3's 256 control tokens took seconds).
    size_t& at = next_at[i];
    if (at == kNotSearched || at < from) at = find_piece(text, from, specials_[i], special_spans);
    // Only a strictly earlier start beats the current best: at equal starts the longer
    // piece, seen first, stays.
    if (at != std::string_view::npos && (best.first < 0 || at < best.second)) {
      best = {specials_[i], at};
    }
  }
  return best;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                       const EncodeCheckpoint& checkpoint) const {
  const TextSpan whole{0, text.size()};
  return encode(text, add_bos, parse_special ? std::span<const TextSpan>(&whole, 1) : std::span<const TextSpan>(),
                checkpoint);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, std::span<const TextSpan> special_spans,
                                       const EncodeCheckpoint& checkpoint) const {
  for (size_t i = 0; i < special_spans.size(); ++i) {
    // Spans come from code (the chat renderer), never from a user: a bad one is a bug.
    TANDEM_ASSERT(special_spans[i].begin <= special_spans[i].end && special_spans[i].end <= text.size());
    TANDEM_ASSERT(i == 0 || special_spans[i - 1].end <= special_spans[i].begin);
  }
  std::vector<int32_t> ids;
  if (add_bos && vocab_->bos_id >= 0) ids.push_back(vocab_->bos_id);
  std::vector<size_t> next_at(specials_.size(), kNotSearched);  // [n_specials] see find_special
  bool starts_sequence = true;  // SentencePiece adds its space prefix here and after specials
  for (size_t pos = 0; pos < text.size();) {
    const auto [special, at] = specials_.empty() ? std::pair<int32_t, size_t>{-1, text.size()}
                                                 : find_special(text, pos, special_spans, next_at);
    if (at > pos) {
      encoder_->encode(text.substr(pos, at - pos), starts_sequence, ids, checkpoint);
      starts_sequence = false;
    }
    if (special < 0) break;
    ids.push_back(special);
    starts_sequence = true;
    pos = at + vocab_->pieces[special].size();
  }
  return ids;
}

std::string_view Tokenizer::find_control_text(std::string_view text) const {
  for (int32_t id : specials_) {  // longest first
    if (vocab_->types[id] != TokenType::Control) continue;
    const std::string& piece = vocab_->pieces[id];
    if (text.find(piece) != std::string_view::npos) return piece;
  }
  return {};
}

std::string Tokenizer::token_bytes(int32_t id) const {
  TANDEM_CHECK_INPUT(id >= 0 && id < vocab_->size(), "token id {} is outside the vocabulary of {}", id, vocab_->size());
  return bytes_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  Utf8Sanitizer sanitizer;
  int32_t previous = -1;
  for (int32_t id : ids) {
    TANDEM_CHECK_INPUT(id >= 0 && id < vocab_->size(), "token id {} is outside the vocabulary of {}", id,
                       vocab_->size());
    std::string_view bytes = bytes_[id];
    if (strips_space_after(previous) && !bytes.empty() && bytes[0] == ' ') bytes.remove_prefix(1);
    sanitizer.feed(bytes, out);
    previous = id;
  }
  sanitizer.finish(out);
  return out;
}

}  // namespace tandem
