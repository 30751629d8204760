// What `tandem serve` is told (its flags), and the pieces of serving that a single process
// and the ranks of a multi-process job (serve_disagg.cpp) share: log lines, the chat
// template's choice, and the signal handling around loading and draining.
#pragma once

#include <signal.h>

#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_renderer.h"
#include "cli/kv_type_options.h"
#include "engine/engine.h"
#include "server/http/http_server.h"

namespace tandem::cli {

struct ServeOptions {
  std::string model_path;
  std::string tokenizer_path;
  server::ServerConfig http;
  EngineConfig engine;
  std::string chat_template;
  std::string chat_template_kwargs;  // JSON object text, parsed at start-up
  int threads = 0;
  double shutdown_timeout_s = 10.0;
  KvTypeFlags kv_types;
  std::string draft_model_path;
  std::string trace_path;
  std::vector<std::string> served_model_names;  // as given: values, maybe comma lists
  std::vector<std::string> allowed_origins;     // as given: values, maybe comma lists
  // --workers prefill:P,decode:D (under mpirun): rank 0 the front, then P prefill and D
  // decode ranks (serve_disagg.cpp); empty: one process.
  std::string workers;
  double worker_timeout_s = 10.0;    // --worker-timeout: silence after which a worker is down
  int64_t remote_prefill_min = 256;  // --remote-prefill-min: shorter prompts are prefilled on the decode rank
  int64_t pipeline_stages = 0;       // --pipeline S under mpirun; 0: one process
  int64_t tensor_parallel = 0;       // --tensor-parallel T under mpirun; 0: one process
};

// A line of the server's log on stderr: text, or one JSON object with --log-format json.
void say(const ServeOptions& options, const std::string& message, std::string_view level = "info");

// --chat-template NAME picks a built-in format; otherwise the model's own Jinja template
// (GGUF tokenizer.chat_template), falling back to ChatML when it has none.
chat::ChatRenderer choose_chat_renderer(const ServeOptions& options, const Tokenizer& tokenizer);

// The HTTP server's configuration from the flags (parsed template kwargs, CORS).
server::ServerConfig http_config_of(const ServeOptions& options);
// The names requests may give as `model` (--served-model-name; default: the model file's name).
server::ServedModel served_model_of(const ServeOptions& options);

// SIGINT and SIGTERM, blocked in the calling thread (and so in every thread it starts, so the
// signal reaches only this thread's wait, or while loading its handler); SIGPIPE ignored (a
// vanished client is a failed write, not a dead server).
sigset_t block_stop_signals();
// While the model loads there is nothing to drain: from begin_loading() to end_loading() a
// stop signal ends the process at once (and says so); after, wait_for_signal() takes them.
void begin_loading(const sigset_t& signals);
void end_loading(const sigset_t& signals);
// A server's requests come and go in megabytes (a long prompt, its ids, a /tokenize answer),
// freed on other threads than allocated them: glibc's defaults keep such memory resident
// (its mmap threshold rises to the largest block freed, and the worker threads' arenas are
// only trimmed past a threshold that rises with it). Fixed thresholds instead: blocks of
// 4 MiB and more are mapped and unmapped, and an arena gives back any free top past 8 MiB.
void return_freed_memory();
// Waits for SIGINT or SIGTERM.
int wait_for_signal(const sigset_t& signals);
// After the first stop signal: a second one ends the process at once (exit status 128 +
// the signal), without waiting for the drain. A thread of its own waits for it.
void exit_on_second_signal(const sigset_t& signals);

#ifdef TANDEM_WITH_MPI
// `tandem serve --workers ...`: this process's part of the job, by its MPI rank.
void serve_disaggregated(const ServeOptions& options);
#endif

}  // namespace tandem::cli
