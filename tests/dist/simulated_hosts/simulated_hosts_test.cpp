// The disaggregated, pipelined and tensor-parallel servers across simulated hosts (issue 36): every rank in a
// network namespace of its own, MPI on TCP between them, maybe a clock of its own
// (simulated_hosts.sh, which runs this program inside host 0 and gives it $TANDEM_SIMULATED_MPIRUN). The same
// concurrent requests, greedy and seeded, on KV pools that preempt, give one process's text token for token; a killed
// rank on another host fails what it failed on one machine (a decode rank: only its requests; a pipeline stage: the
// job). Run alone, outside the script, every test skips.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/completion_replies.h"
#include "server/server_process.h"
#include "support/mpirun.h"
#include "support/shared_data.h"

namespace tandem::testing {
namespace {

using nlohmann::json;
using test_support::rank_pid;

constexpr const char* kStories = "models/stories260K/model.bin";
constexpr const char* kTok512 = "models/aidreams260K/tok512.bin";

// The hosts' mpirun (simulated_hosts.sh), or empty outside the script.
std::string hosts_mpirun() {
  const char* mpirun = std::getenv("TANDEM_SIMULATED_MPIRUN");
  return mpirun != nullptr ? mpirun : "";
}

// The link's one-way delay in ms (simulated_hosts.sh --delay), 0 without one.
double link_delay_ms() {
  const char* us = std::getenv("TANDEM_SIMULATED_DELAY_US");
  return us != nullptr ? std::atof(us) / 1e3 : 0.0;
}

// How far host i's monotonic clock runs ahead of host 0's, per i (--clock-step), in seconds.
double clock_step_s() {
  const char* s = std::getenv("TANDEM_SIMULATED_CLOCK_STEP_S");
  return s != nullptr ? std::atof(s) : 0.0;
}

int hosts() {
  const char* n = std::getenv("TANDEM_SIMULATED_HOSTS");
  return n != nullptr ? std::atoi(n) : 0;
}

// mpirun's arguments for `ranks` ranks of `tandem ARGS...`, rank i on host i; recovery on (a
// dead rank does not end a disaggregated job: its front counts it down).
std::vector<std::string> job_args(int ranks, const std::vector<std::string>& tandem_args, bool recovery) {
  std::vector<std::string> args = {"-np", std::to_string(ranks)};
  if (recovery) args.insert(args.end(), {"--mca", "orte_enable_recovery", "1"});
  args.push_back(TANDEM_BINARY);
  args.insert(args.end(), tandem_args.begin(), tandem_args.end());
  return args;
}

// A process's network namespace ("net:[inode]").
std::string net_namespace(pid_t pid) {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/net", error).string();
}

// The IPv4 peers of the established TCP connections that process `pid` itself holds: its
// sockets (/proc/PID/fd -> "socket:[inode]") found in its namespace's /proc/PID/net/tcp
// ("sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...", addresses little-endian hex).
// Its host's other processes (OpenMPI's daemon, which talks TCP to mpirun) do not count.
std::set<std::string> tcp_peers(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code error;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::ifstream tcp("/proc/" + std::to_string(pid) + "/net/tcp");
  std::set<std::string> peers;
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "01" || !inodes.count(inode)) continue;  // 01: TCP_ESTABLISHED
    const uint32_t address = static_cast<uint32_t>(std::stoul(remote.substr(0, 8), nullptr, 16));
    peers.insert(std::to_string(address & 0xff) + "." + std::to_string((address >> 8) & 0xff) + "." +
                 std::to_string((address >> 16) & 0xff) + "." + std::to_string(address >> 24));
  }
  return peers;
}

// Every rank of the job runs in a network namespace of its own, and each rank past 0 holds a
// TCP connection of its own with rank 0's host (simulated_hosts.sh: host i is 10.213.0.(i+1);
// MPI's TCP transport, the only one between hosts): the job really is spread over the hosts
// and its messages cross their network.
void expect_spread_over_hosts(pid_t launcher, int ranks) {
  std::set<std::string> namespaces;
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = rank_pid(launcher, rank);
    ASSERT_GT(pid, 0) << "no process of rank " << rank;
    namespaces.insert(net_namespace(pid));
    if (rank == 0) {
      EXPECT_EQ(net_namespace(pid), net_namespace(::getpid())) << "rank 0 runs on host 0, beside this test";
    } else {
      EXPECT_TRUE(tcp_peers(pid).count("10.213.0.1")) << "rank " << rank << " has no TCP connection to host 0";
    }
  }
  EXPECT_EQ(namespaces.size(), static_cast<size_t>(ranks)) << "ranks sharing a host";
}

