// SentencePiece BPE encoding (see spm_encoder.h). Symbols live in a linked list and candidate
// merges in a priority queue, so a part of n characters costs O(n log n); stale queue
// entries are skipped when popped. Long pieces are merged in bounded parts (spm_encoder.h).
#include "tokenizer/spm_encoder.h"

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// How many "▁", and then how many character boundaries, after a part's nominal end are tried
// as its end before it is cut at max_part_bytes_ instead. Each try looks up about
// (longest piece)^2 / 2 substrings.
constexpr int kSplitTries = 64;

// One symbol of the text being encoded: a byte range of the normalized text, linked to its
// neighbours. A symbol merged into its left neighbour keeps length 0 and is skipped. 32-bit
// fields: a part is far below 2 GiB (merge_and_append checks), and this is held per character.
struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t start = 0;
  uint32_t length = 0;
};

// A candidate merge of two adjacent symbols. `length` is their combined length when queued:
// if either side has changed since, the entry is stale.
struct Bigram {
  int32_t left = 0;
  int32_t right = 0;
  float score = 0;
  uint32_t length = 0;
};

// Highest score first; on equal scores the leftmost pair, as SentencePiece does.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab, size_t part_bytes, size_t max_part_bytes)
    : vocab_(vocab),
      pre_tokenizer_(vocab.pre_regexes),
      part_bytes_(part_bytes),
      max_part_bytes_(std::max({part_bytes, max_part_bytes, size_t{4}})) {
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
      max_mergeable_bytes_ = std::max(max_mergeable_bytes_, vocab_.pieces[id].size());
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

void SpmEncoder::encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids,
                        const EncodeCheckpoint& checkpoint) const {
  if (text.empty()) return;

  // Normalize as SentencePiece does for llama: spaces become "▁", plus one leading "▁".
  std::string normalized;
  normalized.reserve(text.size() + kSpaceMarker.size() + 2 * std::count(text.begin(), text.end(), ' '));
  if (vocab_.add_space_prefix && starts_sequence) normalized += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMarker;
    } else {
      normalized += c;
    }
  }
  // Each piece merged as the split settles it (their views are never all held at once).
  pre_tokenizer_.for_each_piece(
      normalized, [&](std::string_view piece) { encode_piece(piece, ids, checkpoint); }, checkpoint);
}

bool SpmEncoder::spanned(std::string_view normalized, size_t p) const {
  // Every substring that starts before p and ends after it, up to the longest piece: is one a
  // piece? (Substrings that start or end inside a character only make the test stricter.)
  const size_t reach = max_mergeable_bytes_;
  for (size_t a = p > reach ? p - reach + 1 : 0; a < p; ++a)
    for (size_t b = p + 1; b <= std::min(normalized.size(), a + reach); ++b)
      if (mergeable_id(normalized.substr(a, b - a)) >= 0) return true;
  return false;
}

size_t SpmEncoder::split_point(std::string_view normalized, size_t from, size_t limit) const {
  // A "▁" first: it is never the end of a character, and pieces rarely span where words meet.
  int tries = 0;
  for (size_t p = normalized.find(kSpaceMarker, std::max<size_t>(from, 1)); p < limit && tries < kSplitTries;
       p = normalized.find(kSpaceMarker, p + 1), ++tries)
    if (!spanned(normalized, p)) return p;
  // Text without spaces (CJK, code, a long run): any character boundary.
  tries = 0;
  for (size_t p = utf8_character_start(normalized, from); p < limit && tries < kSplitTries;
       p += utf8_sequence_length(normalized, p), ++tries)
    if (p > 0 && !spanned(normalized, p)) return p;
  return std::string_view::npos;
}

void SpmEncoder::encode_piece(std::string_view normalized, std::vector<int32_t>& ids,
                              const EncodeCheckpoint& checkpoint) const {
  while (normalized.size() > part_bytes_) {
    size_t cut = split_point(normalized, part_bytes_, std::min(normalized.size(), max_part_bytes_));
    if (cut == std::string_view::npos) {
      if (normalized.size() <= max_part_bytes_) break;  // no clean cut, but short enough to merge whole
      // No clean cut: a bounded part all the same (see kMaxPartBytes), never inside a character.
      cut = utf8_character_start(normalized, max_part_bytes_);
    }
    if (checkpoint) checkpoint();
    merge_and_append(normalized.substr(0, cut), ids);
    normalized.remove_prefix(cut);
  }
  if (checkpoint) checkpoint();
  merge_and_append(normalized, ids);
}

void SpmEncoder::merge_and_append(std::string_view normalized, std::vector<int32_t>& ids) const {
  TANDEM_CHECK_INPUT(normalized.size() < (size_t{1} << 31),
                     "a text of {} bytes without a place to cut it is too long to tokenize", normalized.size());
  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  for (size_t pos = 0; pos < normalized.size();) {
    const size_t length = utf8_sequence_length(normalized, pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, -1, static_cast<uint32_t>(pos), static_cast<uint32_t>(length)});
    if (index > 0) symbols[index - 1].next = index;
    pos += length;
  }

  // The pair's merge, if its text is a piece. Adjacent symbols are contiguous in
  // `normalized`, so the pair is one substring.
  const auto candidate = [&](int32_t left, int32_t right, std::vector<Bigram>& out) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const int32_t id = mergeable_id(normalized.substr(symbols[left].start, length));
    if (id >= 0) out.push_back({left, right, vocab_.scores[id], length});
  };
  std::vector<Bigram> initial;  // sized once: a heap grown by doubling would hold twice as much
  initial.reserve(symbols.size());
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) candidate(i - 1, i, initial);
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue(BigramOrder{}, std::move(initial));
  std::vector<Bigram> added;
  const auto try_add = [&](int32_t left, int32_t right) {
    added.clear();
    candidate(left, right, added);
    for (const Bigram& bigram : added) queue.push(bigram);
  };

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
