// tandem serve --workers prefill:P,decode:D under mpirun: one job of 1 + P + D processes.
// Rank 0 is the front: the HTTP server over a DisaggFront, which routes each request to a
// decode rank and names a prefill rank for its prompt. Ranks 1..P are prefill workers and
// P+1..P+D decode workers, each with the whole model and an engine of its own, built from the
// same flags. Stop the job with SIGTERM (or SIGINT) to rank 0 — its pid is in its log — which
// drains like a single server and then stops every worker; mpirun forwards a signal sent to
// mpirun itself to every rank at once, which ends the job without draining. With --trace,
// every worker traces its engine and sends the trace to the front as it stops; the front
// writes them, lined up on its clock, as one file.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "base/build_info.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/serve_options.h"
#include "dist/decode_worker.h"
#include "dist/disagg_front.h"
#include "dist/disagg_wire.h"
#include "dist/mpi_session.h"
#include "dist/prefill_worker.h"
#include "model/model.h"
#include "profile/profiler.h"
#include "profile/trace_writer.h"
#include "server/model_names.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::cli {

namespace {

struct WorkerCounts {
  int prefill = 0;
  int decode = 0;
};

WorkerCounts parse_workers(const std::string& spec) {
  std::smatch match;
  TANDEM_CHECK_INPUT(std::regex_match(spec, match, std::regex("prefill:([0-9]+),decode:([0-9]+)")),
                     "--workers must be prefill:P,decode:D, not '{}'", spec);
  WorkerCounts counts{std::stoi(match[1]), std::stoi(match[2])};
  TANDEM_CHECK_INPUT(counts.decode >= 1, "--workers needs at least one decode worker");
  return counts;
}

Tokenizer load_checked_tokenizer(const ServeOptions& options, const ModelConfig& model) {
  Tokenizer tokenizer = load_tokenizer(options.model_path, options.tokenizer_path, model.vocab_size);
  TANDEM_CHECK_INPUT(tokenizer.vocab().size() == model.vocab_size,
                     "the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab().size(),
                     model.vocab_size);
  return tokenizer;
}

// Ranks 1..: a worker of `role` until the front says stop. Stop signals are the front's to
// take (mpirun may deliver them here too): blocked, never waited for. Returns whether every
// worker was up when the front stopped them (else MPI must not be finalised).
bool run_worker(const ServeOptions& options, Communicator& comm, bool prefill) {
  block_stop_signals();
  try {
    const std::shared_ptr<const Model> model = load_model(options.model_path);
    const Tokenizer tokenizer = load_checked_tokenizer(options, model->config);
    EngineConfig config = options.engine;
    config.kv_types = options.kv_types.resolve();
    Profiler profiler;  // with --trace only; outlives the pool and the engine that report to it
    ThreadPool pool(options.threads);
    Engine engine(model, tokenizer, config, pool);
    Profiler* traced = nullptr;
    if (!options.trace_path.empty()) {
      profiler.enable_trace(pool.size());
      pool.set_chunk_observer(&profiler);
      engine.set_profiler(&profiler);
      traced = &profiler;
    }
    engine.start();
    say(options, fmt::format("rank {} (pid {}): {} worker, {} parallel, {} KV blocks of {} tokens", comm.rank(),
                             ::getpid(), prefill ? "prefill" : "decode", engine.config().max_seqs,
                             engine.stats().blocks.total, engine.config().block_size));
    return prefill ? dist::PrefillWorker(comm, engine, traced).run() : dist::DecodeWorker(comm, engine, traced).run();
  } catch (const std::exception& error) {
    // The front waits for this rank's first report: tell it why there will be none.
    say(options, fmt::format("rank {}: {}", comm.rank(), error.what()), "error");
    comm.send(0, dist::kFailed, dist::to_bytes({{"error", std::string(error.what())}}));
    throw;
  }
}

std::string worker_label(int rank, const WorkerCounts& counts) {
  return fmt::format("rank {} ({})", rank, rank <= counts.prefill ? "prefill" : "decode");
}

// The front's trace and the workers', each under its rank's name, as one file; a worker that
// sent none (it is down, or did not stop in time) is left out, saying so.
void write_job_trace(const ServeOptions& options, dist::DisaggFront& front, const WorkerCounts& counts) {
  std::map<int, nlohmann::json> traces = front.take_traces();
  std::vector<std::pair<std::string, nlohmann::json>> parts;
  parts.emplace_back("rank 0 (front)", front.front_trace());
  for (int rank = 1; rank <= counts.prefill + counts.decode; ++rank) {
    const auto it = traces.find(rank);
    if (it == traces.end()) {
      say(options, fmt::format("{}: no trace (it did not send one before it stopped)", worker_label(rank, counts)),
          "warning");
      continue;
    }
    parts.emplace_back(worker_label(rank, counts), std::move(it->second));
  }
  write_chrome_trace(merge_chrome_traces(parts), options.trace_path);
  say(options, "trace written to " + options.trace_path);
}

// Returns whether every worker was up at the end (else MPI must not be finalised).
bool run_front(const ServeOptions& options, Communicator& comm, const WorkerCounts& counts) {
  const server::ServerConfig http_config = http_config_of(options);
  const server::ServedModel served = served_model_of(options);
  const sigset_t signals = block_stop_signals();
  return_freed_memory();

  server::HttpServer http(http_config);
  http.bind();
  say(options, fmt::format("{} listening on http://{}:{} (front of {} prefill + {} decode workers, pid {}; loading {})",
                           version_line(), options.http.host, http.port(), counts.prefill, counts.decode, ::getpid(),
                           options.model_path));
  http.start();
  begin_loading(signals);
  // The front tokenizes and renders chat; it needs the model's configuration and vocabulary,
  // not its weights: none is read (read_model_config).
  const ModelConfig model_config = read_model_config(options.model_path);
  const Tokenizer tokenizer = load_checked_tokenizer(options, model_config);
  const chat::ChatRenderer chat_renderer = choose_chat_renderer(options, tokenizer);

  dist::DisaggConfig config;
  for (int r = 1; r <= counts.prefill; ++r) config.prefill_ranks.push_back(r);
  for (int r = counts.prefill + 1; r <= counts.prefill + counts.decode; ++r) config.decode_ranks.push_back(r);
  config.block_size = options.engine.block_size;
  config.max_seqs = options.engine.max_seqs;
  const int64_t model_context = model_config.context_length;
  config.context_length = options.engine.context_length <= 0 || options.engine.context_length > model_context
                              ? model_context
                              : options.engine.context_length;
  config.worker_timeout_s = options.worker_timeout_s;
  config.remote_prefill_min = options.remote_prefill_min;
  config.trace = !options.trace_path.empty();
  dist::DisaggFront front(comm, tokenizer, model_config, config);
  front.start(600.0);  // every worker's model loaded (a failed one says why)
  if (config.trace) {
    for (int rank = 1; rank <= counts.prefill + counts.decode; ++rank) {
      const dist::ClockRounds clock = front.clock_of(rank);
      if (clock.rounds() == 0) {
        say(options,
            fmt::format("{}: clock not measured (no answer); its trace assumes the front's",
                        worker_label(rank, counts)),
            "warning");
        continue;
      }
      say(options, fmt::format("{}: clock {:+.1f} us from the front's (within {:.1f} us, {} round trips)",
                               worker_label(rank, counts), static_cast<double>(clock.offset_ns()) / 1e3,
                               static_cast<double>(clock.round_trip_ns()) / 2e3, clock.rounds()));
    }
  }
  end_loading(signals);
  http.attach(&front, served, chat_renderer);
  say(options, fmt::format("ready — model {}, chat format {}, {} prefill + {} decode workers, {} parallel each, "
                           "context {}, KV blocks of {} tokens",
                           served.names.front(), chat_renderer.name(), counts.prefill, counts.decode,
                           options.engine.max_seqs, config.context_length, config.block_size));

  const int signal = wait_for_signal(signals);
  say(options, fmt::format("{} received; no longer accepting, finishing admitted requests (up to {:.1f} s; "
                           "another SIGINT or SIGTERM exits at once)",
                           signal == SIGINT ? "SIGINT" : "SIGTERM", options.shutdown_timeout_s));
  exit_on_second_signal(signals);
  http.shutdown(options.shutdown_timeout_s);
  // A worker builds and sends its trace as it stops: more time for that.
  front.stop(config.trace ? 60.0 : 10.0);
  if (config.trace) write_job_trace(options, front, counts);
  bool all_up = true;
  for (const WorkerStatus& worker : front.workers()) all_up = all_up && worker.up;
  say(options, "stopped");
  return all_up;
}

}  // namespace

void serve_disaggregated(const ServeOptions& options) {
  const WorkerCounts counts = parse_workers(options.workers);
  TANDEM_CHECK_INPUT(options.draft_model_path.empty(), "--workers: --draft-model is for one process");
  MpiSession session;
  Communicator comm(session);
  const int expected = 1 + counts.prefill + counts.decode;
  TANDEM_CHECK_INPUT(comm.size() == expected, "--workers prefill:{},decode:{} needs {} ranks (mpirun -np {}), not {}",
                     counts.prefill, counts.decode, expected, expected, comm.size());
  bool all_up = true;
  if (comm.rank() == 0) {
    try {
      all_up = run_front(options, comm, counts);
    } catch (const std::exception& error) {
      // The workers would wait for the front forever: end the whole job.
      say(options, error.what(), "error");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    all_up = run_worker(options, comm, comm.rank() <= counts.prefill);
  }
  if (!all_up) {
    if (comm.rank() == 0)
      say(options, "a worker is down: leaving MPI without finalising (its fence could wait for the dead rank)",
          "warning");
    session.leave_without_finalizing();
  }
}

}  // namespace tandem::cli
