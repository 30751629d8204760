// `mpirun -np 2 tandem serve --pipeline 2` against one `tandem serve` process (issue 16): the
// same concurrent requests, greedy and seeded, under preemption (a KV pool a few contexts
// deep), give the same text token for token; embeddings are a 400; /metrics counts every
// micro-batch once per stage, with its tokens, compute and queue time; the Chrome trace has each
// stage's micro-batches on its own tracks, in causal order across ranks (the clock offsets are
// right); SIGTERM to rank 0 drains and stops both ranks with exit 0; flags the pipeline refuses
// are one-line errors. Runs real processes on loopback ports: ctest runs this program itself
// (not under mpirun).
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server/server_process.h"
#include "support/mpirun.h"
#include "support/run_binary.h"
#include "support/shared_data.h"

namespace tandem::testing {
namespace {

std::vector<std::string> mpirun_two_ranks() { return test_support::mpirun_command(2); }

struct Completion {
  int status = 0;
  std::string text;
  int64_t completion_tokens = 0;
};

// Eight requests at once, four greedy and four seeded at temperature 0.9, each with its own
// prompt; every one runs to max_tokens (ignore_eos) so that the KV pool overflows.
std::vector<Completion> run_load(const ServerProcess& server) {
  const std::vector<std::string> prompts = {"The dream",  "Once upon a time", "I see",   "A cat",
                                            "In the sky", "She said",         "The end", "Tom had"};
  std::vector<Completion> results(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      nlohmann::json body = {{"prompt", prompts[i]}, {"max_tokens", 60}, {"ignore_eos", true}};
      if (i % 2 == 0) {
        body["temperature"] = 0.0;
      } else {
        body["temperature"] = 0.9;
        body["seed"] = 100 + static_cast<int>(i);
      }
      httplib::Client client = server.client();
      client.set_read_timeout(60, 0);
      const auto res = client.Post("/v1/completions", body.dump(), "application/json");
      if (!res) return;
      results[i].status = res->status;
      if (res->status != 200) return;
      const nlohmann::json reply = nlohmann::json::parse(res->body);
      results[i].text = reply["choices"][0]["text"];
      results[i].completion_tokens = reply["usage"]["completion_tokens"];
    });
  }
  for (std::thread& client : clients) client.join();
  return results;
}

int64_t preemptions(const ServerProcess& server) {
  httplib::Client client = server.client();
  const auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::smatch match;
  const std::regex counter("\ntandem_preemptions_total ([0-9]+)");
  return std::regex_search(res->body, match, counter) ? std::stoll(match[1]) : -1;
}

// tandem_stage_<name>{stage="s",rank="r"} values by stage, for each name.
std::map<std::string, std::map<int, double>> stage_metrics(const ServerProcess& server) {
  httplib::Client client = server.client();
  const auto res = client.Get("/metrics");
  std::map<std::string, std::map<int, double>> values;
  if (!res || res->status != 200) return values;
  const std::regex line(R"re(\ntandem_stage_([a-z_]+)\{stage="([0-9]+)",rank="([0-9]+)"\} ([-+.e0-9]+))re");
  for (auto it = std::sregex_iterator(res->body.begin(), res->body.end(), line); it != std::sregex_iterator(); ++it) {
    const int stage = std::stoi((*it)[2]);
    EXPECT_EQ(stage, std::stoi((*it)[3])) << "stage s runs on rank s";
    values[(*it)[1]][stage] = std::stod((*it)[4]);
  }
  return values;
}

// Every micro-batch went through both stages once, and each stage did work on them.
void expect_stage_metrics(const std::map<std::string, std::map<int, double>>& m) {
  for (const char* name : {"layers", "weight_bytes", "kv_bytes", "micro_batches_total", "tokens_total",
                           "compute_seconds_total", "queue_seconds_total", "received_bytes_total"}) {
    ASSERT_TRUE(m.count(name)) << "no tandem_stage_" << name;
    ASSERT_EQ(m.at(name).size(), 2u) << name;
  }
  for (int stage = 0; stage < 2; ++stage) {
    EXPECT_GE(m.at("layers").at(stage), 1) << stage;
    EXPECT_GT(m.at("weight_bytes").at(stage), 0) << stage;
    EXPECT_GT(m.at("kv_bytes").at(stage), 0) << stage;
    EXPECT_GT(m.at("micro_batches_total").at(stage), 0) << stage;
    EXPECT_GT(m.at("tokens_total").at(stage), m.at("micro_batches_total").at(stage) - 1) << stage;
    EXPECT_GT(m.at("compute_seconds_total").at(stage), 0) << stage;
    EXPECT_GE(m.at("queue_seconds_total").at(stage), 0) << stage;
    EXPECT_GT(m.at("received_bytes_total").at(stage), 0) << stage;
  }
  EXPECT_EQ(m.at("micro_batches_total").at(0), m.at("micro_batches_total").at(1));
  EXPECT_EQ(m.at("tokens_total").at(0), m.at("tokens_total").at(1));
}

