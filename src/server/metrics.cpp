// Prometheus text exposition of the serving metrics (see metrics.h). Names follow the
// Prometheus conventions: base units (seconds), _total for counters.
#include "server/metrics.h"

#include <fmt/format.h>

namespace tandem::server {
namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string prometheus_label_value(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && seconds > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  const std::string before_le = labels.empty() ? "" : labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, before_le, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n{}_sum{} {}\n{}_count{} {}\n", name, before_le, count_, name, own,
                     sum_, name, own, count_);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}) {}

void Metrics::observe(const RequestEvent& e) {
  std::lock_guard lock(mutex_);
  if (e.finish_reason == FinishReason::Cancelled) {
    ++requests_cancelled_;
  } else {
    ++requests_ok_;
  }
  prompt_tokens_ += e.prompt_tokens;
  generated_tokens_ += e.completion_tokens;
  cached_tokens_ += e.cached_tokens;
  queue_.observe(e.queue_ms / 1000.0);
  e2e_.observe(e.e2e_ms / 1000.0);
  if (e.completion_tokens > 0) ttft_.observe(e.ttft_ms / 1000.0);
  for (double ms : e.itl_ms) itl_.observe(ms / 1000.0);
}

void Metrics::count_rejected() {
  std::lock_guard lock(mutex_);
  ++requests_rejected_;
}

void Metrics::count(TransportEvent event) {
  std::lock_guard lock(mutex_);
  switch (event) {
    case TransportEvent::Shed: ++shed_; break;
    case TransportEvent::ReadTimeout: ++read_timeouts_; break;
    case TransportEvent::WriteTimeout: ++write_timeouts_; break;
    case TransportEvent::Disconnect: ++disconnects_; break;
    case TransportEvent::ConnectionRefused: ++connections_refused_; break;
  }
}

