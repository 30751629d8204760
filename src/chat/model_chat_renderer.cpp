// model_chat_renderer(): see model_chat_renderer.h.
#include "chat/model_chat_renderer.h"

#include "base/error.h"
#include "io/gguf_file.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::chat {

ChatRenderer model_chat_renderer(const std::string& model_path, const Tokenizer& tokenizer,
                                 const std::string& format_name, std::string* fallback_reason) {
  if (fallback_reason != nullptr) fallback_reason->clear();
  ChatRenderer renderer;
  const Vocab& vocab = tokenizer.vocab();
  if (vocab.bos_id >= 0) renderer.bos_token = vocab.pieces[static_cast<size_t>(vocab.bos_id)];
  if (vocab.eos_id >= 0) renderer.eos_token = vocab.pieces[static_cast<size_t>(vocab.eos_id)];
  if (!format_name.empty()) {
    const auto format = chat_format_from_name(format_name);
    TANDEM_CHECK_INPUT(format.has_value(), "unknown chat template '{}' (chatml, llama2, llama3, zephyr)", format_name);
    renderer.format = *format;
    return renderer;
  }
  if (!is_gguf_path(model_path)) return renderer;
  const GgufFile file = GgufFile::open(model_path);
  renderer.jinja_template = file.get_string("tokenizer.chat_template").value_or("");
  renderer.format = detect_chat_format(renderer.jinja_template);
  try {
    renderer.compile();  // once, here, rather than on every conversation
  } catch (const InputError& error) {
    if (fallback_reason != nullptr) *fallback_reason = error.what();
    renderer.jinja_template.clear();
  }
  return renderer;
}

}  // namespace tandem::chat
