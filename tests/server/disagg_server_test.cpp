// `tandem serve --workers prefill:P,decode:D` under mpirun, over real HTTP on loopback, against
// the single-process server: the same requests (greedy and seeded sampling, shared prefixes,
// many at once on a KV pool small enough to preempt) give the same text and token counts; a
// decode rank killed mid-load fails its own requests with an error naming it while the other
// rank's finish, /health says which worker is down, new requests still run, and the job stops
// on SIGTERM to its front. Skips, saying so, in a build without MPI.
#include <gtest/gtest.h>

#include <signal.h>

#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/server_process.h"
#include "support/mpirun.h"
#include "support/shared_data.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

constexpr const char* kStories = "models/stories260K/model.bin";
constexpr const char* kTok512 = "models/aidreams260K/tok512.bin";

#ifdef TANDEM_MPIEXEC
// mpirun's arguments (tests/support/mpirun.h) and the program; orte_enable_recovery: a rank
// that dies does not take the job down (the front counts it down instead).
std::vector<std::string> mpirun_args(int ranks) {
  std::vector<std::string> args = test_support::mpirun_command(ranks);
  args.erase(args.begin());  // mpirun itself: start_program's program
  for (const char* a : {"--mca", "orte_enable_recovery", "1", TANDEM_BINARY}) args.emplace_back(a);
  return args;
}
#endif

bool start_disaggregated(ServerProcess& server, int prefill, int decode, const std::vector<std::string>& serve_args) {
#ifdef TANDEM_MPIEXEC
  std::vector<std::string> args = mpirun_args(1 + prefill + decode);
  // Every prompt through the prefill rank, however short (the default sends short ones to the decode rank).
  for (const char* a : {"serve", "--port", "0", "-t", "1", "--remote-prefill-min", "0", "--workers"})
    args.emplace_back(a);
  args.push_back("prefill:" + std::to_string(prefill) + ",decode:" + std::to_string(decode));
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  return server.start_program(TANDEM_MPIEXEC, args, 60.0);
#else
  (void)server, (void)prefill, (void)decode, (void)serve_args;
  return false;
#endif
}

// A pid the job logged: the front's ("front of ... pid N;") or rank r's ("rank r (pid N)").
pid_t logged_pid(const std::string& log, int rank) {
  std::smatch match;
  const std::regex pattern = rank == 0 ? std::regex("workers, pid ([0-9]+);")
                                       : std::regex("rank " + std::to_string(rank) + " \\(pid ([0-9]+)\\)");
  return std::regex_search(log, match, pattern) ? static_cast<pid_t>(std::stoi(match[1])) : -1;
}

// Stops the job the way its README says: SIGTERM to the front, which stops its workers.
int stop_job(ServerProcess& server) {
  const pid_t front = logged_pid(server.log(), 0);
  if (front > 0) ::kill(front, SIGTERM);
  if (const auto code = server.wait_exit(30.0)) return *code;
  return server.stop(1.0);
}

struct Reply {
  int status = 0;
  std::string text;
  int64_t completion_tokens = -1;
  std::string error;
};

Reply complete(const ServerProcess& server, const json& request) {
  httplib::Client client = server.client();
  client.set_read_timeout(60, 0);
  const auto res = client.Post("/v1/completions", request.dump(), "application/json");
  Reply reply;
  if (!res) return reply;
  reply.status = res->status;
  const json body = json::parse(res->body, nullptr, false);
  if (res->status == 200) {
    reply.text = body["choices"][0]["text"];
    reply.completion_tokens = body["usage"]["completion_tokens"];
  } else if (body.contains("error")) {
    reply.error = body["error"]["message"];
  }
  return reply;
}

