// TokenTrie: a vocabulary's tokens as byte strings, arranged as a prefix tree laid out in
// preorder, built once per vocabulary and shared by every sequence. A mask walks it in
// array order: tokens that share a prefix share the work of matching it, and a prefix the
// grammar rejects skips its whole subtree with one jump. Tokens without bytes (control,
// unused, unknown) are not in it: a grammar never allows them (EOS is the masker's concern).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem {
class Tokenizer;
}

namespace tandem::grammar {

class TokenTrie {
 public:
  // token_bytes: [vocab_size] each token's bytes; empty means never allowed by a grammar.
  explicit TokenTrie(std::vector<std::string> token_bytes);
  // The tokenizer's token_bytes (SentencePiece's ▁ and <0xXX>, byte-level BPE's mapped
  // characters already turned into bytes), without control, unused and unknown tokens.
  static TokenTrie from_tokenizer(const Tokenizer& tokenizer);

  int64_t vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }

  // Nodes in preorder; node 0 is the root (the empty prefix). Node i (i > 0) adds byte(i) to
  // its parent's prefix, sits at depth(i) >= 1, and its subtree is [i, subtree_end(i)).
  uint32_t n_nodes() const { return static_cast<uint32_t>(bytes_.size()); }
  uint8_t byte(uint32_t node) const { return bytes_[node]; }
  uint32_t depth(uint32_t node) const { return depths_[node]; }
  uint32_t subtree_end(uint32_t node) const { return subtree_ends_[node]; }
  uint32_t max_depth() const { return max_depth_; }
  // The tokens whose bytes are exactly node's prefix (several ids can share bytes).
  std::span<const int32_t> tokens_at(uint32_t node) const {
    return {token_ids_.data() + token_begin_[node], token_ids_.data() + token_begin_[node + 1]};
  }

 private:
  std::vector<std::string> token_bytes_;  // [vocab_size]
  std::vector<uint8_t> bytes_;            // [n_nodes]
  std::vector<uint32_t> depths_;          // [n_nodes]
  std::vector<uint32_t> subtree_ends_;    // [n_nodes]
  std::vector<uint32_t> token_begin_;     // [n_nodes + 1] into token_ids_
  std::vector<int32_t> token_ids_;
  uint32_t max_depth_ = 0;
};

}  // namespace tandem::grammar
