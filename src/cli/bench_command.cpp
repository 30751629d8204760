// tandem bench: llama-bench-style throughput of one model — ppN (prefill) and tgN (greedy
// decode) tokens/s, median ± stddev of repetitions — as a markdown table, or one JSON
// object per test with --json; --profile adds the per-op roofline summary on stderr,
// --trace FILE a Chrome trace, --machine measures and caches the machine's ceilings; on a
// terminal, a progress line on stderr inside each test. Flags and printing only; the
// measuring is engine/benchmark and profile/.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/device_bench.h"
#include "cli/device_options.h"
#include "cli/human_units.h"
#include "cli/kv_type_options.h"
#include "engine/benchmark.h"
#include "kernels/kernel_table.h"
#include "profile/machine_ceilings.h"
#include "profile/profile_summary.h"
#include "profile/trace_writer.h"

namespace tandem::cli {
namespace {

struct BenchFlags {
  std::string model_path;
  BenchOptions options;  // threads 0 until run_bench: every core, as every command's -t
  bool json = false;
  KvTypeFlags kv_types;
  bool profile = false;
  std::string trace_path;
  bool machine = false;
  int64_t machine_mib = 512;
  std::string device = "auto";
  std::vector<int64_t> decode_batches;  // tgN-bB tests, on the device only
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

// Measures the ceilings for this kernel level and thread count and caches them.
void run_machine(const BenchFlags& flags) {
  ThreadPool pool(flags.options.threads);
  const MachineCeilings ceilings = measure_ceilings(pool, flags.machine_mib);
  const std::string path = default_ceilings_path();
  save_ceilings(path, ceilings);
  fmt::print(
      "machine: {}, {} kernels, {} threads: read {:.2f} GB/s ({} MiB, best of 5), int8 GEMM {:.1f} GOP/s, "
      "f32 GEMM {:.1f} GFLOP/s; instructions: f32 FMA {:.1f} GFLOP/s, bf16 dot {}, bf16 tiles {}, int8 dot {}\n"
      "cached in {}\n",
      ceilings.cpu, ceilings.isa, ceilings.threads, ceilings.read_gbps, flags.machine_mib, ceilings.int8_gops,
      ceilings.f32_gflops, ceilings.fma_gflops,
      ceilings.bf16_gflops > 0 ? fmt::format("{:.1f} GFLOP/s", ceilings.bf16_gflops)
                               : std::string("none at this level"),
      ceilings.tile_bf16_gflops > 0 ? fmt::format("{:.1f} GFLOP/s", ceilings.tile_bf16_gflops)
                                    : std::string("none at this level"),
      ceilings.dot_i8_gops > 0 ? fmt::format("{:.1f} GOP/s", ceilings.dot_i8_gops) : std::string("none at this level"),
      path);
  std::fflush(stdout);
}

void run_bench(BenchFlags flags) {
  // Before the model is read: a device that cannot be used is the whole answer.
  ComputeDevice device = select_device(flags.device, true);
  if (flags.options.threads <= 0) flags.options.threads = ThreadPool::default_size();
  if (flags.machine) run_machine(flags);
  if (flags.model_path.empty()) {
    TANDEM_CHECK_INPUT(flags.machine, "--model is required (or --machine alone)");
    return;
  }
  std::shared_ptr<const Model> model = load_model(flags.model_path);
  // auto: what the device path cannot do (a model feature it lacks, the CPU profiler) runs on the CPU.
  if (device == ComputeDevice::Cuda && flags.device == "auto" &&
      (flags.profile || !flags.trace_path.empty() || !device_unsupported_reason(*model).empty()))
    device = ComputeDevice::Cpu;
  TANDEM_CHECK_INPUT(device == ComputeDevice::Cuda || flags.decode_batches.empty(),
                     "--decode-batches is measured with --device cuda only");
  TANDEM_CHECK_INPUT(device == ComputeDevice::Cpu || (!flags.profile && flags.trace_path.empty()),
                     "--profile and --trace measure the CPU forward pass (use --device cpu)");
  BenchModelInfo info = describe_model(*model);
  Profiler profiler;
  BenchOptions options = flags.options;
  options.kv_types = flags.kv_types.resolve();
  info.kv_types = options.kv_types;
  if (flags.profile || !flags.trace_path.empty()) {
    options.profiler = &profiler;
    // About n_layers x 16 ops a step; every timed step of every test.
    int64_t steps = options.repetitions * options.n_gen;
    for (int64_t n : options.prompt_lengths) steps += options.repetitions * ((n + 127) / 128);
    if (!flags.trace_path.empty()) profiler.enable_trace(options.threads, steps * (model->config.n_layers * 20 + 8));
  }
  const char* device_name = device == ComputeDevice::Cuda ? "cuda" : "cpu";
  // A line redrawn with \r belongs on a terminal only; in a log file it is noise.
  const bool show_progress = ::isatty(STDERR_FILENO) != 0;
  if (show_progress)
    options.on_run = [](const std::string& test, int run, int repetitions) {
      if (run == 0)
        std::fprintf(stderr, "\r\033[Kbench: %s warm-up done", test.c_str());
      else
        std::fprintf(stderr, "\r\033[Kbench: %s run %d/%d done", test.c_str(), run, repetitions);
      std::fflush(stderr);
    };
  if (!flags.json) print_table_header();
  auto emit = [&](const BenchResult& result) {
    if (show_progress) std::fputs("\r\033[K", stderr);  // the row takes the progress line's place
    if (flags.json) {
      nlohmann::ordered_json line = bench_result_json(result, info);
      line["device"] = device_name;
      fmt::print("{}\n", line.dump());
      std::fflush(stdout);
    } else {
      print_table_row(result, info);
    }
  };
  if (device == ComputeDevice::Cuda) {
    run_device_benchmark(model, options, flags.decode_batches, emit);
  } else {
    Benchmark benchmark(model, options);
    benchmark.run_all(emit);
  }
  if (!flags.json)
    fmt::print("\ndecode floor: {} of weights per token ({} bytes); tg runs after a {}-token prefill; "
               "{} timed repetitions + 1 warm-up; KV cache {}; on the {}\n",
               human_bytes(info.weight_bytes_per_token), info.weight_bytes_per_token, options.decode_prefill,
               options.repetitions, kv_types_description(options.kv_types), device_name);
  if (flags.profile) {
    std::fflush(stdout);
    const std::optional<MachineCeilings> ceilings =
        load_ceilings(default_ceilings_path(), isa_name(kernel_table().isa), flags.options.threads);
    std::fputs(format_summary(summarize(profiler.snapshot(), ceilings)).c_str(), stderr);
  }
  if (!flags.trace_path.empty()) {
    write_chrome_trace(profiler, flags.trace_path);
    std::fprintf(stderr, "trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", flags.trace_path.c_str());
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  flags->options.threads = 0;
  CLI::App* command = app.add_subcommand("bench", "Measure prefill and decode tokens/s (like llama-bench)");
  command->add_option("-m,--model", flags->model_path, "Model file (.gguf or llama2.c model.bin)");
  command->add_option("-p,--n-prompt", flags->options.prompt_lengths, "Prompt lengths, one ppN test each (0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("-n,--n-gen", flags->options.n_gen, "Tokens to generate in the tgN test (0 = none)")
      ->capture_default_str();
  command->add_option("-t,--threads", flags->options.threads, "Threads (default: all cores)");
  command->add_option("-r,--repetitions", flags->options.repetitions, "Timed repetitions per test (median reported)")
      ->capture_default_str();
  command->add_option("--tg-prefill", flags->options.decode_prefill, "Untimed prompt tokens before the tg test")
      ->capture_default_str();
  command->add_flag("--json", flags->json, "One JSON object per line and test");
  add_kv_type_options(command, &flags->kv_types);
  command->add_flag("--profile", flags->profile,
                    "Per-op time, bytes, FLOPs and roofline summary of the timed runs, on stderr");
  command->add_option("--trace", flags->trace_path, "Write a Chrome trace (Perfetto) of the timed runs to FILE");
  command->add_flag("--machine", flags->machine,
                    "Measure read bandwidth and peak int8/f32 GEMM rates at -t threads and cache them for --profile");
  command->add_option("--machine-mib", flags->machine_mib, "Buffer size of --machine's bandwidth test")
      ->capture_default_str();
  add_device_option(command, &flags->device);
  command
      ->add_option("--decode-batches", flags->decode_batches,
                   "Also decode B sequences together, one token each per step, for each B (tgN-bB; --device cuda)")
      ->delimiter(',');
  command->callback([flags] { run_bench(*flags); });
}

}  // namespace tandem::cli
