// Chrome trace-event JSON of a Profiler's trace (opens in Perfetto and chrome://tracing): one
// process, one track per pool thread. Track 0 is the stepping thread: each step, the ops
// inside it, and the pool chunks that thread ran inside those; tracks 1..N-1 are the pool's
// workers with their chunks, each named after the op it belongs to; a server's requests are a
// second process, a track each; named spans (TraceSpan: a pipeline's stages, KV transfers) a
// process per name. Several processes' traces merge into one file (a multi-process job's,
// each under its rank's name). Writing only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/profiler.h"

namespace tandem {

// {"traceEvents": [...], "displayTimeUnit": "ns"}; times in microseconds from the
// profiler's creation. Call only while nothing runs on the profiled engine or pool.
nlohmann::json chrome_trace_json(const Profiler& profiler);
// The same with times from `origin_ns` (steady-clock ns of this process): another process's
// origin brought into this one's clock, so that traces of several processes line up.
nlohmann::json chrome_trace_json(const Profiler& profiler, int64_t origin_ns);
// One trace of several: part i's processes are renumbered (pids i * 1000 + p) and their names
// prefixed with its label ("rank 2 (decode): tandem"). Events are kept as they are otherwise.
nlohmann::json merge_chrome_traces(const std::vector<std::pair<std::string, nlohmann::json>>& parts);
void write_chrome_trace(const nlohmann::json& trace, const std::string& path);
// Throws InputError when the file cannot be written.
void write_chrome_trace(const Profiler& profiler, const std::string& path);

}  // namespace tandem
