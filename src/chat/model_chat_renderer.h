// Which ChatRenderer a loaded model's conversations use: a built-in format asked for by
// name, else the model's own Jinja template (GGUF tokenizer.chat_template) parsed once, else
// the built-in format that template resembles (ChatML when there is none). Shared by
// `tandem serve` and the library; it only chooses, it renders nothing.
#pragma once

#include <string>

#include "chat/chat_renderer.h"
#include "tokenizer/tokenizer.h"

namespace tandem::chat {

// `format_name`: "chatml", "llama2", "llama3", "zephyr", the path of a Jinja template file
// (compiled here: a template that does not parse is an InputError naming the file), or empty
// for the model's own template (InputError for a name that is none of these). A model template that does not parse
// falls back to the built-in format it resembles; *fallback_reason (when given) then says why, else stays empty.
ChatRenderer model_chat_renderer(const std::string& model_path, const Tokenizer& tokenizer,
                                 const std::string& format_name, std::string* fallback_reason = nullptr);

}  // namespace tandem::chat
