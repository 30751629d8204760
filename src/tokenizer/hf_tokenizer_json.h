// Hugging Face tokenizer.json (model type BPE) -> Vocab: byte-level BPE when the pre-tokenizer
// or decoder is ByteLevel (GPT-2, Llama 3, Qwen2 ...), SentencePiece form when it is the
// Llama/Mistral export (byte_fallback, "▁" normalizer or Metaspace). Pre-tokenizers: ByteLevel,
// Split, Digits, Punctuation, Whitespace, WhitespaceSplit, Metaspace, alone or in a Sequence.
// BOS/EOS come from a tokenizer_config.json beside it, else the post-processor. Parsing only.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/vocab.h"

namespace tandem {

// Reads `path` and, if present, tokenizer_config.json in the same folder. InputError naming
// the file for malformed JSON, an unsupported model/pre-tokenizer/normalizer, or bad ids.
Vocab vocab_from_tokenizer_json(const std::string& path);

// The same from text already in memory; `config_json` may be empty. `where` names the
// source in error messages.
Vocab vocab_from_tokenizer_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                     const std::string& where);

}  // namespace tandem