using Reply = CompletionReply;

// Eight requests on prompts that share their heads (prefix caches are hit), every other one
// greedy, the rest seeded at temperature 0.9, each to its max_tokens.
std::vector<json> workload() {
  const std::vector<std::string> stems = {"Once upon a time there was a little girl named Lily who",
                                          "The cat sat on the mat and looked at the big red ball that"};
  std::vector<json> requests;
  for (int i = 0; i < 8; ++i) {
    std::string prompt = stems[static_cast<size_t>(i % 2)];
    for (int k = 0; k < i / 2; ++k) prompt += " and then they played in the garden";
    json request = {{"prompt", prompt}, {"max_tokens", 24 + 8 * (i % 4)}, {"ignore_eos", true}};
    if (i % 3 == 0) {
      request["temperature"] = 0;
    } else {
      request["temperature"] = 0.9;
      request["seed"] = 1000 + i;
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

// All at once (120 s a reply: the links here are slow), and what the load took, for
// bench/RESULTS.md-style notes.
std::vector<Reply> timed_all_at_once(const ServerProcess& server, const std::vector<json>& requests) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Reply> replies = all_at_once(server, requests, 120);
  int64_t tokens = 0;
  for (const Reply& reply : replies) tokens += std::max<int64_t>(reply.completion_tokens, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ figures  ] %zu requests, %lld tokens in %.3f s (%.1f tokens/s)\n", requests.size(),
              static_cast<long long>(tokens), seconds, static_cast<double>(tokens) / seconds);
  return replies;
}

// A worker's clock as the job logged it: the offset from rank 0's and the round trip (ms)
// of the exchange it was measured with (its error is at most half of that).
struct LoggedClock {
  double offset_ms = 0.0;
  double round_trip_ms = -1.0;
};

// `pattern` captures the offset and a measure of the round trip; `to_ms` scales the offset,
// `round_trip_scale` the second capture to a round trip in ms.
LoggedClock logged_clock(const std::string& log, const std::regex& pattern, double to_ms, double round_trip_scale) {
  std::smatch match;
  if (!std::regex_search(log, match, pattern)) return {};
  const LoggedClock clock{std::stod(match[1]) * to_ms, std::stod(match[2]) * round_trip_scale};
  std::printf("[ figures  ] clock %+.3f ms, round trip %.3f ms (link: %s)\n", clock.offset_ms, clock.round_trip_ms,
              std::getenv("TANDEM_SIMULATED_LINK") != nullptr ? std::getenv("TANDEM_SIMULATED_LINK") : "?");
  return clock;
}

// The clock of the rank on host `host` was measured across the link: its round trip is at
// least twice the link's one-way delay, and the offset is the host's clock step (0 when the
// hosts share the clock) within the estimate's bound (half the round trip; 1 ms more for the
// moments between the clock reads and the messages on a loaded machine).
void expect_clock_across_link(const LoggedClock& clock, int host, const std::string& log) {
  ASSERT_GE(clock.round_trip_ms, 0.0) << "no clock line in the log\n" << log;
  EXPECT_GE(clock.round_trip_ms, 2 * link_delay_ms()) << log;
  EXPECT_NEAR(clock.offset_ms, host * clock_step_s() * 1e3, clock.round_trip_ms / 2 + 1.0) << log;
}

int64_t metric(const ServerProcess& server, const std::string& pattern) {
  httplib::Client client = server.client();
  const auto res = client.Get("/metrics");
  if (!res) return -1;
  std::smatch match;
  const std::regex line("\n" + pattern + " ([0-9.e+]+)");
  return std::regex_search(res->body, match, line) ? static_cast<int64_t>(std::stod(match[1])) : -1;
}

// `pattern`'s value once above 0, waiting up to 5 s: a disaggregated job's workers report their
// counters every 200 ms, so the front's /metrics trails the replies.
int64_t positive_metric(const ServerProcess& server, const std::string& pattern) {
  int64_t value = metric(server, pattern);
  for (int i = 0; i < 50 && value <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    value = metric(server, pattern);
  }
  return value;
}

void expect_same_replies(const std::vector<Reply>& want, const std::vector<Reply>& got, const std::string& log) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].status, 200) << "request " << i << ": " << want[i].error;
    ASSERT_EQ(got[i].status, 200) << "request " << i << ": " << got[i].error << "\n" << log;
    EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
    EXPECT_EQ(got[i].completion_tokens, want[i].completion_tokens) << "request " << i;
  }
}

