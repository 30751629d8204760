// Incremental decoding (see streaming_detokenizer.h). It applies the same leading-space
// rule and the same UTF-8 sanitizer as Tokenizer::decode, which is what keeps them equal.
#include "tokenizer/streaming_detokenizer.h"

#include <string_view>

namespace tandem {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

std::string StreamingDetokenizer::push(int32_t id) {
  const std::string bytes = tokenizer_.token_bytes(id);
  std::string_view view = bytes;
  if (tokenizer_.strips_space_after(previous_id_) && !view.empty() && view[0] == ' ') {
    view.remove_prefix(1);
  }
  previous_id_ = id;
  std::string out;
  sanitizer_.feed(view, out);
  return out;
}

std::string StreamingDetokenizer::finish() {
  std::string out;
  sanitizer_.finish(out);
  previous_id_ = -1;
  return out;
}

}  // namespace tandem
