// The tool-call parser (tool_call_parser.h): one incremental state machine over a buffer of
// undecided text. Every decision is a function of the buffered text and whether the reply
// has ended, and is deferred while more text could change it, so any split of the reply
// into pieces gives the same deltas, concatenated, as the whole; parse_reply is this
// machine fed once. Reading a finished call's text is tool_call_json.cpp's.
#include "chat/tool_call_parser.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "chat/tool_call_json.h"

namespace tandem::chat {

namespace {

constexpr std::string_view kSpace = " \t\r\n";

bool is_space(char c) { return kSpace.find(c) != std::string_view::npos; }

// How a call region ends.
enum class RegionEnd {
  kClose,  // at its closing marker (or the end of the reply)
  kJson,   // where the JSON value after the opener ends
  kToEnd,  // at the end of the reply (<|python_tag|>: what follows is the call)
};

// A call region: the opening marker, how it ends, and for Command R the code fence around
// its JSON (required before it, optional after).
struct Region {
  std::string_view open;
  RegionEnd end;
  std::string_view close = {};
  std::string_view fence = {};
};

constexpr std::string_view kPythonTag = "<|python_tag|>";

std::vector<Region> regions_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return {{"<tool_call>", RegionEnd::kClose, "</tool_call>"}};
    case ToolCallFormat::kLlama3: return {{kPythonTag, RegionEnd::kToEnd}};
    case ToolCallFormat::kMistralNemo: return {{"[TOOL_CALLS]", RegionEnd::kJson}};
    case ToolCallFormat::kFunctionaryV31:
      return {{"<function=", RegionEnd::kClose, "</function>"}, {kPythonTag, RegionEnd::kToEnd}};
    case ToolCallFormat::kFirefunctionV2: return {{"functools", RegionEnd::kJson}};
    case ToolCallFormat::kCommandR: return {{"Action:", RegionEnd::kJson, "```", "```json"}};
    case ToolCallFormat::kCommandR7B: return {{"<|START_ACTION|>", RegionEnd::kClose, "<|END_ACTION|>"}};
    case ToolCallFormat::kDeepSeekR1:
      // The template always writes the outer pair; a model may leave it out for one call.
      return {{"<｜tool▁calls▁begin｜>", RegionEnd::kClose, "<｜tool▁calls▁end｜>"},
              {"<｜tool▁call▁begin｜>", RegionEnd::kClose, "<｜tool▁call▁end｜>"}};
    case ToolCallFormat::kNone:
    case ToolCallFormat::kFunctionaryV32: break;  // v3.2 is segments, not regions
  }
  return {};
}

enum class MarkerAction { kOpenRegion, kOpenReasoning, kCloseReasoning, kDrop, kRecipient };

struct Marker {
  std::string_view text;
  MarkerAction action;
  int region = 0;  // kOpenRegion
};

std::vector<Marker> content_markers(ToolCallSyntax syntax) {
  std::vector<Marker> markers;
  const std::vector<Region> regions = regions_of(syntax.format);
  for (size_t i = 0; i < regions.size(); ++i)
    markers.push_back({regions[i].open, MarkerAction::kOpenRegion, static_cast<int>(i)});
  if (syntax.reasoning != ReasoningTags::kNone) markers.push_back({"<think>", MarkerAction::kOpenReasoning});
  if (syntax.format == ToolCallFormat::kCommandR7B) {
    // The plan goes to reasoning; the response markers only frame the content.
    markers.push_back({"<|START_THINKING|>", MarkerAction::kOpenReasoning});
    markers.push_back({"<|START_RESPONSE|>", MarkerAction::kDrop});
    markers.push_back({"<|END_RESPONSE|>", MarkerAction::kDrop});
  }
  if (syntax.format == ToolCallFormat::kFunctionaryV32) markers.push_back({">>>", MarkerAction::kRecipient});
  // The closer of the outer pair when the model left out its opener.
  if (syntax.format == ToolCallFormat::kDeepSeekR1) markers.push_back({"<｜tool▁calls▁end｜>", MarkerAction::kDrop});
  return markers;
}

