// tokenizer.json reading (see hf_tokenizer_json.h). Every field is type-checked before use:
// nlohmann-json's own exceptions would escape as something other than InputError.
#include "tokenizer/hf_tokenizer_json.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/pre_tokenizer.h"

namespace tandem {
namespace {

using nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space
// Generous, but stops a hostile id from sizing a multi-gigabyte table.
constexpr int64_t kMaxVocab = int64_t{1} << 24;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_INPUT(in.good(), "{}: cannot open", path);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  TANDEM_CHECK_INPUT(!in.bad(), "{}: cannot read", path);
  return text;
}

json parse_json(std::string_view text, const std::string& where) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(!parsed.is_discarded(), "{}: not valid JSON", where);
  return parsed;
}

std::string type_of(const json& node) {
  if (!node.is_object()) return "";
  auto it = node.find("type");
  return it != node.end() && it->is_string() ? it->get<std::string>() : "";
}

// The node itself or, for a "Sequence", its members (under `list_key`) in order.
std::vector<const json*> flatten(const json& node, const char* list_key) {
  std::vector<const json*> out;
  if (type_of(node) == "Sequence") {
    auto it = node.find(list_key);
    if (it != node.end() && it->is_array()) {
      for (const json& member : *it) {
        for (const json* inner : flatten(member, list_key)) out.push_back(inner);
      }
    }
  } else if (node.is_object()) {
    out.push_back(&node);
  }
  return out;
}

bool contains_type(const json& node, const char* list_key, std::string_view type) {
  for (const json* member : flatten(node, list_key)) {
    if (type_of(*member) == type) return true;
  }
  return false;
}

bool bool_field(const json& node, const char* key, bool fallback) {
  auto it = node.find(key);
  return it != node.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string string_field(const json& node, const char* key) {
  auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get<std::string>() : "";
}

// A literal string as a PCRE2 pattern: ASCII punctuation escaped, everything else as is.
std::string escape_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80 && !std::isalnum(b)) out += '\\';
    out += c;
  }
  return out;
}

// A "behavior" field: HF's SplitDelimiterBehavior by name; absent means Isolated.
SplitBehavior split_behavior(const json& step, const std::string& where) {
  const std::string name = string_field(step, "behavior");
  if (name.empty() || name == "Isolated") return SplitBehavior::Isolated;
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  TANDEM_CHECK_INPUT(false, "{}: {} pre-tokenizer behavior '{}' is not supported", where, type_of(step), name);
  return SplitBehavior::Isolated;
}

PreSplit split_step(const json& step, const std::string& where) {
  auto pattern = step.find("pattern");
  TANDEM_CHECK_INPUT(pattern != step.end() && pattern->is_object(), "{}: Split pre-tokenizer without a pattern", where);
  std::string regex = string_field(*pattern, "Regex");
  if (regex.empty()) {
    const std::string literal = string_field(*pattern, "String");
    TANDEM_CHECK_INPUT(!literal.empty(), "{}: Split pattern is neither Regex nor String", where);
    regex = escape_literal(literal);
  }
  return {std::move(regex), split_behavior(step, where), bool_field(step, "invert", false)};
}

// The steps of a byte-level pre_tokenizer block, in application order. Steps after ByteLevel
// see its byte alphabet in HF; Digits and Punctuation there classify bytes accordingly.
std::vector<PreSplit> byte_level_steps(const json& pre_tokenizer, bool& add_prefix_space, const std::string& where) {
  std::vector<PreSplit> steps;
  bool after_byte_level = false;
  for (const json* step : flatten(pre_tokenizer, "pretokenizers")) {
    const std::string type = type_of(*step);
    if (type == "ByteLevel") {
      if (bool_field(*step, "use_regex", true)) steps.emplace_back(kGpt2PreRegex);
      add_prefix_space = bool_field(*step, "add_prefix_space", false);
      after_byte_level = true;
    } else if (type == "Split") {
      steps.push_back(split_step(*step, where));
    } else if (type == "Digits") {
      steps.push_back(hf_digits(bool_field(*step, "individual_digits", false), after_byte_level));
    } else if (type == "Punctuation") {
      steps.push_back(hf_punctuation(split_behavior(*step, where), after_byte_level));
    } else if ((type == "Whitespace" || type == "WhitespaceSplit") && !after_byte_level) {
      steps.push_back(type == "Whitespace" ? hf_whitespace() : hf_whitespace_split());
    } else {
      TANDEM_CHECK_INPUT(false, "{}: pre-tokenizer '{}' is not supported{}", where, type,
                         after_byte_level ? " after ByteLevel" : " with ByteLevel");
    }
  }
  return steps;
}

