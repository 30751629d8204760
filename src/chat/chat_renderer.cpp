// The chat endpoint's renderer (see chat_renderer.h): a Jinja template given the messages
// and tools as transformers gives them, or a built-in format; and how far the client's
// strings can be told apart from the template's text.
#include "chat/chat_renderer.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "chat/final_message_prefill.h"
#include "chat/jinja/chat_template.h"
#include "chat/template_spans.h"

namespace tandem::chat {

using nlohmann::ordered_json;

struct CompiledTemplate {
  ChatTemplate parsed;
  bool object_arguments = false;  // give tool-call arguments as objects (template_messages)
};

namespace {

// Templates disagree on tool-call arguments. transformers documents them as dicts, and the
// templates that print `arguments | tojson` (Qwen2.5, Llama 3.1) turn OpenAI's string into an
// escaped JSON string, which is not what those models were trained on; others join them to
// text (DeepSeek R1, Functionary, Firefunction: a dict fails there) or take either (Hermes).
// So each template is asked once, with a small conversation: when the arguments string is
// not printed as is but an object is printed as JSON, the template gets objects.
bool wants_object_arguments(const ChatTemplate& parsed, const std::string& bos, const std::string& eos) {
  const std::string arguments = R"({"city": "Paris"})";  // as json.dumps prints the object
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type":
      "string"}}, "required": ["city"]}}}])");
  const auto render_with = [&](const ordered_json& value) -> std::optional<std::string> {
    ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "The weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": null}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "Sunny."}])");
    messages[1]["tool_calls"][0]["function"]["arguments"] = value;
    try {
      return parsed.render(messages, tools, /*add_generation_prompt=*/true, bos, eos);
    } catch (const InputError&) {
      return std::nullopt;
    }
  };
  const std::optional<std::string> as_string = render_with(arguments);
  if (as_string && as_string->find(arguments) != std::string::npos) return false;
  const std::optional<std::string> as_object = render_with(ordered_json::parse(arguments));
  return as_object && as_object->find(arguments) != std::string::npos;
}

std::shared_ptr<const CompiledTemplate> compile_template(const std::string& text, const std::string& bos,
                                                         const std::string& eos) {
  auto compiled = std::make_shared<CompiledTemplate>(CompiledTemplate{ChatTemplate(text)});
  compiled->object_arguments = wants_object_arguments(compiled->parsed, bos, eos);
  return compiled;
}

// A role is printed by the template into text where control tokens are matched (it is part
// of real markers such as "<|user|>"), so only the roles chat templates know are accepted: a
// free-form lowercase name could still spell a marker ("<|{{role}}|>" with role "endoftext").
void check_template_role(const std::string& role) {
  static constexpr std::string_view kRoles[] = {"system", "developer", "user",    "assistant",
                                                "tool",   "ipython",   "function"};
  const bool known = std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles);
  TANDEM_CHECK_INPUT(known,
                     "unknown chat role '{}' (expected system, developer, user, assistant, tool, ipython or function)",
                     role.substr(0, 64));
}

// Client strings that end up in the template's spans must not spell a control token.
void check_no_control_text(const std::vector<ClientString>& strings, const Tokenizer& tokenizer) {
  for (const ClientString& s : strings) {
    const std::string_view control = tokenizer.find_control_text(s.text);
    TANDEM_CHECK_INPUT(control.empty(),
                       "{} contains the control-token text '{}', which this chat template would not keep as plain text",
                       s.content ? "message content" : s.path, control);
  }
}

}  // namespace

void check_template_kwargs(const ordered_json& kwargs) {
  if (kwargs.is_null()) return;
  TANDEM_CHECK_INPUT(kwargs.is_object(), "chat_template_kwargs must be a JSON object, not {}",
                     kwargs.dump().substr(0, 64));
  static constexpr std::string_view kReserved[] = {"messages",  "tools",    "documents", "add_generation_prompt",
                                                   "bos_token", "eos_token"};
  for (const auto& [key, value] : kwargs.items())
    TANDEM_CHECK_INPUT(std::find(std::begin(kReserved), std::end(kReserved), key) == std::end(kReserved),
                       "chat_template_kwargs may not set '{}': the server sets it from the request", key);
}

void ChatRenderer::compile() {
  compiled = jinja_template.empty() ? nullptr : compile_template(jinja_template, bos_token, eos_token);
}

std::string ChatRenderer::render(const std::vector<ChatMessage>& messages, const std::vector<ToolDefinition>& tools,
                                 const RenderOptions& options) const {
  check_template_kwargs(options.template_kwargs);
  const bool prefill = options.continue_final_message;
  const std::vector<ChatMessage>& conversation = prefill ? mark_final_message(messages) : messages;
  const bool add_generation_prompt = options.add_generation_prompt && !prefill;
  std::string text;
  if (jinja_template.empty()) {
    text = render_builtin_chat(format, conversation, tools, add_generation_prompt).text;
  } else {
    const std::shared_ptr<const CompiledTemplate> t =
        compiled ? compiled : compile_template(jinja_template, bos_token, eos_token);
    text = t->parsed.render(template_messages(conversation, t->object_arguments), template_tools(tools),
                            add_generation_prompt, bos_token, eos_token, options.template_kwargs);
  }
  return prefill ? cut_at_final_message(text) : text;
}

RenderedChat ChatRenderer::render_for_tokenizer(const std::vector<ChatMessage>& messages,
                                                const std::vector<ToolDefinition>& tools, const Tokenizer& tokenizer,
                                                const RenderOptions& options) const {
  check_template_kwargs(options.template_kwargs);
  // Prefill: the marked conversation is rendered and located like any other (the marker is
  // part of the client's content, so never in a span), then cut before the marker.
  if (options.continue_final_message) {
    RenderOptions closed = options;
    closed.continue_final_message = false;
    closed.add_generation_prompt = false;
    return cut_at_final_message(render_for_tokenizer(mark_final_message(messages), tools, tokenizer, closed));
  }
  if (jinja_template.empty()) return render_builtin_chat(format, messages, tools, options.add_generation_prompt);
  for (const ChatMessage& message : messages) check_template_role(message.role);
  const std::shared_ptr<const CompiledTemplate> t =
      compiled ? compiled : compile_template(jinja_template, bos_token, eos_token);
  const TemplateInput input{template_messages(messages, t->object_arguments), template_tools(tools)};
  const TemplateRender render = [&](const TemplateInput& in) {
    return t->parsed.render(in.messages, in.tools, options.add_generation_prompt, bos_token, eos_token,
                            options.template_kwargs);
  };

  // The real render comes first, so its errors are the ones reported.
  const std::string text = render(input);
  if (std::optional<RenderedChat> chat = locate_client_text(render, input, text, ProbeScope::kEverything))
    return std::move(*chat);

  const std::vector<ClientString> strings = client_strings(input, ProbeScope::kEverything);
  std::vector<ClientString> others;
  std::copy_if(strings.begin(), strings.end(), std::back_inserter(others),
               [](const ClientString& s) { return !s.content; });
  // With no strings but content, the first probe already was the content-only one.
  if (!others.empty()) {
    if (std::optional<RenderedChat> chat = locate_client_text(render, input, text, ProbeScope::kContentOnly)) {
      check_no_control_text(others, tokenizer);
      return std::move(*chat);
    }
  }

  // Nothing could be told apart from the template's text: the whole text may hold control
  // tokens, which is safe only when no client string holds a control token's text.
  check_no_control_text(strings, tokenizer);
  return RenderedChat{text, {TextSpan{0, text.size()}}};
}

}  // namespace tandem::chat
