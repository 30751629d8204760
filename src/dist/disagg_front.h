// DisaggFront: rank 0 of a disaggregated job, what the HTTP server generates through. It
// checks each request as an engine would, routes it to the live decode rank with the fewest
// requests in flight, and names the live prefill rank with the fewest prompt blocks in flight
// to compute the prompt's head (the decode rank asks it for the blocks its own prefix cache
// lacks) unless the prompt is shorter than remote_prefill_min; token events come back from the decode rank to the
// request's callback. A worker that has not reported for `worker_timeout_s` is down: its requests end with an error
// naming it, the other workers are told to give up on it, and routing skips it (with no
// prefill rank left, decode ranks compute whole prompts; with no decode rank, requests are
// refused). With `trace`, it measures each worker's clock against its own at start, traces
// each request from its arrival to its end, and collects the workers' Chrome traces, their
// times from its own origin, at stop. Runs the rank's MPI thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/clock_rounds.h"
#include "dist/message_pump.h"
#include "dist/worker_report.h"
#include "engine/generation_service.h"
#include "model/model_config.h"
#include "profile/profiler.h"

namespace tandem::dist {

struct DisaggConfig {
  std::vector<int> prefill_ranks;
  std::vector<int> decode_ranks;
  int32_t block_size = 16;     // the workers' --kv-block
  int32_t max_seqs = 4;        // each decode rank's --parallel
  int64_t context_length = 0;  // the workers' (--ctx bounded by the model's)
  double worker_timeout_s = 10.0;
  // Prompts shorter than this are prefilled on their decode rank: on a prefill rank they would
  // queue behind long prompts (TTFT), and on the decode rank they cost about a step.
  int64_t remote_prefill_min = 256;
  // --trace: every worker traces its engine; the front collects the traces at stop.
  bool trace = false;
};

class DisaggFront final : public GenerationService {
 public:
  DisaggFront(Communicator& comm, const Tokenizer& tokenizer, const ModelConfig& model, DisaggConfig config);
  ~DisaggFront() override;

  // Starts the MPI thread and waits until every worker has reported once (its model loaded),
  // up to `timeout_s`; InputError naming the ones that did not.
  void start(double timeout_s);
  // Tells every live worker to stop, waits for them (up to `timeout_s`), stops the MPI thread.
  // Requests still in flight end Cancelled.
  void stop(double timeout_s);

  // With `trace`: after start(), a worker's clock against the front's; after stop(), the
  // traces of the workers that sent one before they stopped, by rank, and the front's own
  // (a track per request: routed to its ranks, until it ended), times from the front's origin
  // (when it was made).
  ClockRounds clock_of(int rank) const;
  std::map<int, nlohmann::json> take_traces();
  nlohmann::json front_trace() const;

  uint64_t submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) override;
  void cancel(uint64_t request_id) override;
  void cancel_all() override;
  void cancel_waiting() override;
  EngineStats stats() const override;
  int64_t context_length() const override { return config_.context_length; }
  int32_t max_seqs() const override { return config_.max_seqs * static_cast<int32_t>(config_.decode_ranks.size()); }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const ModelConfig& model_config() const override { return model_; }
  std::vector<WorkerStatus> workers() const override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Worker {
    int rank = 0;
    bool prefill = false;
    bool up = true;
    bool reported = false;
    bool stopped = false;
    std::string down_reason;
    Clock::time_point last_report;
    WorkerReport report;
    int64_t in_flight = 0;     // decode: requests; prefill: prompt blocks asked of it
    ClockRounds clock{};       // with `trace`: its clock against the front's
    bool clock_asked = false;  // a kClock round trip to it is under way
  };
  struct InFlight {
    int decode_rank = 0;
    int prefill_rank = -1;
    int64_t blocks = 0;
    EventCallback on_event;
    Clock::time_point arrival;
    bool first_token_seen = false;
    double ttft_ms = 0.0;
    int64_t prompt_tokens = 0;
  };

  void loop();
  void on_message(const MessageInfo& info, std::vector<uint8_t>& bytes);
  void on_event(RequestEvent event);
  void check_timeouts();
  void ask_clocks();                                                          // the mutex is held
  void trace_end(uint64_t id, const InFlight& request, FinishReason reason);  // with `trace`
  // Marks `rank` down and fails the requests it held; the mutex is held.
  void mark_down(Worker& worker, const std::string& reason, std::vector<std::pair<EventCallback, RequestEvent>>& ended);
  Worker* pick(bool prefill);  // the mutex is held

  const Tokenizer& tokenizer_;
  const ModelConfig& model_;
  const DisaggConfig config_;
  Profiler trace_;  // with `trace`: the front's spans; its origin is the job trace's
  MessagePump pump_;
  mutable std::mutex mutex_;
  std::map<int, Worker> workers_;
  std::unordered_map<uint64_t, InFlight> in_flight_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool stop_sent_ = false;                // kStop posted to the live workers
  bool give_up_ = false;                  // stop(): every worker stopped, or the wait is over; the loop ends
  bool measuring_clocks_ = false;         // start(), with `trace`: kClock round trips under way
  std::map<int, nlohmann::json> traces_;  // kTrace, by rank
  std::thread thread_;
};

}  // namespace tandem::dist
