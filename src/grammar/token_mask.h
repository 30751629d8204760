// TokenMasker: the grammar's verdict on every token of the vocabulary for one decode step,
// as a bitset the sampler applies to the logits before it samples; then the chosen token is
// fed back to the matcher. Per step, for one sequence:
//
//   masker.fill_mask(matcher, mask);        // mask: [mask_words(vocab_size)] bits, 1 = allowed
//   apply_token_mask(mask, logits);         // disallowed logits -> -inf
//   id = sampler.sample(logits, history);
//   masker.accept_token(matcher, id);       // false only if id was not allowed
//
// A token is allowed when the matcher accepts all its bytes in order (a partial UTF-8
// character is fine); an end token when the text so far is a whole sentence. The masker
// holds scratch and a cache of masks by matcher state (a state's mask never changes): one
// masker per sequence, so the cache serves it; the trie is shared by all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace tandem::grammar {

// 32-bit words for a mask over `vocab_size` tokens.
inline size_t mask_words(int64_t vocab_size) { return static_cast<size_t>((vocab_size + 31) / 32); }
inline bool mask_allows(std::span<const uint32_t> mask, int32_t id) {
  return ((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) != 0;
}
// logits[i] = -inf for every token the mask does not allow. logits: [vocab_size].
void apply_token_mask(std::span<const uint32_t> mask, std::span<float> logits);

class TokenMasker {
 public:
  // end_ids: the tokens that end generation (EOS, EOT, ...), allowed when the grammar can end.
  TokenMasker(std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids);

  // mask: [mask_words(vocab_size)], overwritten. Grows the matcher's pool (states and
  // transitions are cached there), not its state. Returns false when no token at all is
  // allowed (the grammar is finished and none of end_ids is in the vocabulary's reach, or the
  // vocabulary cannot spell what the grammar needs next): the caller ends the sequence.
  // InputError only past a matching limit (grammar_limits.h: stacks at once, work per call,
  // memory), for a grammar too ambiguous to follow; one call's work is at most kMaxStepWork.
  // `stop` (optional; another thread sets it when the request ends) is read every
  // StackPool::kStopCheckUnits units of stack work and every kStopCheckNodes trie nodes: once
  // set, MaskStopped is thrown and the matcher must not be used again.
  bool fill_mask(GrammarMatcher& matcher, std::span<uint32_t> mask, const std::atomic<bool>* stop = nullptr);
  // Whether the mask for the matcher's current state is in the cache: fill_mask is then a
  // copy of mask_words(vocab_size) words, with no grammar work.
  bool cached(GrammarMatcher& matcher) const;

  // Advances the matcher by token `id` as one step; false (matcher unchanged) when the
  // grammar does not allow it. An end token is allowed iff matcher.can_end(); it is a step
  // that changes nothing.
  bool accept_token(GrammarMatcher& matcher, int32_t id) const;

  const TokenTrie& trie() const { return *trie_; }
  bool is_end(int32_t id) const;

 private:
  // The trie walk: the allowed tokens from `state` into `mask`.
  void walk(StackPool& pool, uint32_t state, std::span<uint32_t> mask);
  // Trie nodes walked between two reads of the stop flag (a cached node is a few ns).
  static constexpr uint32_t kStopCheckNodes = 4096;

  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_ids_;
  // States per trie depth: states_[d] is the matcher state after the first d bytes of the
  // current trie path. Sized once, for the longest token.
  std::vector<uint32_t> states_;
  // Masks already computed, by matcher state: a mask is a function of the state alone, and
  // states recur (every token inside a JSON string ends in the same state), so a recurring
  // state costs a copy. Keyed by state id within one pool (pool_serial_); at most
  // kMaskCacheSlots masks, all dropped when full.
  static constexpr size_t kMaskCacheSlots = 128;
  uint64_t pool_serial_ = 0;
  std::unordered_map<uint32_t, size_t> cached_;  // state -> slot
  std::vector<uint32_t> cache_;                  // [n_slots, mask_words(vocab_size)]
};

}  // namespace tandem::grammar
