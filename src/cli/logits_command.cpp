// tandem logits: the next-token logits at every position of a given token id sequence
// (engine/sequence_logits.h), written as raw little-endian float32 [n_tokens, vocab_size] for
// another program to compare (bench/agreement holds them against llama.cpp's). Ids are read,
// not tokenized, so both engines see exactly the same sequence.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/kv_type_options.h"
#include "engine/sequence_logits.h"
#include "model/model.h"

namespace tandem::cli {
namespace {

struct LogitsOptions {
  std::string model_path;
  std::string ids_path;  // empty or "-": stdin
  std::string out_path;
  int64_t batch = 0;
  int64_t ctx = 0;
  int threads = 0;
  KvTypeFlags kv_types;
};

// Decimal ids separated by whitespace or commas (what `tandem tokenize` and JSON arrays print).
std::vector<int32_t> parse_ids(std::istream& in, const std::string& source) {
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    std::stringstream parts(word);
    std::string part;
    while (std::getline(parts, part, ',')) {
      if (part.empty() || part == "[" || part == "]") continue;
      if (part.front() == '[') part.erase(0, 1);
      if (!part.empty() && part.back() == ']') part.pop_back();
      size_t used = 0;
      long long value = -1;
      try {
        value = std::stoll(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TANDEM_CHECK_INPUT(used == part.size() && value >= 0 && value <= INT32_MAX, "{}: '{}' is not a token id", source,
                         part);
      ids.push_back(static_cast<int32_t>(value));
    }
  }
  return ids;
}

void run_logits(const LogitsOptions& options) {
  std::vector<int32_t> ids;
  if (options.ids_path.empty() || options.ids_path == "-") {
    ids = parse_ids(std::cin, "stdin");
  } else {
    std::ifstream file(options.ids_path);
    TANDEM_CHECK_INPUT(file.good(), "cannot open id file '{}'", options.ids_path);
    ids = parse_ids(file, options.ids_path);
  }
  std::shared_ptr<const Model> model = load_model(options.model_path);
  const auto n_tokens = static_cast<int64_t>(ids.size());
  const int64_t batch = options.batch > 0 ? std::min(options.batch, n_tokens) : std::max<int64_t>(n_tokens, 1);
  ThreadPool pool(options.threads);
  Forward forward(model, batch, pool, options.ctx);
  const KvTypes kv_types = options.kv_types.resolve();
  const std::vector<float> logits = sequence_logits(forward, ids, batch, kv_types);

  std::ofstream out(options.out_path, std::ios::binary);
  TANDEM_CHECK_INPUT(out.good(), "cannot write '{}'", options.out_path);
  // Raw float32 in the host's order: every CPU Tandem runs on is little-endian.
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  TANDEM_CHECK_INPUT(out.good(), "cannot write '{}'", options.out_path);
  fmt::print(stderr, "logits: {} positions x {} vocabulary (float32, {} bytes) -> {}, KV cache {}\n", n_tokens,
             model->config.vocab_size, logits.size() * sizeof(float), options.out_path, kv_types_description(kv_types));
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto options = std::make_shared<LogitsOptions>();
  CLI::App* command = app.add_subcommand(
      "logits", "Write the next-token logits at every position of a token id sequence (teacher forced)");
  command->add_option("-m,--model", options->model_path, "Model file")->required();
  command->add_option("-f,--ids", options->ids_path,
                      "File of token ids, separated by spaces, newlines or commas (default or '-': stdin)");
  command
      ->add_option("-o,--output", options->out_path,
                   "Output: raw little-endian float32 [n_ids, vocab_size]; row i follows ids 0..i")
      ->required();
  command->add_option("-b,--batch", options->batch, "Tokens per forward call (default: all; same result)");
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  command->add_option("-c,--ctx", options->ctx,
                      "Context the run is set up for (default: the model's); as llama.cpp's n_ctx, it picks "
                      "LongRoPE's long or short factors");
  add_kv_type_options(command, &options->kv_types);
  command->callback([options] { run_logits(*options); });
}

}  // namespace tandem::cli
