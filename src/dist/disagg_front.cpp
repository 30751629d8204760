#include "dist/disagg_front.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "base/error.h"
#include "dist/disagg_wire.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "profile/trace_writer.h"

namespace tandem::dist {

using nlohmann::json;

namespace {

double ms_since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

// Round trips per worker to measure its clock: the shortest counts, and one right after
// another finds both ranks awake (a rank sleeping between polls lengthens a round trip).
constexpr int kClockRounds = 16;
// How long either side polls without sleeping after a clock message (MessagePump::stay_awake_for).
constexpr std::chrono::milliseconds kClockAwake{2};

}  // namespace

DisaggFront::DisaggFront(Communicator& comm, const Tokenizer& tokenizer, const ModelConfig& model, DisaggConfig config)
    : tokenizer_(tokenizer), model_(model), config_(std::move(config)), pump_(comm) {
  if (config_.trace) trace_.enable_trace(1, 16);
  const Clock::time_point now = Clock::now();
  for (int rank : config_.prefill_ranks) workers_[rank] = Worker{rank, true, true, false, false, {}, now, {}, 0};
  for (int rank : config_.decode_ranks) workers_[rank] = Worker{rank, false, true, false, false, {}, now, {}, 0};
}

DisaggFront::~DisaggFront() { stop(5.0); }

void DisaggFront::start(double timeout_s) {
  thread_ = std::thread([this] { loop(); });
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    std::string missing;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [rank, worker] : workers_) {
        TANDEM_CHECK_INPUT(worker.up, "{} worker rank {} did not start: {}", worker.prefill ? "prefill" : "decode",
                           rank, worker.down_reason);
        if (!worker.reported)
          missing +=
              fmt::format("{}{} (rank {})", missing.empty() ? "" : ", ", worker.prefill ? "prefill" : "decode", rank);
      }
    }
    if (missing.empty()) break;
    TANDEM_CHECK_INPUT(Clock::now() < deadline, "workers not ready after {:.0f} s: {}", timeout_s, missing);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!config_.trace) return;
  {
    std::lock_guard lock(mutex_);
    measuring_clocks_ = true;  // the loop's tick asks each worker in turn
  }
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lock(mutex_);
    bool done = true;
    for (const auto& [rank, worker] : workers_) done = done && (!worker.up || worker.clock.rounds() >= kClockRounds);
    // Past the deadline a worker's trace lines up only as well as the rounds it answered.
    if (done || Clock::now() >= deadline) {
      measuring_clocks_ = false;
      return;
    }
  }
}

ClockRounds DisaggFront::clock_of(int rank) const {
  std::lock_guard lock(mutex_);
  const auto it = workers_.find(rank);
  return it == workers_.end() ? ClockRounds{} : it->second.clock;
}

std::map<int, json> DisaggFront::take_traces() {
  std::lock_guard lock(mutex_);
  return std::move(traces_);
}

json DisaggFront::front_trace() const {
  json trace = chrome_trace_json(trace_);
  // The front runs no engine: the trace writer's empty engine process is left out.
  std::set<int> with_events;
  for (const json& event : trace["traceEvents"])
    if (event.value("ph", "") != "M") with_events.insert(event.value("pid", 0));
  json kept = json::array();
  for (json& event : trace["traceEvents"])
    if (with_events.count(event.value("pid", 0)) != 0) kept.push_back(std::move(event));
  trace["traceEvents"] = std::move(kept);
  return trace;
}

void DisaggFront::trace_end(uint64_t id, const InFlight& request, FinishReason reason) {
  if (!config_.trace) return;
  std::string name = fmt::format("request {} to rank {}", id, request.decode_rank);
  if (request.prefill_rank >= 0) name += fmt::format(", prompt from rank {}", request.prefill_rank);
  trace_.trace_span(
      {.process = "requests",
       .track = fmt::format("request {}", id),
       .name = name + fmt::format(" ({})", finish_reason_name(reason)),
       .category = "request",
       .start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(request.arrival.time_since_epoch()).count(),
       .end_ns = Profiler::now_ns(),
       .tokens = request.prompt_tokens});
}

