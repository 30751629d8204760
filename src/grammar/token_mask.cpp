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
    if (bits == 0) {
      // Most words are all-out in structural states: a plain fill, which vectorises.
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(w * 32), logits.begin() + static_cast<std::ptrdiff_t>(end),
                kNegInf);
      continue;
    }
    for (size_t i = w * 32; i < end; ++i) {
      if (((bits >> (i & 31)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
}

TokenMasker::TokenMasker(std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids)
    : trie_(std::move(trie)), end_ids_(std::move(end_ids)) {
  TANDEM_ASSERT(trie_ != nullptr);
  for (int32_t id : end_ids_) TANDEM_ASSERT(id >= 0 && id < trie_->vocab_size());
  states_.resize(trie_->max_depth() + 1);
}

bool TokenMasker::is_end(int32_t id) const { return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end(); }

bool TokenMasker::cached(GrammarMatcher& matcher) const {
  return matcher.pool().serial() == pool_serial_ && cached_.count(matcher.state()) != 0;
}

bool TokenMasker::fill_mask(GrammarMatcher& matcher, std::span<uint32_t> mask, const std::atomic<bool>* stop) {
  const TokenTrie& trie = *trie_;
  const size_t words = mask_words(trie.vocab_size());
  TANDEM_ASSERT(mask.size() == words);
  StackPool& pool = matcher.pool();
  pool.begin_operation(stop);
  const uint32_t state = matcher.state();
  if (pool.serial() != pool_serial_) {
    pool_serial_ = pool.serial();
    cached_.clear();
  }
  if (auto it = cached_.find(state); it != cached_.end()) {
    std::copy_n(cache_.begin() + static_cast<std::ptrdiff_t>(it->second * words), words, mask.begin());
  } else {
    walk(pool, state, mask);
    if (cached_.size() == kMaskCacheSlots) cached_.clear();
    const size_t slot = cached_.size();
    if (cache_.size() < (slot + 1) * words) cache_.resize((slot + 1) * words);
    std::copy(mask.begin(), mask.end(), cache_.begin() + static_cast<std::ptrdiff_t>(slot * words));
    cached_.emplace(state, slot);
  }
  return std::any_of(mask.begin(), mask.end(), [](uint32_t w) { return w != 0; });
}

void TokenMasker::walk(StackPool& pool, uint32_t state, std::span<uint32_t> mask) {
  const TokenTrie& trie = *trie_;
  std::fill(mask.begin(), mask.end(), 0u);
  if (pool.can_end(state)) {
    for (int32_t id : end_ids_) mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  if (pool.finished(state)) return;
  states_[0] = state;
  const uint32_t n = trie.n_nodes();
  uint32_t until_check = kStopCheckNodes;
  for (uint32_t node = 1; node < n;) {
    if (--until_check == 0) {
      until_check = kStopCheckNodes;
      if (pool.stop_requested()) throw MaskStopped();
    }
    const uint32_t d = trie.depth(node);
    const int32_t next = pool.step(states_[d - 1], trie.byte(node));
    if (next == StackPool::kDead) {
      node = trie.subtree_end(node);
      continue;
    }
    // Alive: the token ending here is allowed; longer ones only if a stack continues.
    for (int32_t id : trie.tokens_at(node)) mask[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    if (pool.finished(static_cast<uint32_t>(next))) {
      node = trie.subtree_end(node);
    } else {
      states_[d] = static_cast<uint32_t>(next);
      ++node;
    }
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
