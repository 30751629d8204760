// SentencePiece BPE encoding and whole-sequence decoding (see tokenizer.h).
// encode keeps the symbols in a linked list and candidate merges in a priority queue, so a
// prompt of n characters costs O(n log n); stale queue entries are skipped when popped.
#include "tokenizer/tokenizer.h"

#include <queue>

#include "base/error.h"
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

// One symbol of the text being encoded: a byte range of the normalized text, linked to its
// neighbours. A symbol merged into its left neighbour keeps length 0 and is skipped.
struct Symbol {
  int prev = -1;
  int next = -1;
  size_t start = 0;
  size_t length = 0;
};

// A candidate merge of two adjacent symbols. `length` is their combined length when queued:
// if either side has changed since, the entry is stale.
struct Bigram {
  int left = 0;
  int right = 0;
  float score = 0;
  size_t length = 0;
};

// Highest score first; on equal scores the leftmost pair, as SentencePiece does.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  const int64_t n = vocab_.size();
  TANDEM_CHECK_INPUT(n > 0, "empty vocabulary");
  TANDEM_CHECK_INPUT(static_cast<int64_t>(vocab_.scores.size()) == n &&
                         static_cast<int64_t>(vocab_.types.size()) == n,
                     "vocabulary has {} pieces, {} scores and {} types", n, vocab_.scores.size(),
                     vocab_.types.size());
  for (int32_t id : {vocab_.bos_id, vocab_.eos_id, vocab_.unk_id}) {
    TANDEM_CHECK_INPUT(id >= 0 && id < n, "special token id {} is outside the vocabulary of {}",
                       id, n);
  }

  byte_token_.fill(-1);
  bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    const std::string& piece = vocab_.pieces[id];
    switch (vocab_.types[id]) {
      case TokenType::Normal:
      case TokenType::UserDefined:
      case TokenType::Undefined:
        bytes_[id] = markers_to_spaces(piece);
        break;
      case TokenType::Byte:
        if (int value = parse_byte_piece(piece); value >= 0) {
          bytes_[id] = std::string(1, static_cast<char>(value));
          if (byte_token_[value] < 0) byte_token_[value] = id;
        } else {
          bytes_[id] = markers_to_spaces(piece);
        }
        break;
      case TokenType::Unknown:
        bytes_[id] = " \xE2\x81\x87 ";  // " ⁇ ", SentencePiece's surface for unknown text
        break;
      case TokenType::Control:
      case TokenType::Unused:
        break;  // no text: <s>, </s> and friends never show up in decoded output
    }
    if (vocab_.types[id] == TokenType::Normal || vocab_.types[id] == TokenType::UserDefined) {
      mergeable_.emplace(piece, id);  // the first of duplicate pieces wins
    }
  }
}

int32_t Tokenizer::mergeable_id(std::string_view piece) const {
  auto it = mergeable_.find(piece);
  return it == mergeable_.end() ? -1 : it->second;
}

void Tokenizer::append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const {
  for (char c : symbol) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) {
      // No byte tokens: the whole character is unknown (one UNK, not one per byte).
      ids.push_back(vocab_.unk_id);
      return;
    }
    ids.push_back(id);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(vocab_.bos_id);
  if (text.empty()) return ids;

  // Normalize as SentencePiece does for llama: spaces become "▁", plus one leading "▁".
  std::string normalized;
  normalized.reserve(text.size() + kSpaceMarker.size());
  if (vocab_.add_space_prefix) normalized += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMarker;
    } else {
      normalized += c;
    }
  }

  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  for (size_t pos = 0; pos < normalized.size();) {
    const size_t length = utf8_sequence_length(normalized, pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, -1, pos, length});
    if (index > 0) symbols[index - 1].next = index;
    pos += length;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    // Adjacent symbols are contiguous in `normalized`, so the pair is one substring.
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = mergeable_id(std::string_view(normalized).substr(symbols[left].start, length));
    if (id >= 0) queue.push({left, right, vocab_.scores[id], length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) {
      continue;  // one side was merged into something else since this entry was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }

  // Every merged symbol is a piece by construction; only single characters can be missing.
  for (int i = 0; i >= 0 && !symbols.empty(); i = symbols[i].next) {
    const std::string_view symbol =
        std::string_view(normalized).substr(symbols[i].start, symbols[i].length);
    if (const int32_t id = mergeable_id(symbol); id >= 0) {
      ids.push_back(id);
    } else {
      append_fallback(symbol, ids);
    }
  }
  return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  TANDEM_CHECK_INPUT(id >= 0 && id < vocab_.size(), "token id {} is outside the vocabulary of {}",
                     id, vocab_.size());
  return bytes_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  Utf8Sanitizer sanitizer;
  int32_t previous = -1;
  for (int32_t id : ids) {
    TANDEM_CHECK_INPUT(id >= 0 && id < vocab_.size(),
                       "token id {} is outside the vocabulary of {}", id, vocab_.size());
    std::string_view bytes = bytes_[id];
    if (strips_space_after(previous) && !bytes.empty() && bytes[0] == ' ') bytes.remove_prefix(1);
    sanitizer.feed(bytes, out);
    previous = id;
  }
  sanitizer.finish(out);
  return out;
}

}  // namespace tandem
