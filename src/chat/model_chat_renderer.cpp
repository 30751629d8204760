// model_chat_renderer(): see model_chat_renderer.h.
#include "chat/model_chat_renderer.h"

#include <filesystem>
#include <fstream>
#include <iterator>

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
    if (const auto format = chat_format_from_name(format_name)) {
      renderer.format = *format;
      return renderer;
    }
    // Not a built-in name: a Jinja template file (a model without a template, or a wrong one).
    std::ifstream in(format_name, std::ios::binary);
    TANDEM_CHECK_INPUT(in.good() && !std::filesystem::is_directory(format_name),
                       "unknown chat template '{}': neither a built-in format (chatml, llama2, llama3, zephyr) nor a "
                       "readable Jinja file",
                       format_name);
    renderer.jinja_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    renderer.format = detect_chat_format(renderer.jinja_template);
    try {
      renderer.compile();
    } catch (const InputError& error) {
      throw InputError(fmt::format("chat template {}: {}", format_name, error.what()));
    }
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
