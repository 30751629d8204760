// vLLM's bad_words: words the output must not contain, as token sequences. A one-token word is
// never sampled; a longer one's last token is banned whenever the generated tokens end with
// the rest of it. Each word counts as the tokenizer encodes it at the start of a text and,
// when that differs, after a space (vLLM's rule). Only generated tokens are looked at, never
// the prompt. Owns the matching; the engine hands its result to Sampler::set_suppressed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem {

class Tokenizer;

// The words' token sequences (vLLM's SamplingParams.update_from_tokenizer): each word with its
// leading spaces stripped, encoded as is and with one space before it; the spaced form is
// kept only when it starts with another token and is as long. InputError for an empty word.
std::vector<std::vector<int32_t>> bad_word_sequences(const Tokenizer& tokenizer, std::span<const std::string> words);

// Appends to `banned` the tokens that would complete a bad word after `generated`.
void append_bad_word_bans(std::span<const std::vector<int32_t>> words, std::span<const int32_t> generated,
                          std::vector<int32_t>& banned);

}  // namespace tandem
