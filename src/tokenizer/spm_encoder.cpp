// SentencePiece BPE encoding (see spm_encoder.h). Symbols live in a linked list and candidate
// merges in a priority queue, so a text of n characters costs O(n log n); stale queue
// entries are skipped when popped.
#include "tokenizer/spm_encoder.h"

#include <queue>

#include "tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

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

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(vocab), pre_tokenizer_(vocab.pre_regexes) {
  byte_token_.fill(-1);
  for (int32_t id = 0; id < static_cast<int32_t>(vocab_.size()); ++id) {
    const TokenType type = vocab_.types[id];
    if (type == TokenType::Byte) {
      if (int value = parse_byte_piece(vocab_.pieces[id]); value >= 0 && byte_token_[value] < 0) {
        byte_token_[value] = id;
      }
    }
    if (type == TokenType::Normal || type == TokenType::UserDefined) {
      mergeable_.emplace(vocab_.pieces[id], id);  // the first of duplicate pieces wins
    }
  }
}

int32_t SpmEncoder::mergeable_id(std::string_view piece) const {
  auto it = mergeable_.find(piece);
  return it == mergeable_.end() ? -1 : it->second;
}

void SpmEncoder::append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const {
  for (char c : symbol) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) {
      // No byte tokens: the whole character is unknown (one UNK, not one per byte).
      if (vocab_.unk_id >= 0) ids.push_back(vocab_.unk_id);
      return;
    }
    ids.push_back(id);
  }
}

void SpmEncoder::encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids) const {
  if (text.empty()) return;

  // Normalize as SentencePiece does for llama: spaces become "▁", plus one leading "▁".
  std::string normalized;
  normalized.reserve(text.size() + kSpaceMarker.size());
  if (vocab_.add_space_prefix && starts_sequence) normalized += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMarker;
    } else {
      normalized += c;
    }
  }
  for (std::string_view piece : pre_tokenizer_.split(normalized)) encode_piece(piece, ids);
}

void SpmEncoder::encode_piece(std::string_view normalized, std::vector<int32_t>& ids) const {
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
    const int32_t id = mergeable_id(normalized.substr(symbols[left].start, length));
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
    const std::string_view symbol = normalized.substr(symbols[i].start, symbols[i].length);
    if (const int32_t id = mergeable_id(symbol); id >= 0) {
      ids.push_back(id);
    } else {
      append_fallback(symbol, ids);
    }
  }
}

}  // namespace tandem
