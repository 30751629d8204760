// load_tokenizer: finds and loads the tokenizer that belongs to a model — the vocab embedded
// in a .gguf, a Hugging Face tokenizer.json (or a model folder holding one), or a llama2.c
// tokenizer.bin next to (or named for) a model.bin. Only locating and reading; the model's
// weights are not touched.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tandem {

// For a .gguf: its embedded vocab. For a folder (a Hugging Face checkpoint) or a .json file:
// its tokenizer.json. For a llama2.c model.bin: `tokenizer_path` if non-empty (a .gguf, a
// tokenizer.json or its folder, or a tokenizer.bin), else tokenizer.bin or tok*.bin in the
// model's folder (InputError if none). The llama2.c vocab size is `vocab_size_hint` when
// > 0, else the model header's vocab_size field.
Tokenizer load_tokenizer(const std::string& model_path, const std::string& tokenizer_path, int64_t vocab_size_hint);

// The vocab_size field of a llama2.c checkpoint header (the absolute value of its 6th int32;
// negative only flags an unshared classifier). InputError if the file is too short.
int64_t llama2c_header_vocab_size(const std::string& model_path);

// The tokenizer.json that `path` names: the path itself when it is a .json file, or
// DIR/tokenizer.json for a folder holding one; "" otherwise.
std::string tokenizer_json_path(const std::string& path);

// True when `path` names a GGUF file (by its magic bytes, falling back to the extension).
bool is_gguf_path(const std::string& path);

}  // namespace tandem
