// Tests of the Chrome trace of a profiled, traced engine run: well-formed JSON (parsed back
// from the file), every event complete with a non-negative duration on a named track, the
// events of each track nested (a step holds its ops, an op the chunks run inside it), and a
// track per request with its queue wait, prefill chunk and decode steps.
#include "profile/trace_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "base/error.h"
#include "engine/engine.h"
#include "profiled_model.h"

namespace tandem {
namespace {

using test_support::load_profiled_model;
using test_support::placeholder_tokenizer;
using test_support::TempDir;

struct Interval {
  double start = 0.0, end = 0.0;
  std::string name;
};

// True when the intervals form a forest: sorted by start (longer first on ties), each one
// either inside the innermost open one or after it ends. Times in microseconds, printed
// from integer nanoseconds, so a thousandth of a microsecond absorbs the rounding.
bool nested(std::vector<Interval> intervals, std::string& problem) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  constexpr double kSlack = 1e-3;
  std::vector<Interval> open;
  for (const Interval& interval : intervals) {
    while (!open.empty() && open.back().end <= interval.start + kSlack) open.pop_back();
    if (!open.empty() && interval.end > open.back().end + kSlack) {
      problem = interval.name + " overlaps " + open.back().name;
      return false;
    }
    open.push_back(interval);
  }
  return true;
}

TEST(ChromeTrace, EngineRunIsWellFormedWithNestedEventsPerThreadTrack) {
  TempDir dir;
  const std::shared_ptr<const Model> model = load_profiled_model(dir);
  const Tokenizer tokenizer = placeholder_tokenizer(model->config.vocab_size);
  ThreadPool pool(2);
  EngineConfig config;
  config.max_seqs = 2;
  config.max_batch_tokens = 32;
  Engine engine(model, tokenizer, config, pool);
  Profiler profiler;
  profiler.enable_trace(pool.size());
  pool.set_chunk_observer(&profiler);
  engine.set_profiler(&profiler);
  GenerationParams params;
  params.sampling.temperature = 0.0f;
  params.max_tokens = 6;
  params.ignore_eos = true;
  engine.submit({4, 8, 15, 16, 23, 42}, params, {});
  engine.submit({100, 200, 300}, params, {});
  engine.run_until_idle();
  pool.set_chunk_observer(nullptr);

  const std::string path = dir.file("trace.json");
  write_chrome_trace(profiler, path);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws if malformed
  ASSERT_TRUE(trace.contains("traceEvents"));
  using Track = std::pair<int, int>;  // pid (1: engine, 2: requests), tid
  std::map<Track, std::vector<Interval>> tracks;
  std::map<Track, std::string> track_names;
  int steps = 0, ops = 0, chunks = 0, queues = 0, prefill_chunks = 0, decode_steps = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph") && event.contains("pid") && event.contains("name")) << event.dump();
    if (event["ph"] == "M") {
      if (event["name"] == "thread_name")
        track_names[{event["pid"].get<int>(), event["tid"].get<int>()}] = event["args"]["name"].get<std::string>();
      continue;
    }
    ASSERT_EQ(event["ph"], "X") << event.dump();
    const double ts = event["ts"].get<double>(), dur = event["dur"].get<double>();
    ASSERT_GE(ts, 0.0);
    ASSERT_GE(dur, 0.0);
    const Track track{event["pid"].get<int>(), event["tid"].get<int>()};
    const std::string name = event["name"].get<std::string>();
    tracks[track].push_back({ts, ts + dur, name});
    const std::string category = event["cat"].get<std::string>();
    if (category == "request") {
      EXPECT_EQ(track.first, 2);
      queues += name == "queue";
      prefill_chunks += name.rfind("prefill chunk", 0) == 0;
      decode_steps += name == "decode step";
      continue;
    }
    EXPECT_EQ(track.first, 1);
    steps += category == "step";
    chunks += category == "chunk";
    ops += category != "step" && category != "chunk";
  }
  // At least one prefill step, then 5 decode steps (fewer when both prompts share one step).
  EXPECT_EQ(static_cast<size_t>(steps), profiler.trace_steps().size());
  EXPECT_GE(steps, 6);
  EXPECT_EQ(static_cast<size_t>(ops), profiler.trace_ops().size());
  EXPECT_GT(ops, steps * 3 * 14);  // 3 layers of 14 ops at least
  EXPECT_GT(chunks, 0);
  // Two pool threads and two requests: each request waited once, was prefilled, then decoded
  // in 5 steps.
  EXPECT_EQ(track_names.size(), 4u);
  EXPECT_EQ(track_names[Track(2, 1)], "request 1");
  EXPECT_EQ(queues, 2);
  EXPECT_GE(prefill_chunks, 2);
  EXPECT_EQ(decode_steps, 2 * 5);
  for (const auto& [track, intervals] : tracks) {
    EXPECT_TRUE(track_names.count(track)) << "track " << track.first << "/" << track.second << " has no name";
    std::string problem;
    EXPECT_TRUE(nested(intervals, problem)) << "track " << track.first << "/" << track.second << ": " << problem;
  }
}

