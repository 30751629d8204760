// Locating client strings in a template's output by sentinels (see template_spans.h).
#include "chat/template_spans.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "chat/jinja/py_string.h"

namespace tandem::chat {
namespace {

using nlohmann::ordered_json;

// Field names templates look up and values they compare with (tool.type == "function",
// param.type == "string", `name in required` needs the same stand-in on both sides, which
// it gets). Replacing these would change what the template does, not show where it prints;
// they are plain words, so they stay in the template's text without risk.
constexpr std::string_view kTemplateVocabulary[] = {
    // OpenAI message, tool call and tool fields
    "role", "content", "name", "tool_calls", "tool_call_id", "id", "type", "function", "arguments", "description",
    "parameters", "strict",
    // JSON Schema keywords
    "properties", "required", "items", "prefixItems", "enum", "const", "default", "title", "format", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems",
    "maxItems", "uniqueItems", "minProperties", "maxProperties", "additionalProperties", "patternProperties", "anyOf",
    "oneOf", "allOf", "not", "$ref", "$defs", "definitions", "nullable", "examples",
    // JSON Schema type names
    "string", "number", "integer", "boolean", "object", "array", "null"};

bool is_vocabulary(const std::string& s) {
  return std::find(std::begin(kTemplateVocabulary), std::end(kTemplateVocabulary), s) != std::end(kTemplateVocabulary);
}

// A key as a path component: itself when it is a plain name, else a placeholder (a key
// can hold anything, newlines included, and paths go into one-line error messages).
std::string key_label(const std::string& key) {
  const bool plain = !key.empty() && key.size() <= 40 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '$';
  });
  return plain ? key : "{key}";
}

// Called for each client string with its path, its text and whether it is a message's
// content; returns what the string becomes in the copy.
using Visit = std::function<std::string(const std::string& path, const std::string& text, bool content)>;

class Walker {
 public:
  Walker(ProbeScope scope, const Visit& visit) : scope_(scope), visit_(visit) {}

  TemplateInput input(const TemplateInput& in) {
    TemplateInput out{ordered_json::array(), value(in.tools, "tools")};
    if (!in.messages.is_array()) return {value(in.messages, "messages"), out.tools};
    for (size_t k = 0; k < in.messages.size(); ++k) {
      const ordered_json& message = in.messages[k];
      const std::string path = "messages[" + std::to_string(k) + "]";
      if (!message.is_object()) {
        out.messages.push_back(value(message, path));
        continue;
      }
      ordered_json copy = ordered_json::object();
      for (auto it = message.begin(); it != message.end(); ++it) {
        const std::string& key = it.key();
        if (key == "role") {
          copy[key] = it.value();  // roles are checked against a fixed list instead
        } else if (key == "content" && it.value().is_string()) {
          const std::string& text = it.value().get_ref<const std::string&>();
          copy[key] = text.empty() ? text : visit_(path + ".content", text, true);
        } else {
          copy[leaf(key, "a key of " + path)] = value(it.value(), path + "." + key_label(key));
        }
      }
      out.messages.push_back(std::move(copy));
    }
    return out;
  }

 private:
  ordered_json value(const ordered_json& v, const std::string& path) {
    if (v.is_string()) return leaf(v.get_ref<const std::string&>(), path);
    if (v.is_array()) {
      ordered_json out = ordered_json::array();
      for (size_t i = 0; i < v.size(); ++i) out.push_back(value(v[i], path + "[" + std::to_string(i) + "]"));
      return out;
    }
    if (v.is_object()) {
      ordered_json out = ordered_json::object();
      for (auto it = v.begin(); it != v.end(); ++it)
        out[leaf(it.key(), "a key of " + path)] = value(it.value(), path + "." + key_label(it.key()));
      return out;
    }
    return v;
  }

  // A string (value or key) as the copy holds it.
  std::string leaf(const std::string& s, const std::string& path) {
    if (scope_ == ProbeScope::kContentOnly || s.empty() || is_vocabulary(s)) return s;
    return visit_(path, s, false);
  }

  ProbeScope scope_;
  const Visit& visit_;
};

// A stand-in is private-use U+E000 around a tag: no template text contains it, and neither
// Python's nor our strip() removes it (both count \x1c-\x1f as whitespace).
constexpr std::string_view kMark = "\xEE\x80\x80";
constexpr std::string_view kOpen = "\xEE\x80\x80"
                                   "tandem:";

// Whitespace on both sides of the stand-in: it survives where the string is printed as is,
// disappears where the template strips it, and is escaped where it goes through tojson.
// Unusual on purpose, so that a template printing its own whitespace before stripped
// content (Llama 3's "\n\n" + content|trim) is not mistaken for raw insertion.
constexpr std::string_view kProbeSpace = " \t\n\t ";
constexpr std::string_view kJsonProbeSpace = " \\t\\n\\t ";  // kProbeSpace inside a JSON string

std::string stand_in(size_t id) {
  return std::string(kProbeSpace) + std::string(kOpen) + std::to_string(id) + std::string(kMark) +
         std::string(kProbeSpace);
}

struct Stand {
  std::string text;      // the real string
  bool content = false;  // a message's content: must be printed exactly once
};