// The one-process server's replies to `requests`, with `flags` (MODEL included).
std::vector<Reply> one_process(const std::vector<std::string>& flags, const std::vector<json>& requests) {
  ServerProcess single;
  std::vector<std::string> args = {"serve", "--port", "0", "-t", "2"};
  args.insert(args.end(), flags.begin(), flags.end());
  if (!single.start_program(TANDEM_BINARY, args, 30.0)) {
    ADD_FAILURE() << single.log();
    return {};
  }
  std::vector<Reply> replies = timed_all_at_once(single, requests);
  EXPECT_GT(metric(single, "tandem_preemptions_total"), 0) << "the pool was meant to be short";
  EXPECT_EQ(single.stop(), 0) << single.log();
  return replies;
}

// A pid the disaggregated job logged: the front's ("workers, pid N;") or rank r's ("rank r (pid N)").
pid_t logged_pid(const std::string& log, int rank) {
  std::smatch match;
  const std::regex pattern = rank == 0 ? std::regex("workers, pid ([0-9]+);")
                                       : std::regex("rank " + std::to_string(rank) + " \\(pid ([0-9]+)\\)");
  return std::regex_search(log, match, pattern) ? static_cast<pid_t>(std::stoi(match[1])) : -1;
}

// SIGTERM to the front (rank 0), as a user stops the job; mpirun's exit code.
int stop_by_rank_zero(ServerProcess& job, pid_t rank_zero) {
  if (rank_zero > 0) ::kill(rank_zero, SIGTERM);
  if (const auto code = job.wait_exit(60.0)) return *code;
  return job.stop(1.0);
}

class SimulatedHostsServe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (hosts_mpirun().empty())
      GTEST_SKIP() << "not on simulated hosts: ctest runs this program through "
                      "tests/dist/simulated_hosts/simulated_hosts.sh, which sets TANDEM_SIMULATED_MPIRUN";
    TANDEM_REQUIRE_SHARED(kStories);
    TANDEM_REQUIRE_SHARED(kTok512);
    TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  }

  // Skips when the script made fewer hosts than the job has ranks.
  bool have_hosts(int ranks) {
    if (hosts() >= ranks) return true;
    ADD_FAILURE() << ranks << " ranks need " << ranks << " hosts; simulated_hosts.sh made " << hosts();
    return false;
  }
};

// prefill:1,decode:1 on hosts 0, 1, 2; every prompt's KV blocks through the prefill rank.
TEST_F(SimulatedHostsServe, DisaggregatedMatchesOneProcess) {
  if (!have_hosts(3)) return;
  // 4-token blocks, a 128-token context and 40 blocks: eight requests of up to 100 positions
  // at once preempt.
  const std::vector<std::string> flags = {"-m",          shared_path(kStories),
                                          "-z",          shared_path(kTok512),
                                          "--kv-block",  "4",
                                          "--parallel",  "4",
                                          "--kv-memory", "100KiB",
                                          "--ctx",       "128"};
  const std::vector<json> requests = workload();
  const std::vector<Reply> want = one_process(flags, requests);

  // --trace: the front then measures each worker's clock (and logs the round trips), and at
  // stop gathers every rank's trace across the hosts.
  const std::string trace_path =
      (std::filesystem::temp_directory_path() / ("tandem-hosts-trace-" + std::to_string(::getpid()) + ".json"))
          .string();
  std::vector<std::string> serve = {
      "serve",   "--port",  "0", "-t", "1", "--remote-prefill-min", "0", "--workers", "prefill:1,decode:1",
      "--trace", trace_path};
  serve.insert(serve.end(), flags.begin(), flags.end());
  ServerProcess job;
  ASSERT_TRUE(job.start_program(hosts_mpirun(), job_args(3, serve, true), 90.0)) << job.log();
  expect_spread_over_hosts(job.pid(), 3);
  // "rank 2 (decode): clock +1.0 us from the front's (within 30.0 us, ...)": within half a round trip.
  for (const auto& [rank, role] : {std::pair(1, "prefill"), std::pair(2, "decode")}) {
    SCOPED_TRACE(role);
    const std::regex line("rank " + std::to_string(rank) + " \\(" + role +
                          "\\): clock ([-+0-9.]+) us from the front's \\(within ([0-9.]+) us");
    expect_clock_across_link(logged_clock(job.log(), line, 1e-3, 2e-3), rank, job.log());
  }
  // Twice: the second round finds the prompts in the decode rank's prefix cache.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    expect_same_replies(want, timed_all_at_once(job, requests), job.log());
  }
  EXPECT_GT(positive_metric(job, "tandem_preemptions_total"), 0);
  EXPECT_GT(positive_metric(job, "tandem_worker_kv_sent_bytes_total\\{rank=\"1\",role=\"prefill\"\\}"), 0)
      << "the prefill rank sent KV blocks across hosts";
  EXPECT_EQ(stop_by_rank_zero(job, logged_pid(job.log(), 0)), 0) << job.log();
  EXPECT_NE(job.log().find("trace written to " + trace_path), std::string::npos) << job.log();
  const std::string trace = read_file(trace_path);
  std::filesystem::remove(trace_path);
  for (const char* process : {"rank 1 (prefill): kv transfer", "rank 2 (decode): kv transfer"})
    EXPECT_NE(trace.find(process), std::string::npos) << "no " << process << " in the gathered trace";
}

