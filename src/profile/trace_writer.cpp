// The trace writer (see trace_writer.h). Complete events ("ph": "X") only, so a viewer nests
// them by time on their track: steps contain ops, ops contain their chunks on track 0.
#include "profile/trace_writer.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem {
namespace {

constexpr int kPid = 1;           // the engine and its compute threads
constexpr int kRequestsPid = 2;   // the server's requests, a track each
constexpr int kFirstSpanPid = 3;  // then a process per TraceSpan::process name

std::string op_name(const TraceOp& op) {
  std::string name = is_layer_role(op.role) && op.layer >= 0 ? fmt::format("blk.{}.{}", op.layer, op_role_name(op.role))
                                                             : std::string(op_role_name(op.role));
  if (op.cost.has_weight) name += fmt::format(" {}", dtype_name(op.cost.weight_type));
  return name;
}

nlohmann::json complete_event(std::string name, std::string_view category, int tid, int64_t start_ns, int64_t end_ns,
                              int64_t origin_ns) {
  return {{"name", std::move(name)},
          {"cat", std::string(category)},
          {"ph", "X"},
          {"pid", kPid},
          {"tid", tid},
          {"ts", static_cast<double>(start_ns - origin_ns) / 1e3},
          {"dur", static_cast<double>(end_ns - start_ns) / 1e3}};
}

nlohmann::json thread_name(int tid, const std::string& name) {
  return {{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Index of `name` in `names`, appended when new.
int index_of(std::vector<std::string>& names, const std::string& name) {
  auto found = std::find(names.begin(), names.end(), name);
  if (found != names.end()) return static_cast<int>(found - names.begin());
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

void append_spans(const std::vector<TraceSpan>& spans, int64_t origin, nlohmann::json& events) {
  std::vector<std::string> processes;
  std::vector<std::vector<std::string>> tracks;  // [process] its tracks' names
  for (const TraceSpan& span : spans) {
    const int process = index_of(processes, span.process);
    const int pid = kFirstSpanPid + process;
    if (static_cast<size_t>(process) == tracks.size()) {
      tracks.emplace_back();
      events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", span.process}}}});
    }
    std::vector<std::string>& names = tracks[static_cast<size_t>(process)];
    const size_t known = names.size();
    const int tid = index_of(names, span.track);
    if (names.size() > known)
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", span.track}}}});
    nlohmann::json event = complete_event(span.name, span.category, tid, span.start_ns, span.end_ns, origin);
    event["pid"] = pid;
    nlohmann::json args = nlohmann::json::object();
    if (span.tokens >= 0) args["tokens"] = span.tokens;
    if (span.bytes >= 0) args["bytes"] = span.bytes;
    if (!args.empty()) event["args"] = std::move(args);
    events.push_back(std::move(event));
  }
}

}  // namespace

nlohmann::json chrome_trace_json(const Profiler& profiler) { return chrome_trace_json(profiler, profiler.origin_ns()); }

nlohmann::json chrome_trace_json(const Profiler& profiler, int64_t origin) {
  const std::vector<TraceOp>& ops = profiler.trace_ops();
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"args", {{"name", "tandem"}}}});
  const auto& chunks = profiler.trace_chunks();
  const int n_tracks = std::max<int>(1, static_cast<int>(chunks.size()));
  for (int tid = 0; tid < n_tracks; ++tid)
    events.push_back(thread_name(tid, tid == 0 ? "engine (pool thread 0)" : fmt::format("pool worker {}", tid)));

  for (const TraceStep& step : profiler.trace_steps()) {
    nlohmann::json event =
        complete_event(fmt::format("{} step", phase_name(step.phase)), "step", 0, step.start_ns, step.end_ns, origin);
    event["args"] = {{"tokens", step.n_tokens}};
    events.push_back(std::move(event));
  }
  for (const TraceOp& op : ops) {
    nlohmann::json event =
        complete_event(op_name(op), op_kind_name(op_kind(op.role)), 0, op.start_ns, op.end_ns, origin);
    event["args"] = {{"bytes", op.cost.bytes}, {"flops", op.cost.flops}};
    events.push_back(std::move(event));
  }
  // Ops are recorded when they end, in order, without overlap: sorted by start as well.
  for (size_t tid = 0; tid < chunks.size(); ++tid) {
    for (const TraceChunk& chunk : chunks[tid]) {
      // The op whose interval holds this chunk's start, if any (chunks of untimed loops have none).
      auto after = std::upper_bound(ops.begin(), ops.end(), chunk.start_ns,
                                    [](int64_t t, const TraceOp& op) { return t < op.start_ns; });
      std::string name = "chunk";
      if (after != ops.begin() && std::prev(after)->end_ns >= chunk.start_ns) name = op_name(*std::prev(after));
      events.push_back(
          complete_event(std::move(name), "chunk", static_cast<int>(tid), chunk.start_ns, chunk.end_ns, origin));
    }
  }
  // The server's requests: a second process, one track per request.
  const std::vector<TraceRequestSpan>& spans = profiler.trace_requests();
  if (!spans.empty())
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kRequestsPid}, {"args", {{"name", "requests"}}}});
  std::vector<uint64_t> named;
  for (const TraceRequestSpan& span : spans) {
    const int tid = static_cast<int>(span.request_id);
    if (std::find(named.begin(), named.end(), span.request_id) == named.end()) {
      named.push_back(span.request_id);
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", kRequestsPid},
                        {"tid", tid},
                        {"args", {{"name", fmt::format("request {}", span.request_id)}}}});
    }
    nlohmann::json event;
    switch (span.span) {
      case RequestSpan::Queue:
        event = complete_event("queue", "request", tid, span.start_ns, span.end_ns, origin);
        break;
      case RequestSpan::Prefill:
        event = complete_event(fmt::format("prefill chunk ({} tokens)", span.n_tokens), "request", tid, span.start_ns,
                               span.end_ns, origin);
        break;
      case RequestSpan::Decode:
        event = complete_event("decode step", "request", tid, span.start_ns, span.end_ns, origin);
        break;
      case RequestSpan::Preempted:
        event = {{"name", "preempted"}, {"cat", "request"},
                 {"ph", "i"},           {"s", "t"},
                 {"tid", tid},          {"ts", static_cast<double>(span.start_ns - origin) / 1e3}};
        break;
    }
    event["pid"] = kRequestsPid;
    events.push_back(std::move(event));
  }
  append_spans(profiler.trace_spans(), origin, events);
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