std::vector<Marker> reasoning_markers(ToolCallSyntax syntax) {
  std::vector<Marker> markers;
  if (syntax.reasoning != ReasoningTags::kNone) markers.push_back({"</think>", MarkerAction::kCloseReasoning});
  // A model may repeat the <think> its prompt already opened.
  if (syntax.reasoning == ReasoningTags::kOpened) markers.push_back({"<think>", MarkerAction::kDrop});
  if (syntax.format == ToolCallFormat::kCommandR7B)
    markers.push_back({"<|END_THINKING|>", MarkerAction::kCloseReasoning});
  return markers;
}

struct MarkerMatch {
  size_t pos = std::string::npos;  // where text may stop being plain: a marker or its prefix
  const Marker* marker = nullptr;  // the marker at pos; null: undecided (or none)
};

// The leftmost marker in `text`, the longest where several start at one place. A marker cut
// off by the end of the buffer stops the search there (undecided) unless the reply has
// ended; so does a shorter marker that a longer one there could still extend.
MarkerMatch find_marker(std::string_view text, const std::vector<Marker>& markers, bool at_end) {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const Marker* best = nullptr;
    bool partial = false;
    for (const Marker& marker : markers) {
      const size_t n = std::min(marker.text.size(), text.size() - pos);
      if (text.compare(pos, n, marker.text.substr(0, n)) != 0) continue;
      if (n < marker.text.size())
        partial = true;
      else if (best == nullptr || marker.text.size() > best->text.size())
        best = &marker;
    }
    if (partial && !at_end) return {pos, nullptr};
    if (best != nullptr) return {pos, best};
  }
  return {};
}

// Bytes at the end of `text` that begin a UTF-8 character not yet complete.
size_t unfinished_utf8(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// `text` is a proper prefix of `word` (more text could complete it).
bool could_become(std::string_view text, std::string_view word) {
  return text.size() < word.size() && starts_with(word, text);
}

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

std::optional<std::vector<CallParts>> read_region(ToolCallFormat format, int region, std::string_view raw,
                                                  std::string_view body, std::string* why) {
  switch (format) {
    case ToolCallFormat::kHermes: return read_hermes_body(body, why);
    case ToolCallFormat::kLlama3: return read_llama3_python_tag(body, why);
    case ToolCallFormat::kMistralNemo:
    case ToolCallFormat::kFirefunctionV2:
    case ToolCallFormat::kCommandR7B: return read_call_list(body, {}, why);
    case ToolCallFormat::kCommandR: return read_call_list(body, "directly-answer", why);
    case ToolCallFormat::kFunctionaryV31:
      return region == 0 ? read_functionary_function(body, why) : read_named_arguments("python", body, why);
    case ToolCallFormat::kDeepSeekR1: return read_deepseek_calls(raw, why);
    case ToolCallFormat::kNone:
    case ToolCallFormat::kFunctionaryV32: break;
  }
  *why = "no call regions in this format";
  return std::nullopt;
}

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistralNemo: return "mistral-nemo";
    case ToolCallFormat::kFunctionaryV31: return "functionary-v3.1";
    case ToolCallFormat::kFunctionaryV32: return "functionary-v3.2";
    case ToolCallFormat::kFirefunctionV2: return "firefunction-v2";
    case ToolCallFormat::kCommandR: return "command-r";
    case ToolCallFormat::kCommandR7B: return "command-r7b";
    case ToolCallFormat::kDeepSeekR1: return "deepseek-r1";
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  const auto has = [t](std::string_view marker) { return t.find(marker) != std::string_view::npos; };
  // Most specific first: several of these families are Llama 3 fine-tunes and print its
  // header markers too.
  if (has("<｜tool▁call▁begin｜>")) return ToolCallFormat::kDeepSeekR1;
  if (has("<|START_ACTION|>")) return ToolCallFormat::kCommandR7B;
  if (has("<|START_OF_TURN_TOKEN|>") && has("Action:")) return ToolCallFormat::kCommandR;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistralNemo;
  if (has(">>>all") || has("'>>>' + tool_call")) return ToolCallFormat::kFunctionaryV32;
  if (has("<function=")) return ToolCallFormat::kFunctionaryV31;
  if (has("functools[")) return ToolCallFormat::kFirefunctionV2;
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("<|start_header_id|>") && (has("\"parameters\"") || has(kPythonTag))) return ToolCallFormat::kLlama3;
  return ToolCallFormat::kNone;
}

