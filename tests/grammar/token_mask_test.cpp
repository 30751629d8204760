// Token masks against a brute-force oracle (copy the matcher, feed the token's bytes) on
// random reachable states of a few grammars, on a synthetic vocabulary and on the llama-spm
// (32k, SentencePiece) and gpt-2 (50k, byte-level BPE) vocabularies in ../shared.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar/token_trie.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::grammar {
namespace {

// Walks `steps` random allowed tokens from the start of `grammar`, checking at each state
// that the mask equals the oracle's verdict for every token.
void check_against_oracle(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const TokenTrie>& trie,
                          int32_t eos, int steps, uint32_t seed) {
  TokenMasker masker(trie, {eos});
  GrammarMatcher matcher(grammar, 0);
  std::vector<uint32_t> mask(mask_words(trie->vocab_size()));
  std::mt19937 rng(seed);
  for (int step = 0; step < steps; ++step) {
    masker.fill_mask(matcher, mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < trie->vocab_size(); ++id) {
      GrammarMatcher copy = matcher;
      const bool oracle = masker.accept_token(copy, id);
      ASSERT_EQ(mask_allows(mask, id), oracle)
          << "step " << step << " token " << id << " bytes '" << trie->token_bytes(id) << "'";
      if (oracle && id != eos) allowed.push_back(id);
    }
    if (allowed.empty()) {
      EXPECT_TRUE(matcher.can_end());
      return;
    }
    ASSERT_TRUE(masker.accept_token(matcher, allowed[rng() % allowed.size()]));
  }
}

std::shared_ptr<const Grammar> share(Grammar g) { return std::make_shared<const Grammar>(std::move(g)); }

std::vector<std::shared_ptr<const Grammar>> test_grammars() {
  const auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "bé", "c d"]}, "maxItems": 3},
      "ok": {"type": ["boolean", "null"]}
    },
    "required": ["name", "tags"],
    "additionalProperties": false
  })");
  return {share(any_json_grammar()), share(json_schema_grammar(schema)),
          share(parse_gbnf(R"(root ::= (" " | "é" | [а-я]+ | [0-9]{1,3} | "\n")* "." [^a-z]?)"))};
}

TEST(GrammarTokenTrie, PreorderSubtreesHoldExactlyTheirPrefixes) {
  std::vector<std::string> tokens = {"ab", "a", "", "abc", "b", "ab", "ba", "\xC3\xA9"};
  TokenTrie trie(tokens);
  EXPECT_EQ(trie.vocab_size(), 8);
  // Rebuild each node's prefix and check its tokens and subtree.
  std::vector<std::string> prefix(trie.n_nodes());
  std::vector<std::string> path{""};
  for (uint32_t node = 1; node < trie.n_nodes(); ++node) {
    path.resize(trie.depth(node));
    path.push_back(path.back() + static_cast<char>(trie.byte(node)));
    prefix[node] = path.back();
    for (int32_t id : trie.tokens_at(node)) EXPECT_EQ(tokens[static_cast<size_t>(id)], prefix[node]);
  }
  for (uint32_t node = 1; node < trie.n_nodes(); ++node) {
    for (uint32_t other = 1; other < trie.n_nodes(); ++other) {
      const bool inside = other >= node && other < trie.subtree_end(node);
      EXPECT_EQ(inside, prefix[other].starts_with(prefix[node])) << prefix[node] << " / " << prefix[other];
    }
  }
  EXPECT_EQ(trie.max_depth(), 3u);
}

TEST(GrammarTokenMask, SyntheticVocabularyMatchesTheOracle) {
  // Every single byte, some multi-byte tokens, partial UTF-8, and an EOS without bytes.
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  for (const char* t : {"{\"", "\":", "\", \"", "true", "tr", "null}", "]}", " \"", "\xC3", "\xA9\"",
                        "é",   "12",  "1.5e",   "\n  ", "[{", "},",    "aa", "..",  "а",    "бв"})
    tokens.emplace_back(t);
  tokens.emplace_back("");  // EOS
  const auto eos = static_cast<int32_t>(tokens.size() - 1);
  auto trie = std::make_shared<const TokenTrie>(tokens);
  uint32_t seed = 1;
  for (const auto& g : test_grammars()) {
    for (int walk = 0; walk < 4; ++walk) check_against_oracle(g, trie, eos, 40, seed++);
  }
}