// Whether a normalizer turns every space into "▁" (Gemma's Replace), as SpmEncoder does.
bool replaces_spaces(const json& normalizer) {
  for (const json* step : flatten(normalizer, "normalizers")) {
    if (type_of(*step) != "Replace") continue;
    auto pattern = step->find("pattern");
    if (pattern != step->end() && pattern->is_object() && string_field(*pattern, "String") == " " &&
        string_field(*step, "content") == kSpaceMarker) {
      return true;
    }
  }
  return false;
}

// The steps of a SentencePiece-style pre_tokenizer block. SpmEncoder turns spaces into "▁"
// before any step runs, so a step must not care whether it sees " " or "▁": Digits and
// Punctuation never match either; Split only once a normalizer or Metaspace has replaced
// spaces, as HF would then see "▁" too. Metaspace sets the space prefix and may split.
std::vector<PreSplit> spm_steps(const json& pre_tokenizer, bool spaces_replaced, bool& add_space_prefix,
                                const std::string& where) {
  std::vector<PreSplit> steps;
  for (const json* step : flatten(pre_tokenizer, "pretokenizers")) {
    const std::string type = type_of(*step);
    if (type == "Metaspace") {
      const std::string replacement = string_field(*step, "replacement");
      TANDEM_CHECK_INPUT(replacement.empty() || replacement == kSpaceMarker,
                         "{}: Metaspace replacement '{}' is not supported (only \u2581)", where, replacement);
      std::string scheme = string_field(*step, "prepend_scheme");
      if (scheme.empty()) scheme = bool_field(*step, "add_prefix_space", true) ? "always" : "never";
      TANDEM_CHECK_INPUT(scheme == "always" || scheme == "first" || scheme == "never",
                         "{}: Metaspace prepend_scheme '{}' is not supported", where, scheme);
      // HF prepends to the pieces earlier steps cut ("always": each; "first": the first), so
      // "▁" stays on a leading digit there; SpmEncoder prefixes before any step runs.
      TANDEM_CHECK_INPUT(scheme == "never" || steps.empty(),
                         "{}: Metaspace prepend_scheme '{}' after another splitting pre-tokenizer is not supported",
                         where, scheme);
      add_space_prefix = scheme != "never";
      spaces_replaced = true;
      if (bool_field(*step, "split", true)) steps.push_back(hf_metaspace_split());
    } else if (type == "Digits") {
      steps.push_back(hf_digits(bool_field(*step, "individual_digits", false), false));
    } else if (type == "Punctuation") {
      steps.push_back(hf_punctuation(split_behavior(*step, where), false));
    } else if (type == "Split" && spaces_replaced) {
      steps.push_back(split_step(*step, where));
    } else {
      TANDEM_CHECK_INPUT(false, "{}: pre-tokenizer '{}' is not supported with a SentencePiece-style vocabulary{}",
                         where, type, type == "Split" ? " before spaces become \u2581" : "");
    }
  }
  return steps;
}

// A token name from tokenizer_config.json: a string or an AddedToken object with "content".
std::string token_name(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return string_field(*it, "content");
  return "";
}

// The first special token of a TemplateProcessing "single" template: the BOS it adds.
std::string template_bos(const json& post_processor) {
  for (const json* step : flatten(post_processor, "processors")) {
    if (type_of(*step) != "TemplateProcessing") continue;
    auto single = step->find("single");
    if (single == step->end() || !single->is_array() || single->empty()) continue;
    const json& first = single->front();
    if (!first.is_object()) continue;
    auto special = first.find("SpecialToken");
    if (special != first.end() && special->is_object()) return string_field(*special, "id");
  }
  return "";
}