ToolCallSyntax detect_tool_call_syntax(std::string_view t) {
  ToolCallSyntax syntax{detect_tool_call_format(t), ReasoningTags::kNone};
  // The generation prompt is printed last, under add_generation_prompt; a <think> there is
  // opened for the model. Elsewhere (a history that strips `</think>`), the model writes both.
  const size_t prompt = t.rfind("add_generation_prompt");
  if (prompt != std::string_view::npos && t.find("<think>", prompt) != std::string_view::npos)
    syntax.reasoning = ReasoningTags::kOpened;
  else if (t.find("</think>") != std::string_view::npos)
    syntax.reasoning = ReasoningTags::kTags;
  return syntax;
}

ToolCallSyntax default_tool_call_syntax(ToolCallFormat format) {
  return {format, format == ToolCallFormat::kDeepSeekR1 ? ReasoningTags::kOpened : ReasoningTags::kNone};
}

uint64_t random_tool_call_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

nlohmann::ordered_json tool_call_delta_json(const ToolCallStreamEvent& event) {
  return {{"index", event.index},
          {"id", event.call.id},
          {"type", "function"},
          {"function", {{"name", event.call.name}, {"arguments", event.call.arguments}}}};
}

std::string StreamingToolCallParser::TextSink::take(std::string_view text) {
  held += text;
  if (!started) {
    const size_t first = held.find_first_not_of(kSpace);
    held.erase(0, first == std::string::npos ? held.size() : first);
  }
  size_t cut = held.size() - unfinished_utf8(held);
  if (cut == held.size()) {  // trailing whitespace waits for what follows it
    while (cut > 0 && is_space(held[cut - 1])) --cut;
  }
  std::string out = held.substr(0, cut);
  held.erase(0, cut);
  if (!out.empty()) started = true;
  return out;
}

std::string StreamingToolCallParser::TextSink::finish() {
  while (!held.empty() && is_space(held.back())) held.pop_back();
  std::string out = std::move(held);
  held.clear();
  return out;
}

StreamingToolCallParser::StreamingToolCallParser(ToolCallSyntax syntax, uint64_t id_seed)
    : syntax_(syntax), rng_(id_seed), state_(State::kContent) {
  if (syntax.format == ToolCallFormat::kLlama3) state_ = State::kReplyStart;
  if (syntax.format == ToolCallFormat::kFunctionaryV32) state_ = State::kRecipient;
  if (syntax.reasoning == ReasoningTags::kOpened) state_ = State::kReasoning;
}

StreamingToolCallParser::StreamingToolCallParser(ToolCallSyntax syntax)
    : StreamingToolCallParser(syntax, random_tool_call_seed()) {}

std::vector<ToolCallStreamEvent> StreamingToolCallParser::feed(std::string_view piece) {
  buf_ += piece;
  run(false);
  return std::exchange(out_, {});
}

std::vector<ToolCallStreamEvent> StreamingToolCallParser::finish() {
  run(true);
  if (std::string text = reasoning_.finish(); !text.empty())
    out_.push_back({ToolCallStreamEvent::Kind::kReasoning, std::move(text)});
  if (std::string text = content_.finish(); !text.empty())
    out_.push_back({ToolCallStreamEvent::Kind::kContent, std::move(text)});
  return std::exchange(out_, {});
}

