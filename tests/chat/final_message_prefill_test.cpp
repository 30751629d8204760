// Assistant prefill (chat/final_message_prefill.h): a conversation ending with the
// assistant's message renders as a prompt that ends right after that message's content, for
// the four built-in formats and every template in ../shared/chat-templates: the text is the
// closed render cut before the turn's end, shorter than the render that opens a new turn, and
// the continued content lies outside the template's special spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "chat/chat_renderer.h"
#include "chat/final_message_prefill.h"
#include "tokenizer/tokenizer_test_util.h"

namespace tandem::chat {
namespace {

namespace fs = std::filesystem;
using testing::shared_path;

const std::string kPrefix = "The answer is";
const std::vector<ToolDefinition> kTools = {
    {"get_weather", "The weather in a city",
     nlohmann::ordered_json::parse(
         R"({"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}})")}};

RenderOptions continued(nlohmann::ordered_json kwargs = nullptr) {
  return RenderOptions{.add_generation_prompt = false, .continue_final_message = true, .template_kwargs = kwargs};
}
RenderOptions closed(nlohmann::ordered_json kwargs = nullptr) {
  return RenderOptions{.add_generation_prompt = false, .continue_final_message = false, .template_kwargs = kwargs};
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// What every renderer must give for a conversation ending in kPrefix.
void expect_open_final_message(const ChatRenderer& renderer, const std::vector<ChatMessage>& messages,
                               const std::vector<ToolDefinition>& tools, const std::string& name,
                               const nlohmann::ordered_json& kwargs = nullptr) {
  SCOPED_TRACE(name);
  const std::string open = renderer.render(messages, tools, continued(kwargs));
  const std::string whole = renderer.render(messages, tools, closed(kwargs));
  RenderOptions new_turn_options;  // closed, then a new assistant turn
  new_turn_options.template_kwargs = kwargs;
  const std::string new_turn = renderer.render(messages, tools, new_turn_options);
  EXPECT_TRUE(ends_with(open, kPrefix)) << open;
  EXPECT_EQ(whole.compare(0, open.size(), open), 0) << "the closed render does not start with\n"
                                                    << open << "\n---\n"
                                                    << whole;
  EXPECT_LT(open.size(), new_turn.size());
  EXPECT_EQ(open.find("<<tandem"), std::string::npos) << "the marker leaked";
}

TEST(FinalMessagePrefill, BuiltInFormatsEndInsideTheAssistantMessage) {
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "What is 6 x 7?"}, {"assistant", kPrefix}};
  for (const ChatFormat format : {ChatFormat::ChatML, ChatFormat::Llama2, ChatFormat::Llama3, ChatFormat::Zephyr}) {
    ChatRenderer renderer;
    renderer.format = format;
    expect_open_final_message(renderer, messages, {}, std::string(chat_format_name(format)));
  }
  ChatRenderer chatml;
  EXPECT_EQ(chatml.render(messages, {}, continued()),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 6 x 7?<|im_end|>\n"
            "<|im_start|>assistant\nThe answer is");
}

TEST(FinalMessagePrefill, WithoutGenerationPromptTheConversationJustEnds) {
  ChatRenderer chatml;
  EXPECT_EQ(chatml.render({{"user", "Hi"}}, {}, closed()), "<|im_start|>user\nHi<|im_end|>\n");
  chatml.jinja_template =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% "
      "endif %}";
  EXPECT_EQ(chatml.render({{"user", "Hi"}}, {}, closed()), "<|user|>Hi");
  EXPECT_EQ(chatml.render({{"user", "Hi"}}), "<|user|>Hi<|assistant|>");
}

TEST(FinalMessagePrefill, RefusesWhatCannotBeContinued) {
  ChatRenderer chatml;
  EXPECT_THROW(chatml.render({{"user", "Hi"}}, {}, continued()), InputError);
  ChatMessage calling{"assistant", ""};
  calling.tool_calls.push_back({"call_1", "f", "{}"});
  EXPECT_THROW(chatml.render({{"user", "Hi"}, calling}, {}, continued()), InputError);
  // A template that drops the last message's content has no place to continue from.
  ChatRenderer dropping;
  dropping.jinja_template = "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}";
  EXPECT_THROW(dropping.render({{"user", "Hi"}, {"assistant", "So"}}, {}, continued()), InputError);
  // A template that prints it twice neither.
  ChatRenderer twice;
  twice.jinja_template = "{% for m in messages %}{{ m.content }}|{{ m.content }}{% endfor %}";
  EXPECT_THROW(twice.render({{"user", "Hi"}, {"assistant", "So"}}, {}, continued()), InputError);
}

TEST(FinalMessagePrefill, TrimmingTemplatesKeepTheContentsEnd) {
  // Llama 3's `| trim`: the prefill's trailing space is the client's and stays.
  ChatRenderer trimming;
  trimming.jinja_template = "{% for m in messages %}[{{ m.role }}]{{ m.content | trim }}[end]{% endfor %}";
  EXPECT_EQ(trimming.render({{"user", "Hi"}, {"assistant", "  Well, "}}, {}, continued()),
            "[user]Hi[end][assistant]Well, ");
}

TEST(FinalMessagePrefill, CutKeepsOnlyTheSpansBeforeIt) {
  RenderedChat chat{"<a>x" + mark_final_message({{"assistant", "y"}}).back().content + "<b>", {{0, 3}, {3, 4}}};
  chat.special_spans.push_back({chat.text.size() - 3, chat.text.size()});
  const RenderedChat cut = cut_at_final_message(chat);
  EXPECT_EQ(cut.text, "<a>xy");
  ASSERT_EQ(cut.special_spans.size(), 2u);
  EXPECT_EQ(cut.special_spans[1].end, 4u);
}

std::vector<fs::path> shared_templates() {
  std::vector<fs::path> files;
  const fs::path dir = shared_path("chat-templates");
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(FinalMessagePrefillTemplates, EverySharedTemplateContinuesTheFinalMessage) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const std::vector<fs::path> files = shared_templates();
  if (files.empty()) GTEST_SKIP() << "no templates in " << shared_path("chat-templates");
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const std::vector<std::vector<ChatMessage>> shapes = {
      {{"system", "Be brief."}, {"user", "What is 6 x 7?"}, {"assistant", kPrefix}},
      {{"user", "What is 6 x 7?"}, {"assistant", kPrefix}},
  };
  int tested = 0;
  for (const fs::path& file : files) {
    ChatRenderer renderer;
    renderer.jinja_template = testing::read_file(file.string());
    renderer.bos_token = "<s>";
    renderer.eos_token = "</s>";
    renderer.compile();
    bool rendered = false;
    for (const std::vector<ChatMessage>& messages : shapes) {
      // Tool-use templates iterate their tools whether or not there are any, and Firefunction
      // prints variables of its own (functions, datetime): passed as chat_template_kwargs.
      std::vector<ToolDefinition> tools;
      nlohmann::ordered_json kwargs = nullptr;
      const auto renders = [&] {
        try {
          renderer.render(messages, tools, closed(kwargs));
          return true;
        } catch (const InputError& e) {
          std::printf("%s: %s\n", file.filename().c_str(), e.what());
          return false;
        }
      };
      if (!renders()) tools = kTools;
      if (!renders()) kwargs = {{"functions", "[]"}, {"datetime", "2024-07-01"}};
      if (!renders()) continue;
      expect_open_final_message(renderer, messages, tools, file.filename().string(), kwargs);
      // The server's path: the same text, and the continued content is the client's (outside the spans).
      const RenderedChat chat = renderer.render_for_tokenizer(messages, tools, tokenizer, continued(kwargs));
      EXPECT_EQ(chat.text, renderer.render(messages, tools, continued(kwargs))) << file.filename();
      // Where the template's output cannot be told apart from the client's (Mistral Nemo), the
      // whole text is one span, as for any conversation (chat_renderer.h); else the content is free.
      const size_t content_start = chat.text.size() - kPrefix.size();
      const bool fallback = chat.special_spans.size() == 1 && chat.special_spans[0].begin == 0 &&
                            chat.special_spans[0].end == chat.text.size();
      for (const TextSpan& span : chat.special_spans) {
        EXPECT_LE(span.end, chat.text.size()) << file.filename();
        EXPECT_TRUE(fallback || span.end <= content_start)
            << file.filename() << ": a span covers the continued content";
      }
      rendered = true;
      break;
    }
    tested += rendered ? 1 : 0;
  }
  EXPECT_EQ(tested, static_cast<int>(files.size())) << "every shared templates render a conversation ending with "
                                                       "the assistant";
}

TEST(ChatTemplateKwargs, ReachTheTemplateButNotItsOwnVariables) {
  ChatRenderer renderer;
  renderer.jinja_template =
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking is defined and not enable_thinking "
      "%}<think></think>{% endif %}";
  RenderOptions options;
  EXPECT_EQ(renderer.render({{"user", "Hi"}}, {}, options), "Hi");
  options.template_kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(renderer.render({{"user", "Hi"}}, {}, options), "Hi<think></think>");
  options.template_kwargs = {{"enable_thinking", true}};
  EXPECT_EQ(renderer.render({{"user", "Hi"}}, {}, options), "Hi");
  options.template_kwargs = {{"messages", nlohmann::ordered_json::array()}};
  EXPECT_THROW(renderer.render({{"user", "Hi"}}, {}, options), InputError);
  options.template_kwargs = nlohmann::ordered_json::array();
  EXPECT_THROW(renderer.render({{"user", "Hi"}}, {}, options), InputError);
}

}  // namespace
}  // namespace tandem::chat
