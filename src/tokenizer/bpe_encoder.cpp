// Byte-level BPE encoding (see bpe_encoder.h): a linked list of symbols and a min-heap of
// candidate merges, O(n log n) per part of a piece (at most max_piece_bytes_). A heap entry
// is stale when either symbol has changed since it was queued; a symbol's id only ever grows
// into longer tokens, so comparing ids is enough to tell.
#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  int32_t id = -1;    // token of this symbol; -1 if its character has no token
  size_t start = 0;   // byte range of the piece
  size_t length = 0;  // 0: merged into its left neighbour
};

struct Candidate {
  int32_t rank = 0;
  int left = 0;
  int right = 0;
  int32_t left_id = 0;
  int32_t right_id = 0;
};

// Lowest rank first; on equal ranks the leftmost pair.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const Vocab& vocab, size_t max_piece_bytes)
    : vocab_(vocab), pre_tokenizer_(vocab.pre_regexes), max_piece_bytes_(std::max<size_t>(max_piece_bytes, 4)) {
  for (int32_t id = 0; id < static_cast<int32_t>(vocab_.size()); ++id) {
    const TokenType type = vocab_.types[id];
    if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::Unused) {
      continue;
    }
    token_ids_.emplace(vocab_.pieces[id], id);  // the first of duplicate pieces wins
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = token_id(byte_to_piece_char(static_cast<uint8_t>(b)));

  // A merge whose sides or result are not tokens can never apply; it is dropped. Of two
  // merges of the same pair the lower rank wins, as in the rank order it came in.
  std::string merged;
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const auto& [left, right] = vocab_.merges[rank];
    merged = left;
    merged += right;
    const int32_t left_id = token_id(left), right_id = token_id(right), result = token_id(merged);
    if (left_id < 0 || right_id < 0 || result < 0) continue;
    merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }
}

int32_t BpeEncoder::token_id(std::string_view piece) const {
  auto it = token_ids_.find(piece);
  return it == token_ids_.end() ? -1 : it->second;
}

void BpeEncoder::encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids,
                        const EncodeCheckpoint& checkpoint) const {
  if (vocab_.add_space_prefix && starts_sequence && !text.empty() && text[0] != ' ') {
    // HF ByteLevel's add_prefix_space (RoBERTa-style): the first word looks like any other.
    const std::string prefixed = std::string(" ").append(text);  // not " " + ...: GCC 12 -Wrestrict, bug 105329
    pre_tokenizer_.for_each_piece(
        prefixed, [&](std::string_view piece) { encode_piece(piece, ids, checkpoint); }, checkpoint);
    return;
  }
  // Each piece merged as the split settles it: the pieces of megabytes of text are never
  // all held at once.
  pre_tokenizer_.for_each_piece(
      text, [&](std::string_view piece) { encode_piece(piece, ids, checkpoint); }, checkpoint);
}

void BpeEncoder::encode_piece(std::string_view bytes, std::vector<int32_t>& ids,
                              const EncodeCheckpoint& checkpoint) const {
  while (bytes.size() > max_piece_bytes_) {
    const size_t cut = utf8_character_start(bytes, max_piece_bytes_);  // > 0: max_piece_bytes_ >= 4
    if (checkpoint) checkpoint();
    merge_and_append(bytes.substr(0, cut), ids);
    bytes.remove_prefix(cut);
  }
  if (checkpoint) checkpoint();
  merge_and_append(bytes, ids);
}

void BpeEncoder::merge_and_append(std::string_view bytes, std::vector<int32_t>& ids) const {
  if (bytes.empty()) return;
  if (vocab_.ignore_merges || bytes.size() == 1) {
    if (const int32_t id = token_id(byte_level_encode(bytes)); id >= 0) {
      ids.push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int index = static_cast<int>(i);
    symbols[i] = {index - 1, index + 1 < static_cast<int>(bytes.size()) ? index + 1 : -1,
                  byte_ids_[static_cast<uint8_t>(bytes[i])], i, 1};
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0 || symbols[left].id < 0 || symbols[right].id < 0) return;
    auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, left, right, symbols[left].id, symbols[right].id});
    }
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.next != top.right || left.id != top.left_id ||
        right.id != top.right_id) {
      continue;  // stale: one side changed after this entry was queued
    }
    left.id = merges_.at(pair_key(top.left_id, top.right_id)).result;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }

  for (int i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      ids.push_back(symbols[i].id);
    } else if (vocab_.unk_id >= 0) {
      // Only a single byte with no token of its own gets here (a vocabulary missing part of
      // the byte alphabet); merged symbols always have ids.
      ids.push_back(vocab_.unk_id);
    }
  }
}

}  // namespace tandem
