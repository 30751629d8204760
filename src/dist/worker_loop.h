// The life of a worker rank of a disaggregated job, whatever its role: its MPI thread hands
// each arriving message to the role (a malformed one is logged and dropped: the rank keeps
// serving), answers the front's clock round trips, reports to the front every
// kReportIntervalSeconds, and when the role says stop, stops the engine (whatever is still in
// flight ends, its events posted), sends the front its trace (with --trace), tells the front
// it stopped, and returns once everything posted has gone.
#pragma once

#include <functional>
#include <vector>

#include "dist/message_pump.h"
#include "engine/engine.h"
#include "profile/profiler.h"

namespace tandem::dist {

struct WorkerRole {
  const char* name = "";  // "prefill" or "decode", for log lines
  std::function<void(const MessageInfo& info, std::vector<uint8_t>& bytes)> on_message;
  std::function<void()> send_report;
  std::function<bool()> stopping;  // the front said stop
  // With --trace: the rank's engine's profiler, whose trace goes to the front at stop.
  const Profiler* profiler = nullptr;
};

// Returns whether the front said every worker was up when it stopped them (kStop's
// "finalize"): when one was down, MPI must not be finalised (MpiSession says why).
bool run_worker_loop(MessagePump& pump, Engine& engine, int rank, int front_rank, const WorkerRole& role);

}  // namespace tandem::dist