nlohmann::json merge_chrome_traces(const std::vector<std::pair<std::string, nlohmann::json>>& parts) {
  constexpr int kPidsPerPart = 1000;
  nlohmann::json events = nlohmann::json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& [label, trace] = parts[i];
    TANDEM_CHECK_INPUT(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array(),
                       "the trace of {} has no traceEvents", label);
    for (nlohmann::json event : trace["traceEvents"]) {
      const int pid = event.value("pid", 0);
      TANDEM_CHECK_INPUT(pid >= 0 && pid < kPidsPerPart, "the trace of {} has a process id {} out of range", label,
                         pid);
      event["pid"] = static_cast<int>(i) * kPidsPerPart + pid;
      if (event.value("name", "") == "process_name" && event.value("ph", "") == "M")
        event["args"]["name"] = label + ": " + event["args"].value("name", "");
      events.push_back(std::move(event));
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

void write_chrome_trace(const Profiler& profiler, const std::string& path) {
  write_chrome_trace(chrome_trace_json(profiler), path);
}

void write_chrome_trace(const nlohmann::json& trace, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  TANDEM_CHECK_INPUT(static_cast<bool>(out), "cannot write the trace to {}", path);
  out << trace.dump() << "\n";
  TANDEM_CHECK_INPUT(static_cast<bool>(out), "cannot write the trace to {}", path);
}

}  // namespace tandem