TEST(ChromeTrace, ABadPathFailsAndAnUntracedProfilerGivesAnEmptyTrace) {
  Profiler profiler;
  TempDir dir;
  EXPECT_THROW(write_chrome_trace(profiler, dir.file("missing/dir/trace.json")), InputError);
  const nlohmann::json empty = chrome_trace_json(profiler);
  EXPECT_TRUE(empty["traceEvents"].is_array());
}

// Named spans (another process's work, a transfer) land on their own process and track, named
// once each, with the given origin; merging renumbers every part's processes apart and
// prefixes their names with the part's label.
TEST(ChromeTrace, NamedSpansGetAProcessAndTrackEachAndTracesMergeApart) {
  Profiler profiler;
  profiler.enable_trace(1, 64);
  const int64_t origin = profiler.origin_ns();
  profiler.trace_span({.process = "stage 2",
                       .track = "compute",
                       .name = "mb 0",
                       .category = "stage",
                       .start_ns = origin + 1000,
                       .end_ns = origin + 3000,
                       .tokens = 7});
  profiler.trace_span({.process = "stage 2",
                       .track = "queue",
                       .name = "wait",
                       .category = "stage",
                       .start_ns = origin + 500,
                       .end_ns = origin + 1000,
                       .bytes = 4096});
  profiler.trace_span({.process = "stage 3",
                       .track = "compute",
                       .name = "mb 0",
                       .category = "stage",
                       .start_ns = origin + 3000,
                       .end_ns = origin + 4000});
  profiler.trace_span({.process = "stage 2",
                       .track = "compute",
                       .name = "mb 1",
                       .category = "stage",
                       .start_ns = origin + 3000,
                       .end_ns = origin + 5000});

  const nlohmann::json trace = chrome_trace_json(profiler, origin + 1000);
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> track_names;
  std::vector<nlohmann::json> spans;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["name"] == "process_name") process_names[event["pid"]] = event["args"]["name"];
    if (event["name"] == "thread_name") track_names[{event["pid"], event["tid"]}] = event["args"]["name"];
    if (event["ph"] == "X") spans.push_back(event);
  }
  ASSERT_EQ(spans.size(), 4u);
  std::map<std::string, int> pid_of;
  for (const auto& [pid, name] : process_names) pid_of[name] = pid;
  ASSERT_TRUE(pid_of.count("stage 2") && pid_of.count("stage 3"));
  EXPECT_NE(pid_of["stage 2"], pid_of["stage 3"]);
  EXPECT_EQ(spans[0]["pid"], pid_of["stage 2"]);
  EXPECT_EQ(spans[2]["pid"], pid_of["stage 3"]);
  EXPECT_EQ(spans[0]["tid"], spans[3]["tid"]);  // one track "compute" for both micro-batches
  EXPECT_NE(spans[0]["tid"], spans[1]["tid"]);
  const std::pair<int, int> queue_track(spans[1]["pid"], spans[1]["tid"]);
  EXPECT_EQ(track_names[queue_track], "queue");
  EXPECT_DOUBLE_EQ(spans[0]["ts"].get<double>(), 0.0);  // from the origin given
  EXPECT_DOUBLE_EQ(spans[1]["ts"].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].get<double>(), 2.0);
  EXPECT_EQ(spans[0]["args"]["tokens"], 7);
  EXPECT_FALSE(spans[0]["args"].contains("bytes"));
  EXPECT_EQ(spans[1]["args"]["bytes"], 4096);
  EXPECT_FALSE(spans[2].contains("args"));

  const nlohmann::json merged = merge_chrome_traces({{"rank 1 (prefill)", trace}, {"rank 2 (decode)", trace}});
  std::map<int, std::string> merged_names;
  size_t n_events = 0;
  for (const nlohmann::json& event : merged["traceEvents"]) {
    ++n_events;
    if (event["name"] == "process_name") merged_names[event["pid"]] = event["args"]["name"];
  }
  EXPECT_EQ(n_events, 2 * trace["traceEvents"].size());
  EXPECT_EQ(merged_names.size(), 2 * process_names.size());
  for (const auto& [pid, name] : process_names) {
    EXPECT_EQ(merged_names[pid], "rank 1 (prefill): " + name);
    EXPECT_EQ(merged_names[1000 + pid], "rank 2 (decode): " + name);
  }
  EXPECT_THROW(merge_chrome_traces({{"rank 1", nlohmann::json::object()}}), InputError);
}

}  // namespace
}  // namespace tandem