TEST(GrammarTokenMask, EndTokensOnlyWhenTheGrammarCanEndAndEmptyMasksAreReported) {
  auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"a", "ab", "b", "", "c"});
  auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a" "b"?)"));
  std::vector<uint32_t> mask(mask_words(5));
  TokenMasker masker(trie, {3});
  GrammarMatcher m(g);
  EXPECT_TRUE(masker.fill_mask(m, mask));
  EXPECT_EQ(mask[0], 0b00011u);  // a, ab
  EXPECT_FALSE(masker.accept_token(m, 3));
  ASSERT_TRUE(masker.accept_token(m, 0));
  EXPECT_TRUE(masker.fill_mask(m, mask));
  EXPECT_EQ(mask[0], 0b01100u);  // b, EOS
  ASSERT_TRUE(masker.accept_token(m, 2));
  EXPECT_TRUE(m.must_end());
  EXPECT_TRUE(masker.fill_mask(m, mask));
  EXPECT_EQ(mask[0], 0b01000u);  // EOS only
  EXPECT_TRUE(masker.accept_token(m, 3));
  TokenMasker no_end(trie, {});
  EXPECT_FALSE(no_end.fill_mask(m, mask));
  // Rollback by tokens: back before "b" and "a".
  ASSERT_TRUE(m.rollback(3));
  EXPECT_TRUE(masker.fill_mask(m, mask));
  EXPECT_EQ(mask[0], 0b00011u);
}

TEST(GrammarTokenMask, ApplyMaskSetsDisallowedLogitsToMinusInfinity) {
  std::vector<float> logits(40, 1.0f);
  std::vector<uint32_t> mask(mask_words(40), 0);
  mask[0] = 1u << 3;
  mask[1] = 1u << 5;  // token 37
  apply_token_mask(mask, logits);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(logits[static_cast<size_t>(i)] == 1.0f, i == 3 || i == 37) << i;
}

void check_vocabulary(const char* relative) {
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(relative), "", 0);
  auto trie = std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(tokenizer));
  uint32_t seed = 100;
  for (const auto& g : test_grammars()) check_against_oracle(g, trie, tokenizer.vocab().eos_id, 12, seed++);
}

TEST(GrammarTokenMaskVocab, LlamaSpmMatchesTheOracle) {
  TANDEM_REQUIRE_SHARED("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  check_vocabulary("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
}

TEST(GrammarTokenMaskVocab, Gpt2MatchesTheOracle) {
  TANDEM_REQUIRE_SHARED("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  check_vocabulary("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
}

TEST(GrammarTokenMaskVocab, SpmByteTokensAndSpacesAreTheirBytes) {
  TANDEM_REQUIRE_SHARED("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer tokenizer =
      load_tokenizer(testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"), "", 0);
  TokenTrie trie = TokenTrie::from_tokenizer(tokenizer);
  const Vocab& vocab = tokenizer.vocab();
  int byte_tokens = 0;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const int b = parse_byte_piece(vocab.pieces[static_cast<size_t>(id)]);
    if (b >= 0) {
      ++byte_tokens;
      EXPECT_EQ(trie.token_bytes(id), std::string(1, static_cast<char>(b)));
    }
  }
  EXPECT_EQ(byte_tokens, 256);
  EXPECT_TRUE(trie.token_bytes(vocab.bos_id).empty());
  EXPECT_TRUE(trie.token_bytes(vocab.eos_id).empty());
  const std::vector<int32_t> ids = tokenizer.encode(" {", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(trie.token_bytes(ids[0])[0], ' ');
}

}  // namespace
}  // namespace tandem::grammar
