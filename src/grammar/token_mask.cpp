// The mask walk: the trie in preorder, one stack set per depth; a node the grammar rejects
// (no stack survives its byte) skips its subtree.
#include "grammar/token_mask.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace tandem::grammar {

void apply_token_mask(std::span<const uint32_t> mask, std::span<float> logits) {
  TANDEM_ASSERT(mask.size() == mask_words(static_cast<int64_t>(logits.size())));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < mask.size(); ++w) {
    const uint32_t bits = mask[w];
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(logits.size(), w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (((bits >> (i & 31)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
}

TokenMasker::TokenMasker(std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids)
    : trie_(std::move(trie)), end_ids_(std::move(end_ids)) {
  TANDEM_ASSERT(trie_ != nullptr);
  for (int32_t id : end_ids_) TANDEM_ASSERT(id >= 0 && id < trie_->vocab_size());
  sets_.resize(trie_->max_depth() + 1);
}

bool TokenMasker::is_end(int32_t id) const { return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end(); }

void TokenMasker::fill_mask(GrammarMatcher& matcher, std::span<uint32_t> mask) {
  const TokenTrie& trie = *trie_;
  TANDEM_ASSERT(mask.size() == mask_words(trie.vocab_size()));
  std::fill(mask.begin(), mask.end(), 0u);
  if (matcher.can_end()) {
    for (int32_t id : end_ids_) mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  StackPool& pool = matcher.pool();
  const std::span<const uint32_t> start = matcher.tops();
  if (start.empty()) return;
  const uint32_t n = trie.n_nodes();
  for (uint32_t node = 1; node < n;) {
    const uint32_t d = trie.depth(node);
    const std::span<const uint32_t> from = d == 1 ? start : std::span<const uint32_t>(sets_[d - 1]);
    std::vector<uint32_t>& to = sets_[d];
    to.clear();
    bool can_end = false;
    const uint8_t byte = trie.byte(node);
    if (!pool.accepts(from, byte)) {
      node = trie.subtree_end(node);
      continue;
    }
    pool.advance(from, byte, to, can_end);
    // Alive: some stack continues, or the grammar just ended (then only this exact
    // prefix is allowed, nothing longer).
    for (int32_t id : trie.tokens_at(node)) mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    node = to.empty() ? trie.subtree_end(node) : node + 1;
  }
}

bool TokenMasker::accept_token(GrammarMatcher& matcher, int32_t id) const {
  TANDEM_ASSERT(id >= 0 && id < trie_->vocab_size());
  if (is_end(id)) {
    if (!matcher.can_end()) return false;
    return matcher.accept_bytes({});
  }
  const std::string& bytes = trie_->token_bytes(id);
  if (bytes.empty()) return false;
  return matcher.accept_bytes(bytes);
}

}  // namespace tandem::grammar
