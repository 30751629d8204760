#include "dist/worker_loop.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "dist/disagg_wire.h"
#include "dist/worker_report.h"

namespace tandem::dist {

void run_worker_loop(MessagePump& pump, Engine& engine, int rank, int front_rank, const WorkerRole& role) {
  using Clock = std::chrono::steady_clock;
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kReportIntervalSeconds));
  Clock::time_point next_report = Clock::now();
  const auto handler = [&](const MessageInfo& info, std::vector<uint8_t>& bytes) {
    try {
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
  pump.post(front_rank, kStopped, to_bytes(nlohmann::json::object()));
  pump.flush(std::chrono::seconds(10));
}

}  // namespace tandem::dist
