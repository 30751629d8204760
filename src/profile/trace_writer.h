// Chrome trace-event JSON of a Profiler's trace (opens in Perfetto and chrome://tracing): one
// process, one track per pool thread. Track 0 is the stepping thread: each step, the ops
// inside it, and the pool chunks that thread ran inside those; tracks 1..N-1 are the pool's
// workers with their chunks, each named after the op it belongs to. Writing only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "profile/profiler.h"

namespace tandem {

// {"traceEvents": [...], "displayTimeUnit": "ns"}; times in microseconds from the
// profiler's creation. Call only while nothing runs on the profiled engine or pool.
nlohmann::json chrome_trace_json(const Profiler& profiler);
// Throws InputError when the file cannot be written.
void write_chrome_trace(const Profiler& profiler, const std::string& path);

}  // namespace tandem