void StreamingToolCallParser::run(bool at_end) {
  while (step(at_end)) {
  }
}

bool StreamingToolCallParser::step(bool at_end) {
  if (buf_.empty()) return false;
  switch (state_) {
    case State::kContent: return step_text(at_end, false);
    case State::kReasoning: return step_text(at_end, true);
    case State::kReplyStart: return step_reply_start(at_end);
    case State::kRegion: return step_region(at_end);
    case State::kRecipient: return step_recipient(at_end);
    case State::kSegmentCall: return step_segment_call(at_end);
  }
  return false;
}

void StreamingToolCallParser::emit_text(std::string_view text, bool reasoning) {
  std::string delta = (reasoning ? reasoning_ : content_).take(text);
  if (delta.empty()) return;
  const auto kind = reasoning ? ToolCallStreamEvent::Kind::kReasoning : ToolCallStreamEvent::Kind::kContent;
  out_.push_back({kind, std::move(delta)});
}

std::string next_tool_call_id(ToolCallFormat format, uint64_t& rng) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bool mistral = format == ToolCallFormat::kMistralNemo;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[splitmix64(&rng) % kAlphabet.size()];
  return id;
}

std::string StreamingToolCallParser::next_id() { return next_tool_call_id(syntax_.format, rng_); }

void StreamingToolCallParser::emit_call(std::string name, std::string arguments) {
  ToolCallStreamEvent event{ToolCallStreamEvent::Kind::kToolCall};
  event.index = n_calls_++;
  event.call = ToolCall{next_id(), std::move(name), std::move(arguments)};
  out_.push_back(std::move(event));
}

void StreamingToolCallParser::fail(std::string_view raw, std::string why) {
  errors_.push_back(std::string(tool_call_format_name(syntax_.format)) + " tool call kept as text: " + why);
  emit_text(raw, false);
}

bool StreamingToolCallParser::step_text(bool at_end, bool reasoning) {
  // Built per step: a few entries, and the parser stays a plain value.
  const std::vector<Marker> markers = reasoning ? reasoning_markers(syntax_) : content_markers(syntax_);
  const MarkerMatch match = find_marker(buf_, markers, at_end);
  const size_t plain = std::min(match.pos, buf_.size());
  emit_text(std::string_view(buf_).substr(0, plain), reasoning);
  if (match.marker == nullptr) {
    buf_.erase(0, plain);
    return false;
  }
  const Marker& marker = *match.marker;
  buf_.erase(0, marker.action == MarkerAction::kOpenRegion ? plain : plain + marker.text.size());
  switch (marker.action) {
    case MarkerAction::kOpenRegion:
      state_ = State::kRegion;
      region_ = marker.region;
      searched_ = 0;
      break;
    case MarkerAction::kOpenReasoning: state_ = State::kReasoning; break;
    case MarkerAction::kCloseReasoning: state_ = State::kContent; break;
    case MarkerAction::kDrop: break;
    case MarkerAction::kRecipient: state_ = State::kRecipient; break;
  }
  return true;
}