// The trace has a process per stage, one compute span per micro-batch (as many as /metrics
// counted), a queue span for each, and stage 2 starts each micro-batch only after stage 1 has
// finished it: the stage's clock is brought onto rank 0's correctly.
// `slack_us`: the bound on the clock offset's error that rank 0 logged (half its round trip).
void expect_stage_trace(const std::string& path, int64_t micro_batches, double slack_us) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no trace at " << path;
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> track_names;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] != "M") continue;
    if (event["name"] == "process_name") process_names[event["pid"]] = event["args"]["name"];
    if (event["name"] == "thread_name") track_names[{event["pid"], event["tid"]}] = event["args"]["name"];
  }
  int stage_pid[2] = {-1, -1};
  for (const auto& [pid, name] : process_names) {
    if (name == "pipeline stage 1/2 (rank 0)") stage_pid[0] = pid;
    if (name == "pipeline stage 2/2 (rank 1)") stage_pid[1] = pid;
  }
  ASSERT_GE(stage_pid[0], 0) << "no process of stage 1 in the trace";
  ASSERT_GE(stage_pid[1], 0) << "no process of stage 2 in the trace";
  std::map<std::string, std::pair<double, double>> compute[2];  // [stage] name -> (start, end) in us
  int64_t queued[2] = {0, 0};
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    EXPECT_GE(event["dur"].get<double>(), 0.0) << event.dump();
    for (int stage = 0; stage < 2; ++stage) {
      if (event["pid"] != stage_pid[stage]) continue;
      const std::string track = track_names[{event["pid"], event["tid"]}];
      if (track == "compute") {
        const double start = event["ts"];
        EXPECT_TRUE(compute[stage].emplace(event["name"], std::pair(start, start + event["dur"].get<double>())).second)
            << "micro-batch " << event["name"] << " computed twice by stage " << stage + 1;
        EXPECT_GE(event["args"]["tokens"].get<int64_t>(), 1);
      } else if (track.rfind("queue (part ", 0) == 0) {
        ++queued[stage];
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(compute[0].size()), micro_batches);
  EXPECT_EQ(static_cast<int64_t>(compute[1].size()), micro_batches);
  EXPECT_EQ(queued[0], micro_batches);
  EXPECT_EQ(queued[1], micro_batches);
  int64_t out_of_order = 0;
  for (const auto& [name, first] : compute[0]) {
    const auto second = compute[1].find(name);
    ASSERT_NE(second, compute[1].end()) << name << " never reached stage 2";
    if (second->second.first + slack_us < first.second) ++out_of_order;
  }
  EXPECT_EQ(out_of_order, 0) << "micro-batches that stage 2 started before stage 1 had finished them";
}

