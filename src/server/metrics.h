// Metrics: serving counters and latency histograms, rendered as Prometheus text. Fed one
// finished request at a time (its final engine event) plus an engine stats snapshot at
// scrape time. Thread-safe; owns no engine state.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generation_service.h"

namespace tandem::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds in seconds, ascending
  void observe(double seconds);
  // Appends the _bucket/_sum/_count lines of `name`.
  // labels: empty, or `name="value"` pairs put before each bucket's le.
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // [bounds + 1] per bucket (not cumulative); last is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// What the HTTP transport adds to a scrape: its own gauges at that moment.
struct TransportStats {
  int64_t open_connections = 0;
  int64_t requests_in_engine = 0;  // generation requests submitted and not yet finished
};

// Why the transport turned a client away or dropped it (tandem_http_*_total).
enum class TransportEvent { Shed, ReadTimeout, WriteTimeout, Disconnect, ConnectionRefused };

class Metrics {
 public:
  Metrics();
  // A request ended (finished, stopped or cancelled): its latencies and token counts.
  void observe(const RequestEvent& final_event);
  void count_rejected();
  void count(TransportEvent event);
  // The tandem_* series, then the ones vLLM and llama-server also have under their names
  // (vllm:*, labelled model_name="<model_name>" as vLLM labels them; llamacpp:*), so the
  // dashboards built for those servers read this one.
  std::string render(const EngineStats& stats, const TransportStats& transport = {},
                     std::string_view model_name = "") const;

 private:
  mutable std::mutex mutex_;
  Histogram ttft_, itl_, e2e_, queue_;
  int64_t requests_ok_ = 0, requests_cancelled_ = 0, requests_rejected_ = 0;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_tokens_ = 0;
  int64_t shed_ = 0, read_timeouts_ = 0, write_timeouts_ = 0, disconnects_ = 0, connections_refused_ = 0;
};

}  // namespace tandem::server