void DisaggFront::ask_clocks() {
  for (auto& [rank, worker] : workers_) {
    if (!worker.up || worker.clock_asked || worker.clock.rounds() >= kClockRounds) continue;
    pump_.post(rank, kClock, to_bytes({{"t0", Profiler::now_ns()}}));
    pump_.stay_awake_for(kClockAwake);  // to take the answer as it comes
    worker.clock_asked = true;
  }
}

void DisaggFront::stop(double timeout_s) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;  // the loop sends kStop to the live workers and ends once they stopped
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    bool all_stopped = true;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [rank, worker] : workers_) all_stopped = all_stopped && (worker.stopped || !worker.up);
      if (all_stopped || Clock::now() >= deadline) {
        give_up_ = true;  // the loop ends now, whoever has not answered
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  thread_.join();
  // Whatever is left ends now (its worker never answered).
  std::vector<std::pair<EventCallback, RequestEvent>> ended;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, request] : in_flight_) {
      RequestEvent event;
      event.request_id = id;
      event.finished = true;
      event.finish_reason = FinishReason::Cancelled;
      trace_end(id, request, event.finish_reason);
      ended.emplace_back(std::move(request.on_event), std::move(event));
    }
    in_flight_.clear();
  }
  for (auto& [callback, event] : ended)
    if (callback) callback(std::move(event));
}

uint64_t DisaggFront::submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) {
  // What an engine would refuse is refused here, before anything is sent.
  check_submission(prompt, params, model_.vocab_size, config_.context_length, /*has_draft_model=*/false);
  { const Sampler check(params.sampling, model_.vocab_size); }  // throws for unusable sampling options
  std::lock_guard lock(mutex_);
  TANDEM_CHECK_INPUT(!stopping_, "the server is shutting down");
  Worker* decode = pick(false);
  TANDEM_CHECK_INPUT(decode != nullptr, "no decode worker is up");
  // The prompt's full blocks before the last position come from a prefill rank (an embedding
  // request, which pools every position's hidden state, is computed whole on the decode rank).
  const bool remote = params.pooling == Pooling::None &&
                      static_cast<int64_t>(prompt.size()) >= std::max<int64_t>(1, config_.remote_prefill_min);
  Worker* prefill = remote ? pick(true) : nullptr;
  const int64_t n_blocks = prefill ? (static_cast<int64_t>(prompt.size()) - 1) / config_.block_size : 0;
  if (n_blocks == 0) prefill = nullptr;
  const uint64_t id = next_id_++;
  pump_.post(decode->rank, kSubmit,
             to_bytes({{"id", id},
                       {"prompt", prompt},
                       {"params", params_to_json(params)},
                       {"blocks", n_blocks},
                       {"prefill_rank", prefill ? prefill->rank : -1}}));
  ++decode->in_flight;
  if (prefill) prefill->in_flight += n_blocks;
  in_flight_[id] = InFlight{decode->rank, prefill ? prefill->rank : -1, n_blocks, std::move(on_event), Clock::now()};
  in_flight_[id].prompt_tokens = static_cast<int64_t>(prompt.size());
  return id;
}

DisaggFront::Worker* DisaggFront::pick(bool prefill) {
  Worker* best = nullptr;
  for (auto& [rank, worker] : workers_)
    if (worker.prefill == prefill && worker.up && worker.reported && (!best || worker.in_flight < best->in_flight))
      best = &worker;
  return best;
}

void DisaggFront::cancel(uint64_t request_id) {
  std::lock_guard lock(mutex_);
  const auto it = in_flight_.find(request_id);
  if (it != in_flight_.end()) pump_.post(it->second.decode_rank, kCancel, to_bytes({{"id", request_id}}));
}

void DisaggFront::cancel_all() {
  std::lock_guard lock(mutex_);
  for (const auto& [id, request] : in_flight_) pump_.post(request.decode_rank, kCancel, to_bytes({{"id", id}}));
}

void DisaggFront::cancel_waiting() {
  std::lock_guard lock(mutex_);
  for (const auto& [rank, worker] : workers_)
    if (!worker.prefill && worker.up) pump_.post(rank, kCancelWaiting, to_bytes(json::object()));
}

