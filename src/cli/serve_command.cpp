// tandem serve: an OpenAI-compatible HTTP server over the continuous-batching engine. Binds
// first (so /health can say "loading"), loads the model, then serves until SIGINT/SIGTERM:
// stop accepting, let admitted requests finish (up to --shutdown-timeout), cancel the rest, exit 0.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>

#include "base/build_info.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "chat/model_chat_renderer.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/compat_options.h"
#include "cli/device_options.h"
#include "cli/kv_type_options.h"
#include "cli/serve_options.h"
#include "cli/serve_pipeline.h"
#include "cli/serve_tensor_parallel.h"
#include "engine/engine.h"
#include "model/model.h"
#include "profile/trace_writer.h"
#include "server/chat_request.h"
#include "server/cors.h"
#include "server/http/http_server.h"
#include "server/model_names.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::cli {
namespace {

// device_forward: the engine's forward pass off the CPU (engine_device_forward); null: the CPU.
void serve(const ServeOptions& options, const DeviceForwardFactory& device_forward) {
  check_speculation(options.http.speculation);  // bad --draft-* / --spec-ngram-* flags
  TANDEM_CHECK_INPUT(options.http.max_body_bytes >= 1, "--max-body-bytes must be at least 1 byte");
  TANDEM_CHECK_INPUT(options.workers.empty() || options.pipeline_stages == 0,
                     "--workers and --pipeline are two ways to run over several processes: pick one");
  TANDEM_CHECK_INPUT(options.workers.empty() || options.tensor_parallel == 0,
                     "--workers and --tensor-parallel are two ways to run over several processes: pick one");
  TANDEM_CHECK_INPUT(options.pipeline_stages == 0 || options.tensor_parallel == 0,
                     "--tensor-parallel with --pipeline (T x S ranks) is not supported yet: use one of them");
#ifdef TANDEM_WITH_MPI
  if (!options.workers.empty()) return serve_disaggregated(options);
#else
  TANDEM_CHECK_INPUT(options.workers.empty(),
                     "--workers needs a build with MPI (apt install libopenmpi-dev openmpi-bin, then rebuild)");
#endif
  const server::ServerConfig http_config = http_config_of(options);
  // --pipeline: ranks 1..S-1 run a stage and never serve HTTP (cli/serve_pipeline.h).
  std::optional<ServePipeline> pipeline;
  if (options.pipeline_stages > 0) {
    pipeline.emplace(options.pipeline_stages, options.draft_model_path, options.http.speculation.type);
    if (!pipeline->front())
      return pipeline->serve_stage(options.model_path, options.threads, [&](const std::string& m) { say(options, m); });
  }
  // --tensor-parallel: ranks 1..T-1 run their slices and never serve HTTP (cli/serve_tensor_parallel.h).
  std::optional<ServeTensorParallel> tensor_parallel;
  if (options.tensor_parallel > 0) {
    tensor_parallel.emplace(options.tensor_parallel, options.model_path, options.draft_model_path,
                            options.http.speculation.type);
    if (!tensor_parallel->front())
      return tensor_parallel->serve_rank(options.model_path, options.threads,
                                         [&](const std::string& m) { say(options, m); });
  }
  const server::ServedModel served = served_model_of(options);
  const sigset_t signals = block_stop_signals();
  return_freed_memory();

  server::HttpServer http(http_config);
  http.bind();
  say(options, fmt::format("{} listening on http://{}:{} (loading {})", version_line(), options.http.host, http.port(),
                           options.model_path));
  http.start();  // a load error below stops it in ~HttpServer: no thread is left waiting

  begin_loading(signals);
  std::shared_ptr<const Model> model =
      load_model(options.model_path, pipeline          ? pipeline->load_options(options.model_path)
                                     : tensor_parallel ? tensor_parallel->load_options()
                                                       : ModelLoadOptions{});
  const Tokenizer tokenizer = load_tokenizer(options.model_path, options.tokenizer_path, model->config.vocab_size);
  TANDEM_CHECK_INPUT(tokenizer.vocab().size() == model->config.vocab_size,
                     "the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab().size(),
                     model->config.vocab_size);
  const chat::ChatRenderer chat_renderer = choose_chat_renderer(options, tokenizer);
  end_loading(signals);

  EngineConfig engine_config = options.engine;
  std::optional<Tokenizer> draft_tokenizer;
  if (!options.draft_model_path.empty()) {
    engine_config.draft_model = load_model(options.draft_model_path);
    draft_tokenizer.emplace(load_tokenizer(options.draft_model_path, "", engine_config.draft_model->config.vocab_size));
    engine_config.draft_tokenizer = &*draft_tokenizer;
  }

  Profiler profiler;  // with --trace only; outlives the pool and the engine that report to it
  ThreadPool pool(options.threads);
  engine_config.kv_types = options.kv_types.resolve();
  engine_config.device_forward = device_forward;
  Engine engine(model, tokenizer, engine_config, pool);
  if (!options.trace_path.empty()) {
    profiler.enable_trace(pool.size());
    pool.set_chunk_observer(&profiler);
    engine.set_profiler(&profiler);
  }
  if (options.http.verbose)
    engine.set_step_logger([&options](const std::string& line) { say(options, "scheduler: " + line, "debug"); });
  if (pipeline)
    pipeline->attach(
        engine, [&](const std::string& m) { say(options, m); }, options.trace_path.empty() ? nullptr : &profiler);
  if (tensor_parallel)
    tensor_parallel->attach(
        engine, [&](const std::string& m) { say(options, m); }, options.trace_path.empty() ? nullptr : &profiler);
  engine.start();
  const std::string model_id = served.names.front();
  http.attach(&engine, served, chat_renderer);
  const EngineStats stats = engine.stats();
  say(options, fmt::format("ready — model {}, chat format {}, {} parallel (+{} queued), context {}, {} KV blocks of {} "
                           "tokens ({} bytes each), batch budget {} tokens",
                           model_id, chat_renderer.name(), engine.config().max_seqs, options.http.max_queue,
                           engine.context_length(), stats.blocks.total, stats.block_size, stats.bytes_per_block,
                           engine.config().max_batch_tokens));
  say(options, describe_kv_pool(stats.kv_pool, engine.context_length()));
  if (engine.on_device())
    say(options, "forward pass and KV cache on the GPU (--device); /v1/embeddings needs --device cpu");
  if (options.engine.context_length > engine.context_length())
    say(options,
        fmt::format("--ctx {} is more than the model's context; using {}", options.engine.context_length,
                    engine.context_length()),
        "warning");
  if (served.names.size() > 1) {
    std::string aliases;
    for (size_t i = 1; i < served.names.size(); ++i) aliases += (i == 1 ? "" : ", ") + served.names[i];
    say(options, "also answering to model names " + aliases);
  }
  if (http_config.cors.enabled()) {
    std::string origins = http_config.cors.any ? "any origin ('*')" : "";
    for (const std::string& origin : http_config.cors.origins) origins += (origins.empty() ? "" : ", ") + origin;
    say(options, "CORS for " + origins);
  }

  const int signal = wait_for_signal(signals);
  say(options, fmt::format("{} received; no longer accepting, finishing admitted requests (up to {:.1f} s; "
                           "another SIGINT or SIGTERM exits at once)",
                           signal == SIGINT ? "SIGINT" : "SIGTERM", options.shutdown_timeout_s));
  exit_on_second_signal(signals);
  http.shutdown(options.shutdown_timeout_s);
  engine.stop();
  if (pipeline) pipeline->stop([&](const std::string& m) { say(options, m); });
  if (tensor_parallel) tensor_parallel->stop([&](const std::string& m) { say(options, m); });
  if (!options.trace_path.empty()) {
    write_chrome_trace(profiler, options.trace_path);
    say(options, "trace written to " + options.trace_path);
  }
  say(options, "stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  command->add_option("-m,--model", options->model_path, "Model file (.gguf or llama2.c model.bin)");
  auto positional_model = std::make_shared<std::string>();
  command->add_option("MODEL", *positional_model, "The model file, as vLLM's `vllm serve MODEL` takes it (or -m)");
  command->add_option("-z,--tokenizer", options->tokenizer_path, "Tokenizer for llama2.c models (tokenizer.bin)");
  command->add_option("--host", options->http.host, "Address to bind")->capture_default_str();
  command->add_option("--port", options->http.port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  command->add_option("--api-key", options->http.api_key,
                      "Require 'Authorization: Bearer KEY' on every path but /health");
  command->add_option("--parallel,--max-num-seqs", options->engine.max_seqs, "Sequences decoded together (also -np)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  command
      ->add_option("-c,--ctx,--ctx-size,--max-model-len", options->engine.context_length,
                   "Context per sequence (default and most: the model's)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--max-batch-tokens,--max-num-batched-tokens", options->engine.max_batch_tokens,
                   "Tokens per engine step (prefill chunks; also -b, -ub)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  add_byte_size_option(command, "--kv-memory", &options->engine.kv_memory_bytes,
                       "KV cache memory (default: --parallel full contexts)");
  command->add_option("--kv-block,--block-size", options->engine.block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  add_kv_type_options(command, &options->kv_types);
  command
      ->add_option("-a,--served-model-name,--alias", options->served_model_names,
                   "Names requests may give as `model` (NAME NAME..., NAME,NAME or repeated); the first is the id "
                   "/v1/models lists (default: the model file's name)")
      ->expected(1, -1);
  command
      ->add_option("--allowed-origins", options->allowed_origins,
                   "Browser origins given CORS headers (scheme://host[:port], comma-separated or repeated; '*' for "
                   "any; default: none)")
      ->expected(1, -1);
  command->add_option("--chat-template", options->chat_template,
                      "Chat template: chatml, llama2, llama3, zephyr, or a Jinja template FILE (default: the GGUF's)");
  command
      ->add_option_function<std::string>(
          "--pooling",
          [options](const std::string& name) {
            // IsMember admits only these.
            options->http.pooling = name == "last" ? Pooling::Last : name == "none" ? Pooling::Tokens : Pooling::Mean;
          },
          "How /v1/embeddings pools a prompt's final hidden states: mean or last (default: mean); none: not "
          "pooled, llama-server's /embedding answers every token's (and /v1/embeddings refuses)")
      ->check(CLI::IsMember({"mean", "last", "none"}));
  command->add_option("--chat-template-kwargs", options->chat_template_kwargs,
                      "JSON object of extra chat-template variables for every chat request, e.g. "
                      "'{\"enable_thinking\": false}' (a request's chat_template_kwargs override them key by key)");
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  command->add_flag("-v,--verbose", options->http.verbose,
                    "Also log /health and /metrics requests, unknown request fields the server ignores, and the "
                    "scheduler's decisions (admissions, preemptions, prefill chunks)");
  command
      ->add_option_function<std::string>(
          "--log-format",
          [options](const std::string& name) { options->http.log_format = *server::log_format_from_name(name); },
          "Request log lines (one per request, on stderr): text, or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  // Speculation for requests that send no `speculative` object of their own.
  SpeculationParams& spec = options->http.speculation;
  command
      ->add_option_function<std::string>(
          "--spec",
          [options](const std::string& name) { options->http.speculation.type = speculation_type_from_name(name); },
          "Speculative decoding by default: none, ngram (prompt lookup) or draft (--draft-model)")
      ->check(CLI::IsMember({"none", "ngram", "draft"}));
  command
      ->add_option("--pipeline", options->pipeline_stages,
                   "Layers split over S MPI ranks: mpirun -np S tandem serve --pipeline S ... (rank 0 serves HTTP)")
      ->check(CLI::Range(int64_t{2}, int64_t{1024}));
  command
      ->add_option("--tensor-parallel,--tensor-parallel-size", options->tensor_parallel,
                   "Every layer split over T MPI ranks (heads and FFN columns, all-reduced): mpirun -np T tandem "
                   "serve --tensor-parallel T ... (rank 0 serves HTTP; vLLM's --tensor-parallel-size)")
      ->check(CLI::Range(int64_t{2}, int64_t{1024}));
  command->add_option("--draft-model", options->draft_model_path,
                      "Draft model for speculative decoding (same vocabulary as -m)");
  command->add_option("--draft-max", spec.draft_max, "Speculative tokens proposed per step at most")
      ->capture_default_str();
  command->add_option("--draft-min", spec.draft_min, "Floor of the adaptive proposal length")->capture_default_str();
  command->add_option("--spec-ngram-min", spec.ngram_min, "Smallest n-gram prompt lookup matches")
      ->capture_default_str();
  command->add_option("--spec-ngram-max", spec.ngram_max, "Largest n-gram prompt lookup matches")
      ->capture_default_str();
  command
      ->add_option("--workers", options->workers,
                   "Under mpirun: prefill:P,decode:D — rank 0 serves HTTP and routes, ranks 1..P compute prompts, "
                   "the next D decode (mpirun -np 1+P+D; see README, \"Several processes\")")
      ->check(CLI::Validator(
          [](const std::string& spec) {
            return std::regex_match(spec, std::regex("prefill:[0-9]+,decode:[1-9][0-9]*"))
                       ? std::string()
                       : std::string("--workers must be prefill:P,decode:D, e.g. prefill:1,decode:1");
          },
          "prefill:P,decode:D"));
  command
      ->add_option("--remote-prefill-min", options->remote_prefill_min,
                   "With --workers: prompts of fewer tokens are prefilled on their decode worker (a step's work), "
                   "not queued behind long prompts on a prefill worker; 0: every prompt goes to a prefill worker")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--worker-timeout", options->worker_timeout_s,
                   "With --workers: seconds without a report after which a worker is counted down")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--trace", options->trace_path,
                      "Write a Chrome trace (Perfetto) at shutdown: a track per compute thread and per request "
                      "(with --pipeline, each stage's micro-batches too; with --workers, every worker's, rank 0 "
                      "writing them as one file on its clock, with each KV block's send and each request's KV "
                      "import); memory grows with every step, so for diagnostic runs");
  command
      ->add_option("--shutdown-timeout,--drain-seconds", options->shutdown_timeout_s,
                   "On SIGTERM/SIGINT: seconds admitted requests may take to finish before they are cancelled")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--metrics-key", options->http.metrics_key,
                      "Require 'Authorization: Bearer KEY' on /metrics (default: --api-key when set)");
  command
      ->add_option("--max-connections", options->http.max_connections,
                   "Open connections at most; past it a new one gets 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  command
      ->add_option("--max-queue", options->http.max_queue,
                   "Generation requests that may wait beyond --parallel; past it 503 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--max-stored-responses", options->http.max_stored_responses,
                   "Responses /v1/responses keeps in memory for previous_response_id (0: none); the oldest go first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option_function<std::string>(
          "--scheduling-policy",
          [options](const std::string& policy) {
            options->http.priority_scheduling = policy == "priority";
            options->engine.priority_scheduling = policy == "priority";
          },
          "fcfs (default): waiting requests are admitted in arrival order; priority: by each request's `priority` "
          "field, lower first (vLLM's), preempting the highest value first; without it a non-zero priority is a 400")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  command->add_option("--slot-save-path", options->http.slot_save_path,
                      "Directory /slots/{id}?action=save and restore write and read slot files in (llama-server's); "
                      "without it those actions are a 400");
  command->add_flag("--trust-request-chat-template", options->http.trust_request_chat_template,
                    "Let a chat request bring its own Jinja `chat_template` (code the server runs, under the template "
                    "engine's limits); without it that field is a 400 (vLLM's flag)");
  command
      ->add_option("--read-timeout", options->http.read_timeout_s,
                   "Seconds a request's head and body may take to arrive")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--idle-timeout", options->http.idle_timeout_s,
                   "Seconds a keep-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--write-timeout", options->http.write_timeout_s,
                   "Seconds a client may go without reading its response before it is dropped")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_byte_size_option(command, "--max-body-bytes", &options->http.max_body_bytes,
                       "Largest request body (any encoding); 413 past it")
      ->default_str(std::to_string(options->http.max_body_bytes));
  auto device = std::make_shared<std::string>("auto");
  add_device_option(command, device.get());
  auto compat = std::make_shared<CompatFlags>();
  add_compat_options(command, compat.get(), CompatScope::kServe);
  command->callback([options, device, compat, positional_model, command] {
    TANDEM_CHECK_INPUT(options->model_path.empty() || positional_model->empty(),
                       "give the model once: -m PATH or PATH, not both");
    if (options->model_path.empty()) options->model_path = *positional_model;
    TANDEM_CHECK_INPUT(!options->model_path.empty(),
                       "give a model: tandem serve -m PATH (or tandem serve PATH, as vllm serve takes it)");
    apply_compat_flags(*compat, *command, &options->kv_types, &options->chat_template, device.get());
    if (const std::optional<int64_t> tokens = compat_batch_tokens(*compat, *command))
      options->engine.max_batch_tokens = *tokens;
    options->http.tool_call_format = compat_tool_call_format(*compat);
    // What runs on the CPU only: other processes' forward passes and KV caches, a draft model's.
    const std::string cpu_only = !options->workers.empty()            ? "--workers"
                                 : options->pipeline_stages > 0       ? "--pipeline"
                                 : options->tensor_parallel > 0       ? "--tensor-parallel"
                                 : !options->draft_model_path.empty() ? "--draft-model"
                                                                      : "";
    DeviceForwardFactory device_forward = engine_device_forward(*device, cpu_only);
    for (const std::string& note : compat_notes(*compat, device_forward != nullptr)) say(*options, note);
    if (options->http.tool_call_format)
      say(*options, fmt::format("tool calls read as {} (--tool-call-parser)",
                                chat::tool_call_format_name(*options->http.tool_call_format)));
    serve(*options, device_forward);
  });
}

}  // namespace tandem::cli
