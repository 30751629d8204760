// Incremental decoding (see streaming_detokenizer.h). It applies the same leading-space
// rule and the same UTF-8 sanitizer as Tokenizer::decode, which is what keeps them equal.
#include "tokenizer/streaming_detokenizer.h"

#include <string_view>

namespace tandem {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string StreamingDetokenizer::push(int32_t id) {
  std::string bytes = tokenizer_.token_bytes(id);
  const bool special = !options_.skip_special_tokens && tokenizer_.vocab().types.at(id) == TokenType::Control;
  if (special) bytes = tokenizer_.vocab().pieces.at(id);
  std::string_view view = bytes;
  if (tokenizer_.strips_space_after(previous_id_) && !view.empty() && view[0] == ' ') {
    view.remove_prefix(1);
  }
  std::string out;
  // A control token printed as text stands apart from its neighbours (transformers joins the
  // pieces between control tokens with spaces).
  if (options_.spaces_between_special_tokens && previous_id_ >= 0 && !view.empty() && (special || previous_special_))
    sanitizer_.feed(" ", out);
  previous_id_ = id;
  if (!view.empty() || special) previous_special_ = special;
  sanitizer_.feed(view, out);
  return out;
}

std::string StreamingDetokenizer::finish() {
  std::string out;
  sanitizer_.finish(out);
  previous_id_ = -1;
  previous_special_ = false;
  return out;
}

}  // namespace tandem