// The model's vocab map, then the added tokens (which may extend it); scores all 0.
Vocab vocab_pieces(const json& root, const json& model, const std::string& where) {
  Vocab vocab;
  auto vocab_it = model.find("vocab");
  TANDEM_CHECK_INPUT(vocab_it != model.end() && vocab_it->is_object(), "{}: model.vocab missing", where);
  auto place = [&](const std::string& piece, const json& id_node, TokenType type) {
    TANDEM_CHECK_INPUT(id_node.is_number_integer(), "{}: token '{}' has no integer id", where, piece);
    const int64_t id = id_node.get<int64_t>();
    TANDEM_CHECK_INPUT(id >= 0 && id < kMaxVocab, "{}: token '{}' has id {}", where, piece, id);
    if (id >= vocab.size()) {
      vocab.pieces.resize(static_cast<size_t>(id) + 1);
      vocab.types.resize(static_cast<size_t>(id) + 1, TokenType::Unused);
    }
    vocab.pieces[id] = piece;
    vocab.types[id] = type;
  };
  for (const auto& [piece, id] : vocab_it->items()) place(piece, id, TokenType::Normal);
  if (auto added = root.find("added_tokens"); added != root.end() && added->is_array()) {
    for (const json& token : *added) {
      TANDEM_CHECK_INPUT(token.is_object() && token.contains("id"), "{}: malformed added token", where);
      const bool special = bool_field(token, "special", false);
      place(string_field(token, "content"), token["id"], special ? TokenType::Control : TokenType::UserDefined);
    }
  }
  TANDEM_CHECK_INPUT(vocab.size() > 0, "{}: empty vocabulary", where);
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  return vocab;
}

// The model's merges, each "a b" or [a, b], in rank order.
void read_merges(const json& model, const std::string& where, Vocab& vocab) {
  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) return;
  vocab.merges.reserve(merges->size());
  for (const json& merge : *merges) {
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ', 1);
      TANDEM_CHECK_INPUT(space != std::string::npos, "{}: merge '{}' has no space", where, text);
      vocab.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else {
      TANDEM_CHECK_INPUT(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
                         "{}: a merge is neither \"a b\" nor [a, b]", where);
      vocab.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
}

// A piece's id by its text (-1 for none or the empty name), over the pieces in use.
class PieceIds {
 public:
  explicit PieceIds(const Vocab& vocab) {
    for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
      if (vocab.types[id] != TokenType::Unused) ids_.emplace(vocab.pieces[id], id);
    }
  }
  int32_t operator()(const std::string& name) const {
    auto it = ids_.find(name);
    return name.empty() || it == ids_.end() ? int32_t{-1} : it->second;
  }

 private:
  std::unordered_map<std::string, int32_t> ids_;
};

// Byte-level BPE (GPT-2 style): its pre-tokenizer regexes; NFC is the only normalizer.
void set_byte_level(const json& model, const json& pre_tokenizer, const json& normalizer, const std::string& where,
                    Vocab& vocab) {
  vocab.kind = VocabKind::ByteLevelBpe;
  vocab.pre_regexes = byte_level_steps(pre_tokenizer, vocab.add_space_prefix, where);
  vocab.ignore_merges = bool_field(model, "ignore_merges", false);
  // NFC is accepted but not applied, as llama.cpp does for Qwen2: real prompts are almost
  // always NFC already, and applying it needs Unicode tables this project does not carry.
  for (const json* step : flatten(normalizer, "normalizers")) {
    TANDEM_CHECK_INPUT(type_of(*step) == "NFC",
                       "{}: normalizer '{}' is not supported for "
                       "byte-level BPE",
                       where, type_of(*step));
  }
}

// SentencePiece-style BPE: the encoder merges by score: a piece's score is minus the rank of
// the first merge that makes it, so lower ranks merge first as in HF. Pieces no merge makes
// get the lowest score (HF would never form them; SentencePiece would, last).
void set_sentencepiece_like(const json& pre_tokenizer, const json& normalizer, const PieceIds& id_of,
                            const std::string& where, Vocab& vocab) {
  vocab.kind = VocabKind::Spm;
  vocab.add_space_prefix = false;
  for (const json* step : flatten(normalizer, "normalizers")) {
    if (type_of(*step) == "Prepend" && string_field(*step, "prepend") == kSpaceMarker) {
      vocab.add_space_prefix = true;
    }
  }
  vocab.pre_regexes = spm_steps(pre_tokenizer, replaces_spaces(normalizer), vocab.add_space_prefix, where);
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
    if (vocab.types[id] == TokenType::Normal) {
      vocab.scores[id] = -1e30f;
      if (parse_byte_piece(vocab.pieces[id]) >= 0) vocab.types[id] = TokenType::Byte;
    }
  }
  for (size_t rank = vocab.merges.size(); rank-- > 0;) {  // lowest rank written last, wins
    const int32_t id = id_of(vocab.merges[rank].first + vocab.merges[rank].second);
    if (id >= 0) vocab.scores[id] = -static_cast<float>(rank);
  }
  vocab.merges.clear();
}

