// Test helper for the profiler tests: a random-weight Q8_0 model large enough that each op
// takes microseconds (so the clock reads between ops are a small part of a step), loaded
// from a temporary GGUF, and a placeholder tokenizer for driving an Engine without a vocabulary.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "support/random_model.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test_support {

inline RandomModelSpec profiled_model_spec() {
  RandomModelSpec spec;
  spec.d_model = 256;
  spec.n_layers = 3;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.d_ff = 512;
  spec.vocab_size = 512;
  spec.context_length = 128;
  spec.dtype = DType::Q8_0;
  return spec;
}

inline std::shared_ptr<const Model> load_profiled_model(const TempDir& dir) {
  const std::string path = dir.file("profiled.gguf");
  write_random_model(profiled_model_spec(), path);
  return load_model(path);
}

// Pieces "<t0>", "<t1>", ...: the engine detokenizes with it; no BOS/EOS.
inline Tokenizer placeholder_tokenizer(int64_t vocab_size) {
  Vocab vocab;
  for (int64_t i = 0; i < vocab_size; ++i) {
    vocab.pieces.push_back("<t" + std::to_string(i) + ">");
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(TokenType::Normal);
  }
  vocab.bos_id = vocab.eos_id = vocab.unk_id = -1;
  return Tokenizer(std::move(vocab));
}

}  // namespace tandem::test_support
