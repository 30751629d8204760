// Locating a model's tokenizer (see load_tokenizer.h).
#include "tokenizer/load_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "io/gguf_file.h"
#include "tokenizer/hf_tokenizer_json.h"

namespace tandem {
namespace {

// tokenizer.bin first (llama2.c's default name), then tok*.bin in name order so the choice
// does not depend on directory order.
std::string find_tokenizer_near(const std::string& model_path) {
  namespace fs = std::filesystem;
  fs::path folder = fs::path(model_path).parent_path();
  if (folder.empty()) folder = ".";
  if (fs::path exact = folder / "tokenizer.bin"; fs::is_regular_file(exact)) return exact.string();
  std::vector<std::string> candidates;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.starts_with("tok") && name.ends_with(".bin")) {
      candidates.push_back(entry.path().string());
    }
  }
  TANDEM_CHECK_INPUT(!candidates.empty(),
                     "{}: no tokenizer found (looked for tokenizer.bin or tok*.bin in {}; pass one "
                     "with -z)",
                     model_path, folder.string());
  std::sort(candidates.begin(), candidates.end());
  return candidates.front();
}

// A tokenizer.json often lists fewer tokens than the model's embedding has rows (Qwen2 pads
// its vocabulary): the extra ids become unused tokens so the sizes agree.
Tokenizer json_tokenizer(const std::string& path, int64_t vocab_size_hint) {
  Vocab vocab = vocab_from_tokenizer_json(path);
  if (vocab_size_hint > vocab.size()) {
    const auto n = static_cast<size_t>(vocab_size_hint);
    vocab.pieces.resize(n);
    vocab.scores.resize(n, 0.0f);
    vocab.types.resize(n, TokenType::Unused);
  }
  return Tokenizer(std::move(vocab));
}

}  // namespace

std::string tokenizer_json_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const fs::path inside = fs::path(path) / "tokenizer.json";
    return fs::is_regular_file(inside, error) ? inside.string() : "";
  }
  return path.ends_with(".json") && fs::is_regular_file(path, error) ? path : "";
}

bool is_gguf_path(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4> magic{};
  if (in.read(magic.data(), magic.size())) return std::memcmp(magic.data(), "GGUF", 4) == 0;
  return path.ends_with(".gguf");
}

int64_t llama2c_header_vocab_size(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  TANDEM_CHECK_INPUT(in.good(), "{}: cannot open model file", model_path);
  std::array<int32_t, 7> header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof header);
  TANDEM_CHECK_INPUT(in.gcount() == static_cast<std::streamsize>(sizeof header),
                     "{}: too short for a llama2.c checkpoint header", model_path);
  const int64_t vocab_size = std::llabs(static_cast<int64_t>(header[5]));
  TANDEM_CHECK_INPUT(vocab_size > 0, "{}: llama2.c header has vocab_size 0", model_path);
  return vocab_size;
}

Tokenizer load_tokenizer(const std::string& model_path, const std::string& tokenizer_path, int64_t vocab_size_hint) {
  if (std::filesystem::is_directory(model_path)) {
    const std::string json = tokenizer_json_path(model_path);
    TANDEM_CHECK_INPUT(!json.empty(), "{}: no tokenizer.json in this model folder", model_path);
    return json_tokenizer(json, vocab_size_hint);
  }
  if (is_gguf_path(model_path)) {
    return Tokenizer(vocab_from_gguf(GgufFile::open(model_path)));
  }
  TANDEM_CHECK_INPUT(std::filesystem::is_regular_file(model_path), "{}: no such model file", model_path);
  if (const std::string json = tokenizer_json_path(model_path); !json.empty()) {
    return json_tokenizer(json, vocab_size_hint);
  }
  if (!tokenizer_path.empty()) {
    if (const std::string json = tokenizer_json_path(tokenizer_path); !json.empty()) {
      return json_tokenizer(json, vocab_size_hint);
    }
    if (is_gguf_path(tokenizer_path)) return Tokenizer(vocab_from_gguf(GgufFile::open(tokenizer_path)));
  }
  const std::string path = tokenizer_path.empty() ? find_tokenizer_near(model_path) : tokenizer_path;
  const int64_t vocab_size = vocab_size_hint > 0 ? vocab_size_hint : llama2c_header_vocab_size(model_path);
  return Tokenizer(vocab_from_llama2c(path, vocab_size));
}

}  // namespace tandem
