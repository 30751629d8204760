// tandem bench: llama-bench-style throughput of one model — ppN (prefill) and tgN (greedy
// decode) tokens/s, median ± stddev of repetitions — as a markdown table, or one JSON
// object per test with --json. Flags and printing only; the measuring is engine/benchmark.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/human_units.h"
#include "cli/kv_type_options.h"
#include "engine/benchmark.h"

namespace tandem::cli {
namespace {

struct BenchFlags {
  std::string model_path;
  BenchOptions options;
  bool json = false;
  KvTypeFlags kv_types;
};

std::string human_count(int64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.2f} K", n / 1e3);
}

void print_table_header() {
  fmt::print("| {:<30} | {:>10} | {:>9} | {:>7} | {:>7} | {:>20} | {:>10} | {:>10} |\n", "model", "size", "params",
             "threads", "test", "t/s", "peak RSS", "KV");
  fmt::print("| {:-<30} | {:->9}: | {:->8}: | {:->6}: | {:->6}: | {:->19}: | {:->9}: | {:->9}: |\n", "", "", "", "", "",
             "", "", "");
}

void print_table_row(const BenchResult& result, const BenchModelInfo& info) {
  const std::string name = std::filesystem::path(info.path).filename().string() + " " + info.type;
  fmt::print("| {:<30} | {:>10} | {:>9} | {:>7} | {:>7} | {:>20} | {:>10} | {:>10} |\n", name,
             human_bytes(info.file_bytes), human_count(info.n_params), result.threads, result.test,
             fmt::format("{:.2f} ± {:.2f}", result.median(), result.stddev()), human_bytes(result.peak_rss_bytes),
             human_bytes(result.kv_bytes));
  std::fflush(stdout);  // rows appear as tests finish; a full run takes minutes
}

void run_bench(const BenchFlags& flags) {
  std::shared_ptr<const Model> model = load_model(flags.model_path);
  BenchOptions options = flags.options;
  options.kv_types = flags.kv_types.resolve();
  BenchModelInfo info = describe_model(*model);
  info.kv_types = options.kv_types;
  Benchmark benchmark(model, options);
  if (!flags.json) print_table_header();
  benchmark.run_all([&](const BenchResult& result) {
    if (flags.json) {
      fmt::print("{}\n", bench_result_json(result, info).dump());
      std::fflush(stdout);
    } else {
      print_table_row(result, info);
    }
  });
  if (!flags.json)
    fmt::print("\ndecode floor: {} of weights per token ({} bytes); tg runs after a {}-token prefill; "
               "{} timed repetitions + 1 warm-up; KV cache {}\n",
               human_bytes(info.weight_bytes_per_token), info.weight_bytes_per_token, options.decode_prefill,
               options.repetitions, kv_types_description(options.kv_types));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* command = app.add_subcommand("bench", "Measure prefill and decode tokens/s (like llama-bench)");
  command->add_option("-m,--model", flags->model_path, "Model file (.gguf or llama2.c model.bin)")->required();
  command->add_option("-p,--n-prompt", flags->options.prompt_lengths, "Prompt lengths, one ppN test each (0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("-n,--n-gen", flags->options.n_gen, "Tokens to generate in the tgN test (0 = none)")
      ->capture_default_str();
  command->add_option("-t,--threads", flags->options.threads, "Threads")->capture_default_str();
  command->add_option("-r,--repetitions", flags->options.repetitions, "Timed repetitions per test (median reported)")
      ->capture_default_str();
  command->add_option("--tg-prefill", flags->options.decode_prefill, "Untimed prompt tokens before the tg test")
      ->capture_default_str();
  command->add_flag("--json", flags->json, "One JSON object per line and test");
  add_kv_type_options(command, &flags->kv_types);
  command->callback([flags] { run_bench(*flags); });
}

}  // namespace tandem::cli
