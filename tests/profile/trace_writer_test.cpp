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

}  // namespace
}  // namespace tandem
