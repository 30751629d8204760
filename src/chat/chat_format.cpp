// Built-in chat renderers (see chat_format.h). Each writes the family's published turn
// markers; special-token text such as "</s>" is emitted verbatim, as the templates do. The
// writer knows which text is its own markup and which came from the client, so the spans
// are exact: no probing as for Jinja templates (template_spans.h).
//
// Tools. Of these families only Llama 3.1 has a tool convention of its own, and a Llama 3.1
// GGUF brings its template, which is used instead. So all four use the Hermes convention
// (Hermes 2 Pro and Qwen2.5 were trained on it; the tool-call parser will read it back):
//  - tool definitions are described at the end of the system prompt (a system turn is added
//    first when there is none): each tool's JSON on its own line inside <tools></tools>,
//    then the shape of a call. Described rather than refused: agents send their tool list
//    with every request, also to models that answer in plain text, and a 400 would lock
//    those clients out; a model that never learned the convention may ignore it, as it may
//    any instruction.
//  - an assistant's calls follow its text: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
//    each, the arguments as sent (inline when they are JSON, as a JSON string otherwise).
//  - tool results, each in <tool_response>\n...\n</tool_response>, consecutive ones in one
//    turn: role "tool" in ChatML (Hermes 2 Pro), "ipython" in Llama 3 (the role Llama 3.1
//    gives tool output), and a user turn in Llama 2 and Zephyr, which have no tool role.
// Developer messages are system messages. A message's name and a result's tool_call_id are
// not rendered: none of these formats has a place for them (results follow call order).
#include "chat/chat_format.h"

#include <algorithm>

#include "base/error.h"
#include "chat/jinja/json_value.h"
#include "chat/jinja/py_string.h"

namespace tandem::chat {

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  if (name == "chatml") return ChatFormat::ChatML;
  if (name == "llama2") return ChatFormat::Llama2;
  if (name == "llama3") return ChatFormat::Llama3;
  if (name == "zephyr") return ChatFormat::Zephyr;
  return std::nullopt;
}

std::string_view chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Zephyr: return "zephyr";
  }
  return "chatml";
}

