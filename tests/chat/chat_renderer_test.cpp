// The server's chat endpoint renders with the model's own Jinja template when it has one
// (server::ChatRenderer), and with a built-in format when asked by name.
#include <gtest/gtest.h>

#include "base/error.h"
#include "chat/chat_renderer.h"

namespace tandem::chat {
namespace {

TEST(ServerChatRenderer, UsesTheModelsJinjaTemplate) {
  ChatRenderer renderer;
  renderer.jinja_template =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  renderer.bos_token = "<s>";
  renderer.eos_token = "</s>";
  const std::string text = renderer.render({{"system", "Be brief. "}, {"user", "Hi"}});
  EXPECT_EQ(text, "<s><|system|>Be brief.</s><|user|>Hi</s><|assistant|>");
  EXPECT_TRUE(renderer.starts_with_bos(text));  // so the tokenizer adds no second BOS
  EXPECT_EQ(renderer.name(), "model template");
}

TEST(ServerChatRenderer, TemplateErrorsAreInputErrors) {
  ChatRenderer renderer;
  renderer.jinja_template = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
                            "{% endif %}{% endfor %}";
  EXPECT_THROW(renderer.render({{"system", "x"}}), InputError);
}

TEST(ServerChatRenderer, BuiltInFormatWhenNoTemplate) {
  ChatRenderer renderer;
  renderer.format = ChatFormat::ChatML;
  const std::string text = renderer.render({{"user", "Hi"}});
  EXPECT_NE(text.find("<|im_start|>user\nHi<|im_end|>"), std::string::npos) << text;
  EXPECT_FALSE(renderer.starts_with_bos(text));
}

}  // namespace
}  // namespace tandem::chat