EngineStats DisaggFront::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats total;
  total.context_length = config_.context_length;
  total.block_size = config_.block_size;
  for (const auto& [rank, worker] : workers_) {
    if (worker.prefill || !worker.up) continue;  // the job's KV and batch are the decode ranks'
    const EngineStats& s = worker.report.engine;
    total.running += s.running;
    total.waiting += s.waiting;
    total.blocks.total += s.blocks.total;
    total.blocks.used += s.blocks.used;
    total.blocks.cached += s.blocks.cached;
    total.blocks.free += s.blocks.free;
    total.blocks.lookup_tokens += s.blocks.lookup_tokens;
    total.blocks.hit_tokens += s.blocks.hit_tokens;
    total.bytes_per_block = s.bytes_per_block;
    total.steps += s.steps;
    total.preemptions += s.preemptions;
  }
  return total;
}

std::vector<WorkerStatus> DisaggFront::workers() const {
  std::lock_guard lock(mutex_);
  std::vector<WorkerStatus> out;
  for (const auto& [rank, w] : workers_) {
    WorkerStatus s;
    s.rank = rank;
    s.role = w.prefill ? "prefill" : "decode";
    s.up = w.up;
    s.down_reason = w.down_reason;
    s.pid = w.report.pid;
    s.in_flight = w.in_flight;
    s.running = w.report.engine.running;
    s.waiting = w.report.engine.waiting;
    s.kv_bytes_sent = w.report.kv_bytes_sent;
    s.kv_bytes_received = w.report.kv_bytes_received;
    s.kv_send_seconds = w.report.kv_send_seconds;
    s.kv_wait_seconds = w.report.kv_wait_seconds;
    s.requests_done = w.report.requests_done;
    out.push_back(std::move(s));
  }
  return out;
}

void DisaggFront::on_event(RequestEvent event) {
  EventCallback callback;
  {
    std::lock_guard lock(mutex_);
    const auto it = in_flight_.find(event.request_id);
    if (it == in_flight_.end()) return;  // ended already (its worker was counted down)
    InFlight& request = it->second;
    // The job's clocks are the front's: the client waited from its arrival here.
    if (!request.first_token_seen && !event.tokens.empty()) {
      request.first_token_seen = true;
      request.ttft_ms = ms_since(request.arrival);
    }
    if (!event.finished) {
      callback = request.on_event;
    } else {
      const double e2e = ms_since(request.arrival);
      event.queue_ms += std::max(0.0, e2e - event.e2e_ms);  // the hops to and from the decode rank
      event.e2e_ms = e2e;
      if (request.first_token_seen) event.ttft_ms = request.ttft_ms;
      if (const auto w = workers_.find(request.decode_rank); w != workers_.end()) --w->second.in_flight;
      if (const auto w = workers_.find(request.prefill_rank); w != workers_.end())
        w->second.in_flight -= request.blocks;
      trace_end(it->first, request, event.finish_reason);
      callback = std::move(request.on_event);
      in_flight_.erase(it);
    }
  }
  if (callback) callback(std::move(event));
}

void DisaggFront::mark_down(Worker& worker, const std::string& reason,
                            std::vector<std::pair<EventCallback, RequestEvent>>& ended) {
  if (!worker.up) return;
  worker.up = false;
  worker.down_reason = reason;
  pump_.forget_rank(worker.rank);
  for (const auto& [rank, other] : workers_)
    if (other.up) pump_.post(rank, kWorkerDown, to_bytes({{"rank", worker.rank}, {"reason", reason}}));
  if (worker.prefill) return;  // its decode ranks fail the imports it owed them
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.decode_rank != worker.rank) {
      ++it;
      continue;
    }
    RequestEvent event;
    event.request_id = it->first;
    event.finished = true;
    event.finish_reason = FinishReason::Error;
    event.error = fmt::format("decode worker rank {} is down ({})", worker.rank, reason);
    event.e2e_ms = ms_since(it->second.arrival);
    if (const auto p = workers_.find(it->second.prefill_rank); p != workers_.end())
      p->second.in_flight -= it->second.blocks;
    trace_end(it->first, it->second, event.finish_reason);
    ended.emplace_back(std::move(it->second.on_event), std::move(event));
    it = in_flight_.erase(it);
  }
  worker.in_flight = 0;
}