// Requests sharing prefixes (so prefix caches on both sides are hit), greedy and seeded.
std::vector<json> workload() {
  const std::vector<std::string> stems = {"Once upon a time there was a little girl named Lily who",
                                          "The cat sat on the mat and looked at the big red ball that",
                                          "One day a boy went to the park with his mother and"};
  std::vector<json> requests;
  for (int i = 0; i < 12; ++i) {
    std::string prompt = stems[static_cast<size_t>(i % 3)];
    for (int k = 0; k < i / 3; ++k) prompt += " and then they played in the garden";
    json request = {{"prompt", prompt}, {"max_tokens", 24 + 8 * (i % 4)}, {"ignore_eos", true}};
    if (i % 2 == 0) {
      request["temperature"] = 0;
    } else {
      request["temperature"] = 0.9;
      request["seed"] = 1000 + i;
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

std::vector<Reply> all_at_once(const ServerProcess& server, const std::vector<json>& requests) {
  std::vector<std::future<Reply>> futures;
  for (const json& request : requests)
    futures.push_back(std::async(std::launch::async, [&server, request] { return complete(server, request); }));
  std::vector<Reply> replies;
  for (auto& f : futures) replies.push_back(f.get());
  return replies;
}

int64_t metric(const ServerProcess& server, const std::string& name) {
  httplib::Client client = server.client();
  const auto res = client.Get("/metrics");
  if (!res) return -1;
  std::smatch match;
  const std::regex line("\n" + name + " ([0-9.e+]+)");
  return std::regex_search(res->body, match, line) ? static_cast<int64_t>(std::stod(match[1])) : -1;
}

class DisaggServer : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef TANDEM_MPIEXEC
    GTEST_SKIP() << "built without MPI (TANDEM_WITH_MPI off): no mpirun to run the job with";
#endif
    TANDEM_REQUIRE_SHARED(kStories);
    TANDEM_REQUIRE_SHARED(kTok512);
  }
};

TEST_F(DisaggServer, OutputsEqualOneProcessUnderConcurrentLoadWithPreemption) {
  // 4-token blocks, 4 sequences, a 128-token context and a pool of 40 blocks: twelve requests of up to 100
  // positions at once make the decode side preempt (and the prefill side queue).
  const std::vector<std::string> flags = {"-z", shared_path(kTok512), "--kv-block", "4",     "--parallel",
                                          "4",  "--kv-memory",        "100KiB",     "--ctx", "128"};
  const std::vector<json> requests = workload();
  ServerProcess single;
  ASSERT_TRUE(single.start(flags, 30.0, shared_path(kStories))) << single.log();
  const std::vector<Reply> want = all_at_once(single, requests);
  const int64_t single_preemptions = metric(single, "tandem_preemptions_total");
  single.stop();

  ServerProcess job;
  std::vector<std::string> job_flags = {"-m", shared_path(kStories)};
  job_flags.insert(job_flags.end(), flags.begin(), flags.end());
  ASSERT_TRUE(start_disaggregated(job, 1, 1, job_flags)) << job.log();
  // Twice: the second round finds every prompt in the decode rank's prefix cache (its blocks
  // are not sent again) and must still give the same outputs.
  for (int round = 0; round < 2; ++round) {
    const std::vector<Reply> got = all_at_once(job, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(got[i].status, 200) << "round " << round << " request " << i << ": " << got[i].error;
      EXPECT_EQ(got[i].text, want[i].text) << "round " << round << " request " << i << " " << requests[i].dump();
      EXPECT_EQ(got[i].completion_tokens, want[i].completion_tokens) << "request " << i;
    }
  }
  EXPECT_GT(metric(job, "tandem_preemptions_total"), 0)
      << "the pool was meant to be short (single process: " << single_preemptions << " preemptions)";
  httplib::Client client = job.client();
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  std::smatch sent;
  ASSERT_TRUE(std::regex_search(
      metrics->body, sent, std::regex("tandem_worker_kv_sent_bytes_total\\{rank=\"1\",role=\"prefill\"\\} ([0-9]+)")))
      << metrics->body;
  EXPECT_GT(std::stoll(sent[1]), 0) << "the prefill rank sent KV blocks";
  EXPECT_EQ(stop_job(job), 0) << job.log();
}

TEST_F(DisaggServer, AKilledDecodeRankFailsOnlyItsRequests) {
  // --worker-timeout 3: the dead rank is counted down 3 s after it stops reporting; the live
  // ones report every 200 ms, so they are not, even under ASan on a loaded machine (1 s once
  // counted a live rank down there).
  const std::vector<std::string> flags = {"-m", shared_path(kStories), "-z", shared_path(kTok512), "--parallel",
                                          "2",  "--worker-timeout",    "3"};
  ServerProcess job;
  ASSERT_TRUE(start_disaggregated(job, 1, 2, flags)) << job.log();
  const pid_t victim = logged_pid(job.log(), 3);
  ASSERT_GT(victim, 0) << job.log();
  // Long requests, spread over both decode ranks (the front routes to the least loaded).
  std::vector<json> requests;
  for (int i = 0; i < 6; ++i)
    requests.push_back(
        {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"temperature", 1}, {"seed", i}});
  std::vector<std::future<Reply>> futures;
  for (const json& request : requests)
    futures.push_back(std::async(std::launch::async, [&job, request] { return complete(job, request); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int failed = 0, finished = 0;
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "a request hangs";
    const Reply reply = f.get();
    if (reply.status == 200) {
      ++finished;
      EXPECT_EQ(reply.completion_tokens, 480);
    } else {
      ++failed;
      EXPECT_EQ(reply.status, 503);
      EXPECT_NE(reply.error.find("decode worker rank 3 is down"), std::string::npos) << reply.error;
    }
  }
  EXPECT_GE(failed, 1) << "the killed rank held some of the requests";
  EXPECT_GE(finished, 1) << "the other decode rank's requests finish";

  httplib::Client client = job.client();
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "one decode rank is left";
  const json body = json::parse(health->body);
  EXPECT_EQ(body["status"], "degraded");
  for (const json& worker : body["workers"]) EXPECT_EQ(worker["up"], worker["rank"] != 3) << health->body;
  const Reply after = complete(job, {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(after.status, 200) << after.error;
  const int code = stop_job(job);
  EXPECT_GE(code, 0) << "the job ended on SIGTERM to its front, without SIGKILL\n" << job.log();
}

TEST_F(DisaggServer, TooFewRanksIsAOneLineError) {
#ifdef TANDEM_MPIEXEC
  ServerProcess job;
  std::vector<std::string> args = mpirun_args(2);
  for (const std::string& a :
       {std::string("serve"), std::string("-m"), shared_path(kStories), std::string("-z"), shared_path(kTok512),
        std::string("--port"), std::string("0"), std::string("--workers"), std::string("prefill:1,decode:1")})
    args.push_back(a);
  ASSERT_TRUE(job.spawn(args, TANDEM_MPIEXEC));
  const auto code = job.wait_exit(30.0);
  ASSERT_TRUE(code.has_value()) << "hangs\n" << job.log();
  EXPECT_NE(job.log().find("needs 3 ranks (mpirun -np 3), not 2"), std::string::npos) << job.log();
#endif
}

}  // namespace
}  // namespace tandem::testing
