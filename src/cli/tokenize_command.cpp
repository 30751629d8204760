// tandem tokenize: prints the ids of a text (from -p, else stdin verbatim) on one line.
// Loads only the vocabulary, so vocabulary-only GGUFs (SentencePiece or byte-level BPE),
// tokenizer.json files and Hugging Face model folders work; no weights are read.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "cli/commands.h"
#include "io/gguf_file.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::cli {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;
  bool has_prompt = false;
  bool no_bos = false;
  bool parse_special = false;
};

// Binary-safe: every byte of stdin, nothing trimmed.
std::string read_all_stdin() {
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
  TANDEM_CHECK_INPUT(!std::ferror(stdin), "cannot read stdin");
  return text;
}

// A llama2.c tokenizer file given as -m (no model): its name says so and the vocab size is
// whatever the file holds.
bool names_llama2c_tokenizer(const std::string& path) {
  const std::string name = path.substr(path.find_last_of('/') + 1);
  return name.starts_with("tok") && name.ends_with(".bin");
}

Tokenizer open_tokenizer(const TokenizeOptions& options) {
  if (options.tokenizer_path.empty()) {
    if (const std::string json = tokenizer_json_path(options.model_path); !json.empty()) {
      return Tokenizer(vocab_from_tokenizer_json(json));
    }
    if (is_gguf_path(options.model_path)) {
      return Tokenizer(vocab_from_gguf(GgufFile::open(options.model_path)));
    }
    if (names_llama2c_tokenizer(options.model_path)) {
      return Tokenizer(vocab_from_llama2c(options.model_path, 0));
    }
  }
  return load_tokenizer(options.model_path, options.tokenizer_path, 0);
}

void run_tokenize(const TokenizeOptions& options) {
  const Tokenizer tokenizer = open_tokenizer(options);
  const std::string text = options.has_prompt ? options.prompt : read_all_stdin();
  // BOS only where the vocabulary asks for it (SentencePiece yes, GPT-2 no).
  const std::vector<int32_t> ids =
      tokenizer.encode(text, tokenizer.vocab().add_bos && !options.no_bos, options.parse_special);
  fmt::print("{}\n", fmt::join(ids, " "));
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", "Print the token ids of a text");
  command
      ->add_option("-m,--model", options->model_path,
                   "Model or vocabulary: .gguf (vocab-only is fine), tokenizer.json, a Hugging "
                   "Face model folder, llama2.c model.bin, or a llama2.c tokenizer.bin")
      ->required();
  command->add_option("-z,--tokenizer", options->tokenizer_path,
                      "llama2.c tokenizer.bin (default: tokenizer.bin or tok*.bin next to the model)");
  command->add_option("-p,--prompt", options->prompt, "Text to tokenize (default: all of stdin)");
  command->add_flag("--no-bos", options->no_bos, "Do not prepend BOS");
  command->add_flag("--special", options->parse_special,
                    "Match control tokens written in the text (e.g. <|endoftext|>) as tokens");
  command->callback([options, command] {
    options->has_prompt = command->count("--prompt") > 0;
    run_tokenize(*options);
  });
}

}  // namespace tandem::cli
