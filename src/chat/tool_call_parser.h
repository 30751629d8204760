// A model's generated text -> OpenAI tool calls, content and reasoning, for each tool-call
// format the chat templates in ../shared/chat-templates teach their models (the format text a
// template shows the model is the spec), whole (parse_reply) or as pieces arrive
// (StreamingToolCallParser). It never throws at the client: a call that does not parse stays
// in the content and is reported in `errors`. It does not render, sample or talk HTTP.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"

namespace tandem::chat {

// How a model writes its calls (what follows each name is what the parser reads back).
enum class ToolCallFormat {
  kNone,            // plain text; no calls
  kHermes,          // Hermes 2 Pro / 3, Qwen2.5: <tool_call>{"name", "arguments"}</tool_call>, several
  kLlama3,          // Llama 3.1 / 3.2: a reply that is {"name", "parameters"} JSON, or <|python_tag|>...
  kMistralNemo,     // [TOOL_CALLS][{"name", "arguments", "id"?}, ...]
  kFunctionaryV31,  // <function=NAME>{json}</function>, <|python_tag|>code
  kFunctionaryV32,  // >>>NAME\n{json} segments; `all` is text (the prompt ends with the first >>>)
  kFirefunctionV2,  // text, then functools[{"name", "arguments"}, ...]
  kCommandR,        // Action: ```json [{"tool_name", "parameters"}] ```
  kCommandR7B,      // <|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[...]<|END_ACTION|>, <|START_RESPONSE|>
  kDeepSeekR1,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{}\n```<｜tool▁call▁end｜>...
};

// Where <think>...</think> reasoning is (the text between goes to reasoning_content).
enum class ReasoningTags {
  kNone,    // no reasoning split
  kTags,    // the model writes <think>...</think> itself
  kOpened,  // the generation prompt ends inside <think>: the reply is reasoning up to </think>
};

struct ToolCallSyntax {
  ToolCallFormat format = ToolCallFormat::kNone;
  ReasoningTags reasoning = ReasoningTags::kNone;
};

// "none", "hermes", "llama3", ... (for logs).
std::string_view tool_call_format_name(ToolCallFormat format);

// What a Jinja chat template's model writes, recognised by the markers the template prints
// (its format text and the way it renders an assistant's calls); kNone when none is known.
ToolCallFormat detect_tool_call_format(std::string_view jinja_template);
// The format and, from where the template puts <think> (in the generation prompt: kOpened;
// elsewhere: kTags), the reasoning split.
ToolCallSyntax detect_tool_call_syntax(std::string_view jinja_template);
// The syntax the templates of `format` imply (DeepSeek-R1's open <think> in the prompt).
ToolCallSyntax default_tool_call_syntax(ToolCallFormat format);

// A whole reply, parsed.
struct ParsedReply {
  std::string content;            // text outside calls and reasoning, trimmed; empty -> JSON null
  std::string reasoning_content;  // trimmed; empty when none
  // Ids: "call_" + 24 alphanumerics (Mistral Nemo: 9 alphanumerics, which its template
  // requires of the ids it is sent back), drawn from a generator seeded per parser, so the
  // same seed gives the same ids (tests); the server seeds randomly per request so that ids
  // stay unique across a conversation's turns. Ids the model wrote are not reused: they are
  // per-conversation counters ("0", "1") for Command R7B.
  std::vector<ToolCall> tool_calls;  // arguments: compact JSON text of an object
  // One line per call that did not parse (its text is in content), for the server's log.
  std::vector<std::string> errors;
  bool has_tool_calls() const { return !tool_calls.empty(); }
};

// A new random seed for call ids (std::random_device).
uint64_t random_tool_call_seed();
// The next call id from the generator state `rng` (seeded with such a seed): "call_" + 24
// alphanumerics, or 9 alphanumerics for Mistral Nemo (see ParsedReply::tool_calls).
std::string next_tool_call_id(ToolCallFormat format, uint64_t& rng);

ParsedReply parse_reply(ToolCallSyntax syntax, std::string_view text, uint64_t id_seed);
ParsedReply parse_reply(ToolCallSyntax syntax, std::string_view text);  // random ids
ParsedReply parse_reply(ToolCallFormat format, std::string_view text);  // default_tool_call_syntax

// One streamed piece of the reply. Tool calls are emitted whole, when each call's text has
// ended: one delta with index, id, name and the complete arguments (OpenAI allows the
// arguments in any number of fragments; one is the degenerate case).
struct ToolCallStreamEvent {
  enum class Kind { kContent, kReasoning, kToolCall };
  Kind kind = Kind::kContent;
  std::string text{};  // kContent, kReasoning: the delta (whole UTF-8 characters)
  int index = 0;       // kToolCall: position among this reply's calls
  ToolCall call{};     // kToolCall
};

// OpenAI's delta.tool_calls[] item: {"index", "id", "type": "function", "function": {"name", "arguments"}}.
nlohmann::ordered_json tool_call_delta_json(const ToolCallStreamEvent& event);

// Fed the generated text as it arrives, in pieces split anywhere (inside markers and UTF-8
// characters); emits content deltas, holding back only what may begin a marker (or is
// trailing whitespace, or an unfinished UTF-8 character), reasoning deltas, and calls. For
// any split, the concatenated deltas and the calls equal parse_reply of the whole text (with
// the same seed): parse_reply is this parser fed once. Llama 3 replies that open with '{'
// are held until that object closes: the whole reply may be a call.
class StreamingToolCallParser {
 public:
  StreamingToolCallParser(ToolCallSyntax syntax, uint64_t id_seed);
  explicit StreamingToolCallParser(ToolCallSyntax syntax);  // random ids

  std::vector<ToolCallStreamEvent> feed(std::string_view piece);
  // The end of the reply: what was held back, and a call left open (parsed if it can be).
  std::vector<ToolCallStreamEvent> finish();

  bool has_tool_calls() const { return n_calls_ > 0; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  // Text for content or reasoning, trimmed at both ends of the whole stream: leading
  // whitespace is dropped, trailing whitespace and an unfinished UTF-8 character are held
  // until more text shows they are not the end.
  struct TextSink {
    bool started = false;
    std::string held;
    std::string take(std::string_view text);
    std::string finish();
  };
  enum class State {
    kContent,      // text (Functionary v3.2: an `all` segment); markers open calls or reasoning
    kReasoning,    // until </think> (or <|END_THINKING|>)
    kReplyStart,   // Llama 3: a bare JSON call may begin the reply (or follow a call)
    kRegion,       // a call's text, from its opening marker (buf_ begins with it)
    kRecipient,    // Functionary v3.2: the line naming a segment's recipient
    kSegmentCall,  // Functionary v3.2: a call segment's arguments
  };

  bool step(bool at_end);  // one decision on buf_; false: needs more text (or, at the end, done)
  bool step_text(bool at_end, bool reasoning);
  bool step_reply_start(bool at_end);
  bool step_region(bool at_end);
  bool step_recipient(bool at_end);
  bool step_segment_call(bool at_end);
  void run(bool at_end);
  void emit_text(std::string_view text, bool reasoning);
  void emit_call(std::string name, std::string arguments);
  void fail(std::string_view raw, std::string why);  // a call that does not parse: raw text -> content
  std::string next_id();

  ToolCallSyntax syntax_;
  uint64_t rng_;
  State state_;
  std::string buf_;             // text not yet decided on
  int region_ = 0;              // kRegion: which marker opened it (index into the format's markers)
  size_t searched_ = 0;         // kRegion: the closer does not start before this offset
  std::string segment_name_;    // kSegmentCall: the recipient
  bool reply_started_ = false;  // Llama 3: a call was read; Functionary v3.2: a repeated ">>>" was looked for
  int n_calls_ = 0;
  TextSink content_, reasoning_;
  std::vector<std::string> errors_;
  std::vector<ToolCallStreamEvent> out_;
};

}  // namespace tandem::chat
