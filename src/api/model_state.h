// What a public tandem::api::Model holds: the internal model (weights), its tokenizer and its
// chat renderer, all immutable after Model::load. Engines read it through their shared
// pointer to the public Model, which keeps it alive (the internal engine keeps a reference
// to the tokenizer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "chat/chat_renderer.h"
#include "model/model.h"
#include "tandem/tandem.h"
#include "tokenizer/tokenizer.h"

namespace tandem::api::detail {

struct ModelState {
  std::shared_ptr<const tandem::Model> model;
  Tokenizer tokenizer;
  chat::ChatRenderer chat_renderer;
  std::string path;
};

std::vector<chat::ChatMessage> to_internal(const std::vector<ChatMessage>& messages);

// The internal type the KV cache stores for a public KvCacheType.
DType kv_dtype(KvCacheType type);

}  // namespace tandem::api::detail