// Runs the load through one process and through the two-rank pipeline (the same flags), and
// compares; then checks the stage metrics, embeddings, the pipeline's shutdown and its trace.
void expect_pipeline_matches(const std::string& model, const std::vector<std::string>& flags) {
  std::vector<std::string> single_flags = flags;
  ServerProcess single;
  ASSERT_TRUE(single.start(single_flags, 30.0, model)) << single.log();
  const std::vector<Completion> expected = run_load(single);
  const int64_t single_preemptions = preemptions(single);
  EXPECT_EQ(single.stop(), 0) << single.log();

  const std::string trace_path =
      (std::filesystem::temp_directory_path() / ("tandem-pipeline-trace-" + std::to_string(::getpid()) + ".json"))
          .string();
  std::filesystem::remove(trace_path);
  std::vector<std::string> pipeline_flags = flags;
  pipeline_flags.insert(pipeline_flags.end(), {"--pipeline", "2", "--trace", trace_path});
  ServerProcess pipeline;
  pipeline.set_launcher(mpirun_two_ranks());
  ASSERT_TRUE(pipeline.start(pipeline_flags, 60.0, model)) << pipeline.log();
  const std::vector<Completion> got = run_load(pipeline);
  const int64_t pipeline_preemptions = preemptions(pipeline);
  const auto stages = stage_metrics(pipeline);
  expect_stage_metrics(stages);

  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i].status, 200) << "request " << i << "\n" << single.log();
    ASSERT_EQ(got[i].status, 200) << "request " << i << "\n" << pipeline.log();
    EXPECT_EQ(expected[i].completion_tokens, 60) << "request " << i;
    EXPECT_EQ(got[i].completion_tokens, expected[i].completion_tokens) << "request " << i;
    EXPECT_EQ(got[i].text, expected[i].text) << "request " << i;
  }
  // Both ran out of KV blocks, so recomputation after preemption is part of what matched.
  EXPECT_GT(single_preemptions, 0);
  EXPECT_GT(pipeline_preemptions, 0) << pipeline.log();

  httplib::Client client = pipeline.client();
  const auto embeddings = client.Post("/v1/embeddings", R"({"input": "hello"})", "application/json");
  ASSERT_TRUE(embeddings);
  EXPECT_EQ(embeddings->status, 400) << embeddings->body;
  EXPECT_NE(embeddings->body.find("pipeline"), std::string::npos) << embeddings->body;

  const std::string log = pipeline.log();
  EXPECT_NE(log.find("pipeline stage 1/2 (rank 0): layers [0, "), std::string::npos) << log;
  EXPECT_NE(log.find("pipeline stage 2/2 (rank 1): layers ["), std::string::npos) << log;

  // SIGTERM to rank 0, as a user's kill of the server: it drains, stops rank 1, both exit 0.
  const pid_t rank_zero = test_support::rank_pid(pipeline.pid(), 0);
  ASSERT_GT(rank_zero, 0);
  ::kill(rank_zero, SIGTERM);
  const std::optional<int> code = pipeline.wait_exit(30.0);
  ASSERT_TRUE(code.has_value()) << pipeline.log();
  EXPECT_EQ(*code, 0) << pipeline.log();
  EXPECT_NE(pipeline.log().find("pipeline stage 2/2 (rank 1): stopped after"), std::string::npos) << pipeline.log();
  // Steps were cut into micro-batches (what lets the stages overlap), and the outputs still matched.
  std::smatch match;
  const std::string final_log = pipeline.log();
  ASSERT_TRUE(std::regex_search(final_log, match, std::regex("pipeline: ([0-9]+) steps in ([0-9]+) micro-batches")))
      << final_log;
  EXPECT_GT(std::stoll(match[2]), std::stoll(match[1])) << final_log;
  // Every micro-batch ran before /metrics was read (the load had ended): the same count.
  EXPECT_EQ(std::stoll(match[2]), static_cast<int64_t>(stages.at("micro_batches_total").at(0)));
  ASSERT_TRUE(std::regex_search(final_log, match, std::regex("\\(round trip ([0-9.]+) ms\\)"))) << final_log;
  const double offset_error_us = std::stod(match[1]) * 1e3 / 2;
  expect_stage_trace(trace_path, stages.at("micro_batches_total").at(0), offset_error_us + 1.0);
  std::filesystem::remove(trace_path);
}

TEST(PipelineServe, AidreamsMatchesOneProcess) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // 8 requests of ~65 tokens (5 blocks each) against 16 blocks on one process, 32 on rank 0.
  expect_pipeline_matches(shared_path(kAidreamsGguf), {"--parallel", "8", "--kv-memory", "256KiB"});
}

TEST(PipelineServe, StoriesMatchesOneProcess) {
  TANDEM_REQUIRE_SHARED("models/stories260K/model.bin");
  // 5 layers: 9 blocks of a 128-token context on one process, 16 on rank 0 (3 layers).
  expect_pipeline_matches(
      shared_path("models/stories260K/model.bin"),
      {"-z", shared_path("models/aidreams260K/tok512.bin"), "--parallel", "8", "--ctx", "128", "--kv-memory", "96KiB"});
}

TEST(PipelineServe, RandomModelMatchesOneProcess) {
  TANDEM_REQUIRE_SHARED("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tandem-pipeline-random-" + std::to_string(::getpid()) + ".gguf"))
          .string();
  const CommandResult generated = run_tandem(
      "gen-model --shape test-tiny --type Q8_0 --vocab-from " +
      shell_quote(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf")) + " -o " + shell_quote(path));
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  // 2 layers: 8 blocks on one process (one 128-token context), 16 on rank 0.
  expect_pipeline_matches(path, {"--parallel", "8", "--ctx", "128", "--kv-memory", "32KiB"});
  std::filesystem::remove(path);
}

TEST(PipelineServe, RefusesWhatItDoesNotServe) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string model = shared_path(kAidreamsGguf);
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--pipeline", "2", "--draft-model", model}, "--draft-model is not served by a pipeline"},
      {{"--pipeline", "3"}, "--pipeline 3 runs as 3 MPI ranks"},
  };
  for (const Case& c : cases) {
    ServerProcess server;
    server.set_launcher(mpirun_two_ranks());
    std::vector<std::string> args = {"serve", "-m", model, "--port", "0", "-t", "1"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    ASSERT_TRUE(server.spawn(args));
    const std::optional<int> code = server.wait_exit(30.0);
    ASSERT_TRUE(code.has_value()) << server.log();
    EXPECT_NE(*code, 0);
    EXPECT_NE(server.log().find("tandem: error: " + c.message), std::string::npos) << server.log();
  }
}

}  // namespace
}  // namespace tandem::testing