// How one side of a stand-in came out.
enum class Side { kRaw, kJson, kStripped };

Side side_before(std::string_view text, size_t at) {
  const auto ends_with = [&](std::string_view s) {
    return at >= s.size() && text.substr(at - s.size(), s.size()) == s;
  };
  if (ends_with(kProbeSpace)) return Side::kRaw;
  if (ends_with(kJsonProbeSpace)) return Side::kJson;
  return Side::kStripped;
}

Side side_after(std::string_view text, size_t at) {
  if (text.substr(at, kProbeSpace.size()) == kProbeSpace) return Side::kRaw;
  if (text.substr(at, kJsonProbeSpace.size()) == kJsonProbeSpace) return Side::kJson;
  return Side::kStripped;
}

size_t side_size(Side side) {
  return side == Side::kRaw ? kProbeSpace.size() : side == Side::kJson ? kJsonProbeSpace.size() : 0;
}

// The probe text with each stand-in (and its surviving probe whitespace) replaced by its
// real string, printed as the stand-in was; nullopt when that is not one of the known ways
// or a content was not printed exactly once. The caller compares it with the real render.
std::optional<RenderedChat> splice(const std::string& probe_text, const std::vector<Stand>& stands) {
  RenderedChat chat;
  // Template text joins the previous span when no client text came between (empty content).
  auto add_template_text = [&chat](std::string_view text) {
    if (text.empty()) return;
    const size_t at = chat.text.size();
    if (!chat.special_spans.empty() && chat.special_spans.back().end == at) {
      chat.special_spans.back().end += text.size();
    } else {
      chat.special_spans.push_back({at, at + text.size()});
    }
    chat.text += text;
  };
  std::vector<int> printed(stands.size(), 0);
  size_t pos = 0;  // probe_text before pos is in chat.text
  for (size_t at = probe_text.find(kOpen); at != std::string::npos; at = probe_text.find(kOpen, pos)) {
    size_t digits_end = at + kOpen.size();
    size_t id = 0;
    while (digits_end < probe_text.size() && probe_text[digits_end] >= '0' && probe_text[digits_end] <= '9' &&
           digits_end - at - kOpen.size() < 9) {
      id = id * 10 + static_cast<size_t>(probe_text[digits_end] - '0');
      ++digits_end;
    }
    if (digits_end == at + kOpen.size() || id >= stands.size()) return std::nullopt;
    if (probe_text.compare(digits_end, kMark.size(), kMark) != 0) return std::nullopt;  // cut or rewritten
    const size_t mark_end = digits_end + kMark.size();
    const Side left = side_before(probe_text, at), right = side_after(probe_text, mark_end);
    if ((left == Side::kJson) != (right == Side::kJson)) return std::nullopt;
    const std::string& real = stands[id].text;
    std::string printed_text;
    if (left == Side::kJson) {
      const std::string quoted = jinja::json_string(real);
      printed_text = quoted.substr(1, quoted.size() - 2);
    } else if (left == Side::kRaw && right == Side::kRaw) {
      printed_text = real;
    } else {
      printed_text = jinja::py_strip(real, std::nullopt, left == Side::kStripped, right == Side::kStripped);
    }
    const size_t begin = at - side_size(left), end = mark_end + side_size(right);
    if (begin < pos) return std::nullopt;  // overlapping: not a plain insertion
    add_template_text(std::string_view(probe_text).substr(pos, begin - pos));
    chat.text += printed_text;
    pos = end;
    ++printed[id];
  }
  add_template_text(std::string_view(probe_text).substr(pos));
  for (size_t id = 0; id < stands.size(); ++id)
    if (stands[id].content && printed[id] != 1) return std::nullopt;
  return chat;
}

}  // namespace

std::vector<ClientString> client_strings(const TemplateInput& input, ProbeScope scope) {
  std::vector<ClientString> strings;
  const Visit collect = [&strings](const std::string& path, const std::string& text, bool content) {
    strings.push_back({path, text, content});
    return text;
  };
  Walker(scope, collect).input(input);
  return strings;
}

std::optional<RenderedChat> locate_client_text(const TemplateRender& render, const TemplateInput& input,
                                               const std::string& text, ProbeScope scope) {
  // Each content gets its own stand-in; other strings one per distinct text, so that
  // comparisons between them (a property name `in required`) come out as with the real ones.
  std::vector<Stand> stands;
  std::map<std::string, size_t> by_text;
  const Visit replace = [&](const std::string&, const std::string& real, bool content) {
    if (content) {
      stands.push_back({real, true});
      return stand_in(stands.size() - 1);
    }
    const auto [it, fresh] = by_text.emplace(real, stands.size());
    if (fresh) stands.push_back({real, false});
    return stand_in(it->second);
  };
  const TemplateInput probe = Walker(scope, replace).input(input);
  std::optional<RenderedChat> chat;
  try {
    chat = splice(render(probe), stands);
  } catch (const InputError&) {
    return std::nullopt;  // the template refused the stand-ins
  }
  if (!chat || chat->text != text) return std::nullopt;
  return chat;
}

}  // namespace tandem::chat