bool StreamingToolCallParser::step_reply_start(bool at_end) {
  // Separators between Llama 3 calls (";" or lines) are not content.
  const size_t pos = reply_started_ ? buf_.find_first_not_of(" \t\r\n;") : buf_.find_first_not_of(kSpace);
  if (pos == std::string::npos && !at_end) return false;
  if (pos == std::string::npos || buf_[pos] != '{') {
    if (reply_started_) buf_.erase(0, pos == std::string::npos ? buf_.size() : pos);
    state_ = State::kContent;
    return true;
  }
  size_t length = 0;
  const JsonScan scan = scan_json_value(std::string_view(buf_).substr(pos), &length);
  if (scan == JsonScan::kIncomplete && !at_end) return false;
  std::optional<CallParts> call;
  if (scan == JsonScan::kComplete) call = read_llama3_object(std::string_view(buf_).substr(pos, length));
  if (!call) {
    // Other JSON is the reply's content; one that began as a call did not parse.
    const size_t key = skip_space(buf_, pos + 1);
    if (starts_with(std::string_view(buf_).substr(key), "\"name\"") ||
        starts_with(std::string_view(buf_).substr(key), "\"type\""))
      errors_.push_back("llama3 tool call kept as text: not a {\"name\", \"parameters\"} object");
    state_ = State::kContent;
    return true;
  }
  if (!reply_started_) emit_text(std::string_view(buf_).substr(0, pos), false);
  emit_call(std::move(call->name), std::move(call->arguments));
  buf_.erase(0, pos + length);
  reply_started_ = true;
  return true;
}

bool StreamingToolCallParser::step_region(bool at_end) {
  const Region region = regions_of(syntax_.format)[region_];
  const std::string_view text = buf_;
  std::string_view body;
  size_t raw_length = 0;  // the region's text, opener to closer
  if (region.end != RegionEnd::kJson) {
    // Resumed where the last feed's search stopped: a long call is not rescanned per token.
    const size_t from = std::max(region.open.size(), searched_);
    const size_t close = region.end == RegionEnd::kClose ? text.find(region.close, from) : text.npos;
    if (close == text.npos && !at_end) {
      if (region.end == RegionEnd::kClose && text.size() >= region.close.size())
        searched_ = std::max(from, text.size() - region.close.size() + 1);
      return false;
    }
    body = text.substr(region.open.size(), close == text.npos ? text.npos : close - region.open.size());
    raw_length = close == text.npos ? text.size() : close + region.close.size();
  } else {
    // The opener is only a call when JSON follows it (after Command R's fence): otherwise
    // it was a word of the text ("functools", "Action:").
    const auto not_a_call = [&](bool attempted) {
      if (attempted)
        errors_.push_back(std::string(tool_call_format_name(syntax_.format)) +
                          " tool call kept as text: no JSON list after " + std::string(region.open));
      emit_text(region.open, false);
      buf_.erase(0, region.open.size());
      state_ = State::kContent;
      return true;
    };
    size_t pos = skip_space(text, region.open.size());
    if (!region.fence.empty()) {
      if (could_become(text.substr(pos), region.fence) && !at_end) return false;
      if (!starts_with(text.substr(pos), region.fence)) return not_a_call(false);
      pos = skip_space(text, pos + region.fence.size());
    }
    if (pos == text.size() && !at_end) return false;
    const bool special = syntax_.format == ToolCallFormat::kMistralNemo;  // [TOOL_CALLS] is a control token
    if (pos == text.size() || (text[pos] != '[' && (text[pos] != '{' || !special))) return not_a_call(special);
    size_t length = 0;
    const JsonScan scan = scan_json_value(text.substr(pos), &length);
    if (scan == JsonScan::kIncomplete && !at_end) return false;
    if (scan != JsonScan::kComplete) return not_a_call(true);
    body = text.substr(pos, length);
    raw_length = pos + length;
    if (!region.close.empty()) {
      const size_t after = skip_space(text, raw_length);
      if (!at_end && (after == text.size() || could_become(text.substr(after), region.close))) return false;
      if (starts_with(text.substr(after), region.close)) raw_length = after + region.close.size();
    }
  }
  std::string why;
  const std::string_view raw = text.substr(0, raw_length);
  if (std::optional<std::vector<CallParts>> calls = read_region(syntax_.format, region_, raw, body, &why)) {
    for (CallParts& call : *calls) emit_call(std::move(call.name), std::move(call.arguments));
  } else {
    fail(raw, why);
  }
  buf_.erase(0, raw_length);
  state_ = State::kContent;
  return true;
}

