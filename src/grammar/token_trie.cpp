// TokenTrie construction: sort the tokens by bytes, then each token adds the nodes for the
// part of it that differs from the previous token; a node's subtree ends when a later token
// no longer shares its prefix.
#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace tandem::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : token_bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    if (!token_bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes_[static_cast<size_t>(a)] < token_bytes_[static_cast<size_t>(b)];
  });
  bytes_.push_back(0);
  depths_.push_back(0);
  subtree_ends_.push_back(0);
  std::vector<std::vector<int32_t>> tokens_at(1);
  std::vector<uint32_t> path{0};  // path[d]: the node at depth d on the current prefix
  std::string_view previous;
  for (int32_t id : order) {
    const std::string_view bytes = token_bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < previous.size() && common < bytes.size() && previous[common] == bytes[common]) ++common;
    // Close the nodes past the shared prefix: their subtrees end here.
    while (path.size() > common + 1) {
      subtree_ends_[path.back()] = static_cast<uint32_t>(bytes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      const auto node = static_cast<uint32_t>(bytes_.size());
      bytes_.push_back(static_cast<uint8_t>(bytes[d]));
      depths_.push_back(static_cast<uint32_t>(d + 1));
      subtree_ends_.push_back(0);
      tokens_at.emplace_back();
      path.push_back(node);
    }
    tokens_at[path.back()].push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(bytes.size()));
    previous = bytes;
  }
  while (!path.empty()) {
    subtree_ends_[path.back()] = static_cast<uint32_t>(bytes_.size());
    path.pop_back();
  }
  token_begin_.push_back(0);
  for (const auto& ids : tokens_at) {
    token_ids_.insert(token_ids_.end(), ids.begin(), ids.end());
    token_begin_.push_back(static_cast<uint32_t>(token_ids_.size()));
  }
}

TokenTrie TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  std::vector<std::string> bytes(static_cast<size_t>(vocab.size()));
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types.empty() ? TokenType::Normal : vocab.types[static_cast<size_t>(id)];
    if (type == TokenType::Control || type == TokenType::Unused || type == TokenType::Unknown) continue;
    bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  }
  return TokenTrie(std::move(bytes));
}

}  // namespace tandem::grammar