// --pipeline 2: stage 1 on host 0 with the front, stage 2 on host 1.
TEST_F(SimulatedHostsServe, PipelineMatchesOneProcess) {
  if (!have_hosts(2)) return;
  // aidreams260K: 16 blocks on one process, 32 on rank 0: the eight requests preempt.
  const std::vector<std::string> flags = {"-m", shared_path(kAidreamsGguf), "--parallel", "8", "--kv-memory", "256KiB"};
  const std::vector<json> requests = workload();
  const std::vector<Reply> want = one_process(flags, requests);

  std::vector<std::string> serve = {"serve", "--port", "0", "-t", "1", "--pipeline", "2"};
  serve.insert(serve.end(), flags.begin(), flags.end());
  ServerProcess job;
  ASSERT_TRUE(job.start_program(hosts_mpirun(), job_args(2, serve, false), 90.0)) << job.log();
  expect_spread_over_hosts(job.pid(), 2);
  const std::regex line(R"(\(rank 1\): clock ([-+0-9.]+) ms from rank 0's \(round trip ([0-9.]+) ms\))");
  expect_clock_across_link(logged_clock(job.log(), line, 1.0, 1.0), 1, job.log());
  expect_same_replies(want, timed_all_at_once(job, requests), job.log());
  EXPECT_GT(metric(job, "tandem_preemptions_total"), 0);
  EXPECT_GT(metric(job, "tandem_stage_received_bytes_total\\{stage=\"1\",rank=\"1\"\\}"), 0);
  EXPECT_EQ(stop_by_rank_zero(job, rank_pid(job.pid(), 0)), 0) << job.log();
  EXPECT_NE(job.log().find("pipeline stage 2/2 (rank 1): stopped after"), std::string::npos) << job.log();
}

// --tensor-parallel 2: rank 0 (front and slice 0) on host 0, slice 1 on host 1; two all-reduces a
// layer a step cross the link.
TEST_F(SimulatedHostsServe, TensorParallelMatchesOneProcess) {
  if (!have_hosts(2)) return;
  // aidreams260K: 16 blocks on either (a rank caches half the KV heads): the eight requests preempt.
  const std::vector<std::string> flags = {"-m", shared_path(kAidreamsGguf), "--parallel", "8"};
  const std::vector<json> requests = workload();
  std::vector<std::string> single = flags;
  single.insert(single.end(), {"--kv-memory", "256KiB"});
  const std::vector<Reply> want = one_process(single, requests);

  std::vector<std::string> serve = {"serve", "--port",      "0",     "-t", "1", "--tensor-parallel",
                                    "2",     "--kv-memory", "128KiB"};
  serve.insert(serve.end(), flags.begin(), flags.end());
  ServerProcess job;
  ASSERT_TRUE(job.start_program(hosts_mpirun(), job_args(2, serve, false), 90.0)) << job.log();
  expect_spread_over_hosts(job.pid(), 2);
  expect_same_replies(want, timed_all_at_once(job, requests), job.log());
  EXPECT_GT(metric(job, "tandem_preemptions_total"), 0);
  EXPECT_GT(metric(job, "tandem_tensor_parallel_all_reduce_sent_bytes_total\\{rank=\"1\"\\}"), 0);
  EXPECT_GT(metric(job, "tandem_tensor_parallel_all_reduces_total\\{rank=\"0\"\\}"), 0);
  EXPECT_EQ(stop_by_rank_zero(job, rank_pid(job.pid(), 0)), 0) << job.log();
  EXPECT_NE(job.log().find("tensor parallel rank 1/2: stopped after"), std::string::npos) << job.log();
}