void DisaggFront::check_timeouts() {
  std::vector<std::pair<EventCallback, RequestEvent>> ended;
  {
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (auto& [rank, worker] : workers_) {
      if (!worker.up || worker.stopped || !worker.reported) continue;  // start() waits for the first report
      // Asked to stop, a tracing worker stops reporting and may take a while to build and
      // send its trace: stop() waits for it up to its own timeout instead.
      if (stop_sent_ && config_.trace) continue;
      const double silent_s = std::chrono::duration<double>(now - worker.last_report).count();
      if (silent_s > config_.worker_timeout_s)
        mark_down(worker, fmt::format("no report for {:.1f} s; pid {}", silent_s, worker.report.pid), ended);
    }
  }
  for (auto& [callback, event] : ended)
    if (callback) callback(std::move(event));
}

void DisaggFront::on_message(const MessageInfo& info, std::vector<uint8_t>& bytes) {
  json message = from_bytes(bytes);
  switch (info.tag) {
    case kEvent: on_event(event_from_json(message)); break;
    case kReport: {
      std::lock_guard lock(mutex_);
      const auto it = workers_.find(info.source);
      if (it == workers_.end()) break;
      it->second.report = report_from_json(message);
      it->second.reported = true;
      it->second.last_report = Clock::now();
      break;
    }
    case kFailed: {
      std::vector<std::pair<EventCallback, RequestEvent>> ended;
      {
        std::lock_guard lock(mutex_);
        if (const auto it = workers_.find(info.source); it != workers_.end())
          mark_down(it->second, message.at("error").get<std::string>(), ended);
      }
      for (auto& [callback, event] : ended)
        if (callback) callback(std::move(event));
      break;
    }
    case kClock: {
      const int64_t t1 = Profiler::now_ns();
      std::lock_guard lock(mutex_);
      const auto it = workers_.find(info.source);
      if (it == workers_.end()) break;
      it->second.clock.add(message.at("t0").get<int64_t>(), message.at("tw").get<int64_t>(), t1);
      it->second.clock_asked = false;
      if (measuring_clocks_) ask_clocks();  // the next round at once, while both ranks are awake
      break;
    }
    case kTrace: {
      std::lock_guard lock(mutex_);
      traces_[info.source] = std::move(message);
      break;
    }
    case kStopped: {
      std::lock_guard lock(mutex_);
      if (const auto it = workers_.find(info.source); it != workers_.end()) it->second.stopped = true;
      break;
    }
    default: break;
  }
}

void DisaggFront::loop() {
  const auto handler = [this](const MessageInfo& info, std::vector<uint8_t>& bytes) {
    try {
      on_message(info, bytes);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tandem front: dropped a message (tag %d from rank %d): %s\n", info.tag, info.source,
                   error.what());
    }
  };
  const auto tick = [this] {
    check_timeouts();
    std::lock_guard lock(mutex_);
    if (measuring_clocks_) ask_clocks();
    if (stopping_ && !stop_sent_) {
      // A dead rank would hold every other in MPI_Finalize (MpiSession::leave_without_finalizing).
      bool all_up = true;
      for (const auto& [rank, worker] : workers_) all_up = all_up && worker.up;
      for (const auto& [rank, worker] : workers_) {
        if (!worker.up || worker.stopped) continue;
        json stop = {{"finalize", all_up}};
        // The trace's origin on the worker's clock: its events' times are then the front's.
        if (config_.trace) stop["trace_origin"] = worker.clock.to_worker(trace_.origin_ns());
        pump_.post(rank, kStop, to_bytes(stop));
      }
      stop_sent_ = true;
    }
  };
  pump_.run(handler, tick, [this] {
    std::lock_guard lock(mutex_);
    return !give_up_;
  });
  // What is still posted (a kStop) goes before MPI is finalised; a worker that takes nothing
  // for a second is not waited for.
  pump_.flush(std::chrono::seconds(1));
  std::lock_guard lock(mutex_);
  for (const auto& [rank, worker] : workers_) pump_.forget_rank(rank);
  pump_.pump_once([](const MessageInfo&, std::vector<uint8_t>&) {});
}

}  // namespace tandem::dist
