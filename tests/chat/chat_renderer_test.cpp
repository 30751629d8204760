// The server's chat endpoint renders with the model's own Jinja template when it has one
// (server::ChatRenderer), and with a built-in format when asked by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "chat/chat_renderer.h"
#include "chat/model_chat_renderer.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

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

TEST(ChatTemplateFile, ServeTakesATemplateFileByPath) {
  // `tandem serve --chat-template FILE.jinja`: a model without a template, or with a wrong one.
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string model = testing::shared_path(testing::kAidreamsGguf);
  const Tokenizer tokenizer = load_tokenizer(model, "", 512);
  const std::string path = ::testing::TempDir() + "tandem_chat_template_test.jinja";
  {
    std::ofstream out(path);
    out << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt "
           "%}[assistant]"
           "{% endif %}";
  }
  const ChatRenderer renderer = model_chat_renderer(model, tokenizer, path);
  EXPECT_EQ(renderer.render({{"user", "Hi"}}), "[user] Hi\n[assistant]");
  EXPECT_EQ(model_chat_renderer(model, tokenizer, "chatml").format, ChatFormat::ChatML);  // names still win
  {
    std::ofstream out(path);
    out << "{% for m in messages %}{{ m.content ";  // unterminated
  }
  try {
    model_chat_renderer(model, tokenizer, path);
    ADD_FAILURE() << "a template that does not parse was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  try {
    model_chat_renderer(model, tokenizer, "/nonexistent/template.jinja");
    ADD_FAILURE() << "a missing template file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/template.jinja"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::chat