// As DisaggServer.AKilledDecodeRankFailsOnlyItsRequests on one machine: prefill:1,decode:2 on
// four hosts, the decode rank on host 3 killed mid-load; its requests end with a 503 naming it,
// the other decode rank's finish, /health says which worker is down, new requests still run.
TEST_F(SimulatedHostsServe, AKilledDecodeRankFailsOnlyItsRequests) {
  if (!have_hosts(4)) return;
  const std::vector<std::string> serve = {"serve",
                                          "--port",
                                          "0",
                                          "-t",
                                          "1",
                                          "--workers",
                                          "prefill:1,decode:2",
                                          "-m",
                                          shared_path(kStories),
                                          "-z",
                                          shared_path(kTok512),
                                          "--parallel",
                                          "2",
                                          "--worker-timeout",
                                          "3"};
  ServerProcess job;
  ASSERT_TRUE(job.start_program(hosts_mpirun(), job_args(4, serve, true), 90.0)) << job.log();
  expect_spread_over_hosts(job.pid(), 4);
  const pid_t victim = logged_pid(job.log(), 3);
  ASSERT_GT(victim, 0) << job.log();
  ASSERT_EQ(rank_pid(job.pid(), 3), victim);
  std::vector<std::future<Reply>> futures;
  for (int i = 0; i < 6; ++i) {
    const json request = {
        {"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"temperature", 1}, {"seed", i}};
    futures.push_back(std::async(std::launch::async, [&job, request] { return complete(job, request, 120); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int failed = 0, finished = 0;
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(90)), std::future_status::ready) << "a request hangs";
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
  EXPECT_GE(finished, 1) << "the other decode rank's requests finish\n" << job.log();
  httplib::Client client = job.client();
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "one decode rank is left";
  const json body = json::parse(health->body);
  EXPECT_EQ(body["status"], "degraded");
  for (const json& worker : body["workers"]) EXPECT_EQ(worker["up"], worker["rank"] != 3) << health->body;
  const Reply after = complete(job, {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}, 120);
  EXPECT_EQ(after.status, 200) << after.error;
  EXPECT_GE(stop_by_rank_zero(job, logged_pid(job.log(), 0)), 0) << job.log();
  EXPECT_NE(job.log().find("a worker is down: leaving MPI without finalising"), std::string::npos) << job.log();
}

// A pipeline stage has no stand-in (src/dist/README.md: a rank that dies mid-run ends the job,
// mpirun aborts it), on one machine as across hosts: stage 2 killed on host 1 while four
// clients send requests one after another, the job ends, and every client's requests stop
// being answered (none hangs).
TEST_F(SimulatedHostsServe, AKilledStageRankEndsThePipelineJob) {
  if (!have_hosts(2)) return;
  const std::vector<std::string> serve = {
      "serve", "--port", "0", "-t", "1", "--pipeline", "2", "-m", shared_path(kAidreamsGguf), "--parallel", "4"};
  ServerProcess job;
  ASSERT_TRUE(job.start_program(hosts_mpirun(), job_args(2, serve, false), 90.0)) << job.log();
  const pid_t victim = rank_pid(job.pid(), 1);
  ASSERT_GT(victim, 0);
  std::atomic<int> answered{0};
  std::atomic<bool> stop{false};
  std::vector<std::future<Reply>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::async(std::launch::async, [&job, &answered, &stop, i] {
      // aidreams260K's context is 128 tokens: one request lasts a fraction of a second.
      Reply reply;
      for (int n = 0; !stop; ++n) {
        reply = complete(job, {{"prompt", "The dream"}, {"max_tokens", 100}, {"seed", i * 1000 + n}}, 120);
        if (reply.status != 200) break;
        ++answered;
      }
      return reply;
    }));
  }
  // Destroyed before `clients` (whose futures wait for their loops): a failed assertion below
  // ends the loops instead of leaving them to run against a live server for ever.
  struct StopClients {
    std::atomic<bool>& stop;
    ~StopClients() { stop = true; }
  } stop_clients{stop};
  // Until the pipeline has answered (a fraction of a second in Release, seconds under ASan).
  for (int i = 0; i < 600 && answered.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_GT(answered.load(), 0) << "the pipeline served before the kill\n" << job.log();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const std::optional<int> code = job.wait_exit(60.0);
  ASSERT_TRUE(code.has_value()) << "the job outlived its stage 2 by a minute\n" << job.log();
  EXPECT_NE(*code, 0) << job.log();
  for (auto& client : clients)
    ASSERT_EQ(client.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "a request hangs";
}

}  // namespace
}  // namespace tandem::testing