// UNK, BOS and EOS: tokenizer_config.json names BOS and EOS; without it, the post-processor's
// template shows the BOS, and EOS is looked for under the usual names.
void set_special_ids(const json& model, const json& config, const json& post_processor, const PieceIds& id_of,
                     Vocab& vocab) {
  vocab.unk_id = id_of(string_field(model, "unk_token"));
  if (vocab.unk_id >= 0) vocab.types[vocab.unk_id] = TokenType::Unknown;
  std::string bos = token_name(config, "bos_token");
  std::string eos = token_name(config, "eos_token");
  const std::string template_first = template_bos(post_processor);
  if (bos.empty()) bos = template_first;
  vocab.bos_id = id_of(bos);
  if (eos.empty()) {
    for (const char* name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>",
                             "<\xEF\xBD\x9C"
                             "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"}) {
      if (id_of(name) >= 0) {
        eos = name;
        break;
      }
    }
  }
  vocab.eos_id = id_of(eos);
  vocab.add_bos = bool_field(config, "add_bos_token", !template_first.empty()) && vocab.bos_id >= 0;
}

}  // namespace

Vocab vocab_from_tokenizer_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                     const std::string& where) {
  const json root = parse_json(tokenizer_json, where);
  TANDEM_CHECK_INPUT(root.is_object(), "{}: not a tokenizer.json object", where);
  const json config = config_json.empty() ? json::object() : parse_json(config_json, where);
  auto model_it = root.find("model");
  TANDEM_CHECK_INPUT(model_it != root.end() && model_it->is_object(), "{}: no model block", where);
  const json& model = *model_it;
  const std::string model_type = type_of(model);
  TANDEM_CHECK_INPUT(model_type.empty() || model_type == "BPE", "{}: tokenizer model '{}' is not supported (only BPE)",
                     where, model_type);

  Vocab vocab = vocab_pieces(root, model, where);
  const PieceIds id_of(vocab);
  read_merges(model, where, vocab);

  const json null_node;
  auto block = [&](const char* key) -> const json& {
    auto it = root.find(key);
    return it == root.end() ? null_node : *it;
  };
  const json& pre_tokenizer = block("pre_tokenizer");
  const json& normalizer = block("normalizer");
  const json& decoder = block("decoder");
  const bool byte_level =
      contains_type(pre_tokenizer, "pretokenizers", "ByteLevel") || contains_type(decoder, "decoders", "ByteLevel");
  const bool metaspace = contains_type(pre_tokenizer, "pretokenizers", "Metaspace");
  const bool spm_like = bool_field(model, "byte_fallback", false) || metaspace ||
                        contains_type(normalizer, "normalizers", "Prepend") ||
                        contains_type(decoder, "decoders", "ByteFallback");
  if (byte_level) {
    set_byte_level(model, pre_tokenizer, normalizer, where, vocab);
  } else {
    TANDEM_CHECK_INPUT(spm_like,
                       "{}: BPE without a ByteLevel or SentencePiece-style "
                       "(byte_fallback, \"\u2581\") setup is not supported",
                       where);
    set_sentencepiece_like(pre_tokenizer, normalizer, id_of, where, vocab);
  }
  set_special_ids(model, config, block("post_processor"), id_of, vocab);
  return vocab;
}

Vocab vocab_from_tokenizer_json(const std::string& path) {
  const std::string text = read_text(path);
  const std::filesystem::path config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::string config;
  if (std::filesystem::is_regular_file(config_path)) config = read_text(config_path.string());
  return vocab_from_tokenizer_json_text(text, config, path);
}

}  // namespace tandem
