// tandem perplexity: teacher-forced scoring of a text file (see engine/perplexity.h), and with
// --kl-divergence-base the comparison of the KV cache type against a base type (engine/kv_divergence.h).
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/kv_type_options.h"
#include "engine/kv_divergence.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::cli {
namespace {

struct PerplexityOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string text_path;
  int64_t ctx = 0;
  int64_t batch = 0;
  int threads = 0;
  KvTypeFlags kv_types;
  std::string kl_base;  // --kl-divergence-base: compare against this KV type (K and V)
};

void run_perplexity(const PerplexityOptions& options) {
  std::ifstream file(options.text_path, std::ios::binary);
  TANDEM_CHECK_INPUT(file.good(), "cannot open text file '{}'", options.text_path);
  std::stringstream text;
  text << file.rdbuf();

  std::shared_ptr<const Model> model = load_model(options.model_path);
  const Tokenizer tokenizer = load_tokenizer(options.model_path, options.tokenizer_path, model->config.vocab_size);
  const std::vector<int32_t> tokens = tokenizer.encode(text.str(), tokenizer.vocab().add_bos);
  const int64_t ctx = options.ctx > 0 ? options.ctx : std::min<int64_t>(512, model->config.context_length);
  const int64_t batch = options.batch > 0 ? std::min(options.batch, ctx) : ctx;
  ThreadPool pool(options.threads);
  Forward forward(model, batch, pool, ctx);  // ctx, as llama.cpp's n_ctx, picks LongRoPE's factors
  const KvTypes kv_types = options.kv_types.resolve();
  const int32_t bos_id = tokenizer.vocab().add_bos ? tokenizer.vocab().bos_id : -1;
  fmt::print(stderr, "perplexity: {} tokens, {} chunks of {} (batch {}), KV cache {}\n", tokens.size(),
             static_cast<int64_t>(tokens.size()) / std::max<int64_t>(ctx, 1), ctx, batch,
             kv_types_description(kv_types));
  if (!options.kl_base.empty()) {
    const DType base_type = parse_kv_type(options.kl_base);
    const KvTypes base{base_type, base_type};
    const KvDivergenceResult result = compare_kv_types(
        forward, tokens, ctx, batch, bos_id, base, kv_types, [](int64_t chunk, const KvDivergenceResult& so_far) {
          fmt::print(stderr, "[{}] PPL base {:.4f} test {:.4f}, mean KL {:.4e}\n", chunk + 1, so_far.base.perplexity,
                     so_far.test.perplexity, so_far.mean_kl);
        });
    fmt::print("PPL({}) = {:.4f} +/- {:.4f}\n", kv_types_description(base), result.base.perplexity,
               result.base.uncertainty);
    fmt::print("PPL({}) = {:.4f} +/- {:.4f} ({:+.4f} %)\n", kv_types_description(kv_types), result.test.perplexity,
               result.test.uncertainty, 100.0 * (result.test.perplexity / result.base.perplexity - 1.0));
    fmt::print("mean KL = {:.4e} nats, max KL = {:.4e}, top-1 agreement = {:.3f} % over {} positions\n", result.mean_kl,
               result.max_kl, 100.0 * result.top1_agreement, result.scored_tokens);
    return;
  }
  const PerplexityResult result =
      compute_perplexity(forward, tokens, ctx, batch, bos_id, kv_types,
                         [](int64_t chunk, double ppl) { fmt::print(stderr, "[{}] {:.4f}\n", chunk + 1, ppl); });
  fmt::print("PPL = {:.4f} +/- {:.4f}\n", result.perplexity, result.uncertainty);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* command = app.add_subcommand("perplexity", "Score a text file: perplexity as llama.cpp computes it");
  command->add_option("-m,--model", options->model_path, "Model file")->required();
  command->add_option("-z,--tokenizer", options->tokenizer_path, "Tokenizer for llama2.c models");
  command->add_option("-f,--file", options->text_path, "Text file to score")->required();
  command->add_option("-c,--ctx", options->ctx, "Tokens per chunk (default: min(512, model context))");
  command->add_option("-b,--batch", options->batch, "Tokens per forward call (default: the whole chunk)");
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  add_kv_type_options(command, &options->kv_types);
  command->add_option("--kl-divergence-base", options->kl_base,
                      "Also run with this KV type (K and V, e.g. f32) and report both perplexities, the mean KL "
                      "divergence of the base's next-token distributions to --kv-type's, and top-1 agreement");
  command->callback([options] { run_perplexity(*options); });
}

}  // namespace tandem::cli
