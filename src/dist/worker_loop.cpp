#include "dist/worker_loop.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "dist/disagg_wire.h"
#include "dist/worker_report.h"
#include "profile/trace_writer.h"

namespace tandem::dist {

bool run_worker_loop(MessagePump& pump, Engine& engine, int rank, int front_rank, const WorkerRole& role) {
  using Clock = std::chrono::steady_clock;
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kReportIntervalSeconds));
  Clock::time_point next_report = Clock::now();
  std::optional<int64_t> trace_origin;  // the front's, on this rank's clock (kStop says it)
  bool all_up = true;                   // kStop says whether a worker was down
  const auto handler = [&](const MessageInfo& info, std::vector<uint8_t>& bytes) {
    try {
      if (info.tag == kClock) {
        // Read the clock as soon as the round trip arrives: the time before the answer goes
        // out counts against the front's estimate only within the round trip it measures.
        const int64_t now = Profiler::now_ns();
        const nlohmann::json ping = from_bytes(bytes);
        pump.post(info.source, kClock, to_bytes({{"t0", ping.at("t0").get<int64_t>()}, {"tw", now}}));
        // The next round follows at once: take it awake (a sleep's wake-up would lengthen it).
        pump.stay_awake_for(std::chrono::milliseconds(2));
        return;
      }
      if (info.tag == kStop) {
        const nlohmann::json stop = from_bytes(bytes);
        if (stop.contains("trace_origin")) trace_origin = stop.at("trace_origin").get<int64_t>();
        all_up = stop.value("finalize", true);
      }
      role.on_message(info, bytes);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tandem %s rank %d: dropped a message (tag %d from rank %d): %s\n", role.name, rank,
                   info.tag, info.source, error.what());
    }
  };
  const auto tick = [&] {
    if (Clock::now() < next_report) return;
    next_report = Clock::now() + interval;
    role.send_report();
  };
  pump.run(handler, tick, [&] { return !role.stopping(); });
  engine.stop();
  if (role.profiler != nullptr && trace_origin) {
    // The last sends' completions are spans of the trace (a prefill rank's KV blocks): let
    // them finish first. Nothing runs on the engine now, as chrome_trace_json requires.
    pump.flush(std::chrono::seconds(2));
    try {
      std::vector<uint8_t> trace = to_bytes(chrome_trace_json(*role.profiler, *trace_origin));
      // One MPI message counts its bytes in an int.
      if (trace.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        throw std::length_error(fmt::format("the trace is {} bytes, more than one message carries", trace.size()));
      pump.post(front_rank, kTrace, std::move(trace));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tandem %s rank %d: no trace sent: %s\n", role.name, rank, error.what());
    }
  }
  pump.post(front_rank, kStopped, to_bytes(nlohmann::json::object()));
  pump.flush(std::chrono::seconds(10));
  return all_up;
}

}  // namespace tandem::dist