std::string Metrics::render(const EngineStats& s, const TransportStats& transport, std::string_view model_name) const {
  std::string out;
  const auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
  };
  const auto counter = [&](const char* name, const char* help, int64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  gauge("tandem_requests_running", "Requests admitted to the batch", static_cast<double>(s.running));
  gauge("tandem_requests_waiting", "Requests queued for admission", static_cast<double>(s.waiting));
  gauge("tandem_kv_blocks_total", "KV cache blocks in the pool", static_cast<double>(s.blocks.total));
  gauge("tandem_kv_blocks_used", "KV blocks referenced by sequences", static_cast<double>(s.blocks.used));
  gauge("tandem_kv_blocks_cached", "Unreferenced KV blocks kept for prefix reuse",
        static_cast<double>(s.blocks.cached));
  gauge("tandem_kv_blocks_free", "KV blocks holding nothing", static_cast<double>(s.blocks.free));
  gauge("tandem_kv_block_tokens", "Tokens per KV block", static_cast<double>(s.block_size));
  gauge("tandem_kv_block_bytes", "Bytes of K and V per block", static_cast<double>(s.bytes_per_block));
  const double ratio = s.blocks.lookup_tokens > 0
                           ? static_cast<double>(s.blocks.hit_tokens) / static_cast<double>(s.blocks.lookup_tokens)
                           : 0.0;
  gauge("tandem_prefix_cache_hit_ratio", "Prompt tokens served from the prefix cache / prompt tokens", ratio);
  counter("tandem_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache", s.blocks.hit_tokens);
  counter("tandem_preemptions_total", "Sequences preempted for lack of KV blocks", s.preemptions);
  counter("tandem_engine_steps_total", "Engine iterations run", s.steps);
  counter("tandem_spec_drafted_tokens_total", "Speculative decoding: tokens proposed and verified", s.drafted_tokens);
  counter("tandem_spec_accepted_tokens_total", "Speculative decoding: proposed tokens accepted", s.accepted_tokens);
  counter("tandem_grammar_masks_off_thread_total", "Grammar token masks computed off the engine thread",
          s.grammar_masks_off_thread);
  counter("tandem_grammar_masks_stopped_total", "Grammar masks stopped half way because their request ended",
          s.grammar_masks_stopped);
  counter("tandem_grammar_samples_awaited_total",
          "Samples that waited a step or more for their grammar mask (other sequences stepped on)",
          s.grammar_samples_awaited);
  std::lock_guard lock(mutex_);
  counter("tandem_requests_finished_total", "Requests that ran to a finish reason", requests_ok_);
  counter("tandem_requests_cancelled_total", "Requests cancelled (client gone or shutdown)", requests_cancelled_);
  counter("tandem_requests_rejected_total", "Requests refused with an error status", requests_rejected_);
  counter("tandem_prompt_tokens_total", "Prompt tokens of ended requests", prompt_tokens_);
  counter("tandem_generation_tokens_total", "Generated tokens of ended requests", generated_tokens_);
  counter("tandem_cached_prompt_tokens_total", "Prompt tokens of ended requests served from cache", cached_tokens_);

  gauge("tandem_http_connections_open", "Open client connections", static_cast<double>(transport.open_connections));
  gauge("tandem_http_requests_in_engine", "Generation requests submitted and not finished",
        static_cast<double>(transport.requests_in_engine));
  counter("tandem_http_requests_shed_total", "Requests answered 503 because --parallel + --max-queue were full", shed_);
  counter("tandem_http_read_timeouts_total", "Connections closed because a request did not arrive in time",
          read_timeouts_);
  counter("tandem_http_write_timeouts_total", "Connections closed because the client stopped reading", write_timeouts_);
  counter("tandem_http_disconnects_total", "Generation requests whose client left before the end", disconnects_);
  counter("tandem_http_connections_refused_total", "Connections answered 503 past --max-connections",
          connections_refused_);
  ttft_.render(out, "tandem_time_to_first_token_seconds", "Arrival to first generated token");
  itl_.render(out, "tandem_inter_token_latency_seconds", "Gap between consecutive generated tokens");
  e2e_.render(out, "tandem_e2e_request_latency_seconds", "Arrival to the end of the request");
  queue_.render(out, "tandem_queue_time_seconds", "Arrival to admission into the batch");

  // The series vLLM and llama-server have too, under their names (vLLM's V1 names, and the
  // older gpu_cache_usage_perc and time_per_output_token_seconds its first dashboards read).
  // Values are the tandem_* ones above: KV usage is blocks referenced / blocks in the pool.
  const double kv_usage =
      s.blocks.total > 0 ? static_cast<double>(s.blocks.used) / static_cast<double>(s.blocks.total) : 0.0;
  const std::string vllm_labels = fmt::format("model_name=\"{}\"", prometheus_label_value(model_name));
  const auto vllm_sample = [&](const char* type, const char* name, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, vllm_labels, value);
  };
  vllm_sample("gauge", "vllm:num_requests_running", "Requests in the batch", static_cast<double>(s.running));
  vllm_sample("gauge", "vllm:num_requests_waiting", "Requests waiting", static_cast<double>(s.waiting));
  vllm_sample("gauge", "vllm:kv_cache_usage_perc", "Fraction of KV blocks in use (0-1)", kv_usage);
  vllm_sample("gauge", "vllm:gpu_cache_usage_perc", "Fraction of KV blocks in use (0-1)", kv_usage);
  vllm_sample("counter", "vllm:prompt_tokens_total", "Prompt tokens of ended requests",
              static_cast<double>(prompt_tokens_));
  vllm_sample("counter", "vllm:generation_tokens_total", "Generated tokens of ended requests",
              static_cast<double>(generated_tokens_));
  vllm_sample("counter", "vllm:num_preemptions_total", "Preemptions", static_cast<double>(s.preemptions));
  vllm_sample("counter", "vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
              static_cast<double>(s.blocks.lookup_tokens));
  vllm_sample("counter", "vllm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache",
              static_cast<double>(s.blocks.hit_tokens));
  ttft_.render(out, "vllm:time_to_first_token_seconds", "Time to first token", vllm_labels);
  itl_.render(out, "vllm:inter_token_latency_seconds", "Inter-token latency", vllm_labels);
  itl_.render(out, "vllm:time_per_output_token_seconds", "Inter-token latency", vllm_labels);
  e2e_.render(out, "vllm:e2e_request_latency_seconds", "End-to-end request latency", vllm_labels);
  queue_.render(out, "vllm:request_queue_time_seconds", "Time waiting for admission", vllm_labels);
  counter("llamacpp:prompt_tokens_total", "Prompt tokens of ended requests", prompt_tokens_);
  counter("llamacpp:tokens_predicted_total", "Generated tokens of ended requests", generated_tokens_);
  counter("llamacpp:n_decode_total", "Engine iterations run", s.steps);
  gauge("llamacpp:kv_cache_usage_ratio", "Fraction of KV blocks in use (0-1)", kv_usage);
  gauge("llamacpp:kv_cache_tokens", "Tokens the KV blocks in use can hold",
        static_cast<double>(s.blocks.used * s.block_size));
  gauge("llamacpp:requests_processing", "Requests in the batch", static_cast<double>(s.running));
  gauge("llamacpp:requests_deferred", "Requests waiting", static_cast<double>(s.waiting));
  return out;
}

}  // namespace tandem::server