bool StreamingToolCallParser::step_recipient(bool at_end) {
  // The prompt ends with the first ">>>"; a model repeating it is forgiven (once: later
  // segments' ">>>" was the marker that led here).
  if (!reply_started_) {
    if (could_become(buf_, ">>>") && !at_end) return false;
    if (starts_with(buf_, ">>>")) buf_.erase(0, 3);
    reply_started_ = true;
    return true;
  }
  const size_t newline = buf_.find('\n');
  if (newline == std::string::npos && !at_end) return false;
  if (newline == std::string::npos) {  // a reply cut short in its recipient line
    emit_text(buf_ == "all" ? std::string_view() : std::string_view(buf_), false);
    buf_.clear();
    state_ = State::kContent;
    return false;
  }
  const std::string name(std::string_view(buf_).substr(0, newline));
  buf_.erase(0, newline + 1);
  const size_t first = name.find_first_not_of(kSpace), last = name.find_last_not_of(kSpace);
  segment_name_ = first == std::string::npos ? "" : name.substr(first, last - first + 1);
  state_ = segment_name_.empty() || segment_name_ == "all" ? State::kContent : State::kSegmentCall;
  return true;
}

bool StreamingToolCallParser::step_segment_call(bool at_end) {
  const std::string_view text = buf_;
  const size_t pos = skip_space(text, 0);
  size_t length = 0;
  bool json = false;
  if (pos < text.size() && text[pos] == '{') {
    const JsonScan scan = scan_json_value(text.substr(pos), &length);
    if (scan == JsonScan::kIncomplete && !at_end) return false;
    json = scan == JsonScan::kComplete;
    length += pos;
  } else if (pos == text.size() && !at_end) {
    return false;
  }
  if (!json) {
    // Code for `python`, or arguments that are not JSON: the segment runs to the next ">>>".
    const std::vector<Marker> next = {{">>>", MarkerAction::kRecipient}};
    const MarkerMatch match = find_marker(text, next, at_end);
    if (match.marker == nullptr && !at_end) return false;
    length = std::min(match.pos, text.size());
  }
  std::string why;
  const std::string_view arguments = text.substr(0, length);
  if (std::optional<std::vector<CallParts>> calls = read_named_arguments(segment_name_, arguments, &why)) {
    for (CallParts& call : *calls) emit_call(std::move(call.name), std::move(call.arguments));
  } else {
    fail(segment_name_ + "\n" + std::string(arguments), why);
  }
  buf_.erase(0, length);
  // What follows a call's JSON is text until the next ">>>" (normally nothing).
  state_ = State::kContent;
  return true;
}

ParsedReply parse_reply(ToolCallSyntax syntax, std::string_view text, uint64_t id_seed) {
  StreamingToolCallParser parser(syntax, id_seed);
  std::vector<ToolCallStreamEvent> events = parser.feed(text);
  std::vector<ToolCallStreamEvent> last = parser.finish();
  events.insert(events.end(), std::make_move_iterator(last.begin()), std::make_move_iterator(last.end()));
  ParsedReply reply;
  for (ToolCallStreamEvent& event : events) {
    switch (event.kind) {
      case ToolCallStreamEvent::Kind::kContent: reply.content += event.text; break;
      case ToolCallStreamEvent::Kind::kReasoning: reply.reasoning_content += event.text; break;
      case ToolCallStreamEvent::Kind::kToolCall: reply.tool_calls.push_back(std::move(event.call)); break;
    }
  }
  reply.errors = parser.errors();
  return reply;
}

ParsedReply parse_reply(ToolCallSyntax syntax, std::string_view text) {
  return parse_reply(syntax, text, random_tool_call_seed());
}

ParsedReply parse_reply(ToolCallFormat format, std::string_view text) {
  return parse_reply(default_tool_call_syntax(format), text);
}

}  // namespace tandem::chat