ChatFormat detect_chat_format(std::string_view t) {
  // Most specific markers first: a Llama 3 template never mentions [INST], but some
  // ChatML-derived templates mention other families in comments, so order matters.
  if (t.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
  if (t.find("<|im_start|>") != std::string_view::npos) return ChatFormat::ChatML;
  if (t.find("<|user|>") != std::string_view::npos) return ChatFormat::Zephyr;
  if (t.find("[INST]") != std::string_view::npos) return ChatFormat::Llama2;
  return ChatFormat::ChatML;
}

namespace {

// Text of a turn: the format's markup, or the client's bytes.
struct Piece {
  std::string text;
  bool client = false;
};
using Body = std::vector<Piece>;

// A turn as the formats print it: role "system", "user", "assistant" or the format's role
// for tool results.
struct Turn {
  std::string role;
  Body body;
  bool tool_results = false;  // consecutive tool messages join this turn
};

bool body_empty(const Body& body) {
  for (const Piece& piece : body)
    if (!piece.text.empty()) return false;
  return true;
}

// Appends markup (joined into the previous span when adjacent) or client text (no span).
class Writer {
 public:
  void markup(std::string_view text) {
    if (text.empty()) return;
    const size_t at = chat_.text.size();
    if (!chat_.special_spans.empty() && chat_.special_spans.back().end == at) {
      chat_.special_spans.back().end += text.size();
    } else {
      chat_.special_spans.push_back({at, at + text.size()});
    }
    chat_.text += text;
  }
  void client(std::string_view text) { chat_.text += text; }
  void body(const Body& body) {
    for (const Piece& piece : body) piece.client ? client(piece.text) : markup(piece.text);
  }
  RenderedChat take() { return std::move(chat_); }

 private:
  RenderedChat chat_;
};

constexpr std::string_view kToolsIntro =
    "# Tools\n\nYou can call the functions below. Each line between <tools></tools> is one function's "
    "definition as JSON:\n<tools>\n";
constexpr std::string_view kToolsOutro =
    "\n</tools>\n\nTo call a function, answer with a JSON object holding its name and arguments between "
    "<tool_call></tool_call> tags, one tag per call:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
    "<arguments as a JSON object>}\n</tool_call>";

// The tool block for the system prompt: our instructions around the client's definitions.
Body tools_block(const std::vector<ToolDefinition>& tools) {
  Body body{{std::string(kToolsIntro), false}};
  const nlohmann::ordered_json list = template_tools(tools);
  for (size_t k = 0; k < list.size(); ++k) {
    if (k > 0) body.push_back({"\n", false});
    // json.dumps' layout, as Hermes-convention templates print a tool (`tool | tojson`).
    body.push_back({jinja::to_json(jinja::value_from_json(list[k]), jinja::JsonFormat{}), true});
  }
  body.push_back({std::string(kToolsOutro), false});
  return body;
}

std::string call_json(const ToolCall& call) {
  // Arguments that are JSON go in as they were sent, so the model sees its own call again.
  const bool is_json = nlohmann::ordered_json::accept(call.arguments);
  const std::string name = jinja::json_string(call.name);
  return "{\"name\": " + name + ", \"arguments\": " + (is_json ? call.arguments : jinja::json_string(call.arguments)) +
         "}";
}

void check_role(const ChatMessage& m) {
  TANDEM_CHECK_INPUT(
      m.role == "system" || m.role == "developer" || m.role == "user" || m.role == "assistant" || m.role == "tool",
      "unknown chat role '{}' (expected system, developer, user, assistant or tool)", m.role.substr(0, 64));
}

std::vector<Turn> turns_of(const std::vector<ChatMessage>& messages, const std::vector<ToolDefinition>& tools,
                           const std::string& tool_role) {
  std::vector<Turn> turns;
  for (const ChatMessage& m : messages) {
    check_role(m);
    if (m.role == "tool") {
      Body response{{"<tool_response>\n", false}, {m.content, true}, {"\n</tool_response>", false}};
      if (!turns.empty() && turns.back().tool_results) {
        turns.back().body.push_back({"\n", false});
      } else {
        turns.push_back({tool_role, {}, true});
      }
      Body& body = turns.back().body;
      body.insert(body.end(), response.begin(), response.end());
      continue;
    }
    Turn turn{m.role == "developer" ? "system" : m.role, {{m.content, true}}};
    for (const ToolCall& call : m.tool_calls) {
      turn.body.push_back({body_empty(turn.body) ? "<tool_call>\n" : "\n<tool_call>\n", false});
      turn.body.push_back({call_json(call), true});
      turn.body.push_back({"\n</tool_call>", false});
    }
    turns.push_back(std::move(turn));
  }
  if (!tools.empty()) {
    Body block = tools_block(tools);
    auto system = std::find_if(turns.begin(), turns.end(), [](const Turn& t) { return t.role == "system"; });
    if (system == turns.end()) {
      turns.insert(turns.begin(), Turn{"system", std::move(block)});
    } else {
      if (!body_empty(system->body)) system->body.push_back({"\n\n", false});
      system->body.insert(system->body.end(), block.begin(), block.end());
    }
  }
  return turns;
}

// [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
void write_llama2(const std::vector<Turn>& turns, Writer& out) {
  Body system;
  bool first_user = true;
  for (const Turn& turn : turns) {
    if (turn.role == "system") {
      system = turn.body;
    } else if (turn.role == "user") {
      if (!first_user) out.markup("<s>");
      out.markup("[INST] ");
      if (!body_empty(system)) {
        out.markup("<<SYS>>\n");
        out.body(system);
        out.markup("\n<</SYS>>\n\n");
        system.clear();
      }
      out.body(turn.body);
      out.markup(" [/INST]");
      first_user = false;
    } else {
      out.markup(" ");
      out.body(turn.body);
      out.markup(" </s>");
    }
  }
}

}  // namespace

RenderedChat render_builtin_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                 const std::vector<ToolDefinition>& tools, bool add_generation_prompt) {
  const std::string tool_role = format == ChatFormat::ChatML   ? "tool"
                                : format == ChatFormat::Llama3 ? "ipython"
                                                               : "user";
  const std::vector<Turn> turns = turns_of(messages, tools, tool_role);
  Writer out;
  switch (format) {
    case ChatFormat::ChatML:
      for (const Turn& t : turns) {
        out.markup("<|im_start|>" + t.role + "\n");
        out.body(t.body);
        out.markup("<|im_end|>\n");
      }
      if (add_generation_prompt) out.markup("<|im_start|>assistant\n");
      break;
    case ChatFormat::Llama2: write_llama2(turns, out); break;
    case ChatFormat::Llama3:
      for (const Turn& t : turns) {
        out.markup("<|start_header_id|>" + t.role + "<|end_header_id|>\n\n");
        out.body(t.body);
        out.markup("<|eot_id|>");
      }
      if (add_generation_prompt) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatFormat::Zephyr:
      for (const Turn& t : turns) {
        out.markup("<|" + t.role + "|>\n");
        out.body(t.body);
        out.markup("</s>\n");
      }
      if (add_generation_prompt) out.markup("<|assistant|>\n");
      break;
  }
  return out.take();
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        const std::vector<ToolDefinition>& tools) {
  return render_builtin_chat(format, messages, tools).text;
}

}  // namespace tandem::chat
