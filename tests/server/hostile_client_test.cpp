// Hostile clients against the real `tandem serve` on 127.0.0.1, over raw TCP (raw_http.h),
// at the connection level: oversized and endless bodies, slowloris and idle sockets, a flood
// past --parallel + --max-queue, SIGTERM with streams in flight, clients that vanish
// mid-request, pipelining and HTTP/1.0. Each TEST is one attack and asserts the fixed
// behaviour — and, where it matters, that another client is served meanwhile. Every wait is
// bounded; no assertion is a speed. Bad request content and start-up: hostile_request_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <latch>
#include <thread>

#include "generated_tiny_model.h"
#include "hostile_checks.h"

namespace tandem::testing::hostile {
namespace {

using namespace std::chrono_literals;

// Attack: request bodies bigger than --max-body-bytes — streamed in chunks (no length up
// front), or announced by Content-Length — and a 100 MB Content-Length to an unknown path,
// with and without an API key, whose body never comes. Fixed: 413 with an OpenAI error and
// the connection closed, the server's memory does not grow with what the client sends, and a
// request that can be refused from its head alone (401, 404, 413) is answered at once,
// without waiting for the body. Other clients are served afterwards.
TEST(HostileClient, ChunkedBodyOverLimitIs413) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--max-body-bytes", "1048576"})) << server.log();
  const int port = server.port();
  expect_completion_served(port, "before the attack");

  // Sends a chunked POST of `total` bytes from a second thread while this one reads the answer
  // (a server that stops reading would otherwise leave both ends blocked in send). With
  // `wait_for_close`, then waits for the server to close the connection; otherwise ends its
  // own sending side, as a client that is done does (a server may read and drop the rest of a
  // refused body for a moment before closing).
  const auto send_chunked = [port](size_t total, bool wait_for_close) {
    RawConnection connection;
    std::optional<RawResponse> res;
    if (!connection.connect(port)) return std::make_pair(res, false);
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n";
    const size_t chunk_size = 64 << 10;
    char size_hex[16];
    std::snprintf(size_hex, sizeof size_hex, "%zx", chunk_size);
    const std::string chunk = std::string(size_hex) + "\r\n" + std::string(chunk_size, ' ') + "\r\n";
    std::atomic<bool> stop{false};
    std::thread sender([&, fd = connection.fd()] {
      if (RawConnection::send_all(fd, head, 5.0) != 0) return;
      for (size_t sent = 0; sent < total && !stop; sent += chunk_size)
        if (RawConnection::send_all(fd, chunk, 2.0) != 0) return;  // refused: the server closed
      RawConnection::send_all(fd, "0\r\n\r\n", 2.0);
    });
    res = connection.read_response(10.0);
    bool closed = false;
    if (wait_for_close) {
      closed = res && connection.wait_closed(5.0);
      stop = true;
      sender.join();
    } else {
      stop = true;
      sender.join();
      ::shutdown(connection.fd(), SHUT_WR);
      closed = res && connection.wait_closed(5.0);
    }
    return std::make_pair(res, closed);
  };

  const int64_t rss_before = server.rss_bytes();
  const size_t body_bytes = 16 << 20;
  const int bodies = 8;
  for (int i = 0; i < bodies; ++i) {
    const auto [res, closed] = send_chunked(body_bytes, /*wait_for_close=*/i == 0);
    expect_error(res, 413, "chunked body " + std::to_string(i) + " of 16 MiB over a 1 MiB limit");
    EXPECT_TRUE(closed) << "the server kept the connection open after refusing a chunked body it did not read";
    if (HasFailure()) break;
  }
  const int64_t rss_after = server.rss_bytes();
  ASSERT_GT(rss_before, 0);
  EXPECT_LT(rss_after - rss_before, int64_t{64} << 20)
      << "RSS grew from " << rss_before << " to " << rss_after << " bytes after " << bodies << " refused "
      << (body_bytes >> 20) << " MiB chunked bodies: the server buffers what it refuses";

  {  // Content-Length over the limit: refused from the head; the body is never sent.
    RawConnection connection;
    ASSERT_TRUE(connection.connect(port));
    ASSERT_TRUE(connection.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: 4194304\r\n\r\n"));
    expect_error(connection.read_response(3.0), 413, "Content-Length 4 MiB over a 1 MiB limit, body not sent");
  }
  {  // An unknown path with a 100 MB body that never comes: 404 at once.
    RawConnection connection;
    ASSERT_TRUE(connection.connect(port));
    ASSERT_TRUE(connection.send("POST /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n"));
    expect_error(connection.read_response(2.0), 404, "unknown path, 100 MB Content-Length, body not sent");
  }
  expect_health(port, 2.0, "after the oversized bodies");
  expect_completion_served(port, "after the oversized bodies");

  // With a key, a keyless request with a 100 MB body that never comes: 401 at once.
  ServerProcess keyed;
  ASSERT_TRUE(keyed.start({"--api-key", "k"})) << keyed.log();
  {
    RawConnection connection;
    ASSERT_TRUE(connection.connect(keyed.port()));
    ASSERT_TRUE(connection.send("POST /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n"));
    expect_error(connection.read_response(2.0), 401, "no key, unknown path, 100 MB Content-Length, body not sent");
  }
  expect_completion_served(keyed.port(), "with the key, after the keyless attack", {"Authorization: Bearer k"});
  EXPECT_EQ(server.stop(), 0) << server.log();
  EXPECT_EQ(keyed.stop(), 0) << keyed.log();
}

// Attack: slowloris — 32 connections each sending a request head one byte every 0.5 s — plus
// 100 connected sockets that send nothing, against --read-timeout 2. Fixed: connections hold
// sockets, not threads: /health and a completion are served meanwhile, and the server closes
// every slowloris connection once its head is overdue (read-timeout + slack).
TEST(HostileClient, SlowlorisAndIdleSocketsDoNotStarveOthers) {
  REQUIRE_MODEL();
  constexpr double kReadTimeout = 2.0;
  constexpr double kSlack = 3.0;
  ServerProcess server;
  ASSERT_TRUE(server.start({"--read-timeout", "2"})) << server.log();
  const int port = server.port();

  std::vector<RawConnection> idle(100);
  for (RawConnection& c : idle) ASSERT_TRUE(c.connect(port)) << c.error();

  constexpr int kSlow = 32;
  std::vector<RawConnection> slow(kSlow);
  for (RawConnection& c : slow) ASSERT_TRUE(c.connect(port)) << c.error();
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(200, 'z');
  std::vector<double> closed_after(kSlow, -1.0);  // seconds from the first byte to the server's close
  std::atomic<bool> dripping{true};
  std::thread drip([&] {
    const auto start = Clock::now();
    size_t next = 0;
    for (int open = kSlow; open > 0 && seconds_since(start) < kReadTimeout + kSlack + 1.0 && next < head.size();) {
      open = 0;
      for (int i = 0; i < kSlow; ++i) {
        if (closed_after[i] >= 0) continue;
        const int fd = slow[i].fd();
        char sink[4096];
        ssize_t n;
        while ((n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {  // a 408 before the close is fine
        }
        const bool gone = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
                          ::send(fd, head.data() + next, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0;
        if (gone)
          closed_after[i] = seconds_since(start);
        else
          ++open;
      }
      ++next;
      std::this_thread::sleep_for(500ms);
    }
    dripping = false;
  });

  // Meanwhile the server answers others (one failure is enough to say so: the checks stop).
  for (int i = 0; i < 5 && dripping && !HasFailure(); ++i) {
    expect_health(port, 2.0, "during slowloris, check " + std::to_string(i));
    std::this_thread::sleep_for(300ms);
  }
  if (!HasFailure()) {
    const auto res = exchange(port, http_request("POST", "/v1/completions", completion(4)), 5.0);
    EXPECT_TRUE(res && res->status == 200) << "completion during slowloris: " << describe(res);
  }
  drip.join();

  for (int i = 0; i < kSlow; ++i) {
    EXPECT_GE(closed_after[i], 0.0) << "slowloris connection " << i << " was never closed by the server";
    EXPECT_LE(closed_after[i], kReadTimeout + kSlack) << "slowloris connection " << i << " closed late";
  }
  expect_health(port, 2.0, "after slowloris");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: 200 simultaneous streamed completions against --parallel 8 --max-queue 16. Fixed:
// admission is bounded — every request gets either a whole SSE stream (200, ending in
// [DONE]) or a prompt 503 with Retry-After and an OpenAI error; some are shed; the admitted
// ones (at least parallel + queue) complete; /health is answered throughout.
TEST(HostileClient, FloodPastQueueIsShedWith503) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "8", "--max-queue", "16"})) << server.log();
  const int port = server.port();

  constexpr int kClients = 200;
  std::vector<std::optional<RawResponse>> results(kClients);
  std::vector<std::string> errors(kClients);
  std::latch connected(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      RawConnection connection;
      const bool ok = connection.connect(port, 5.0);
      connected.arrive_and_wait();  // all send at once
      if (ok && connection.send(http_request("POST", "/v1/completions", completion(32, true))))
        results[i] = connection.read_response(15.0);
      if (!results[i]) errors[i] = connection.error();
    });
  }
  std::atomic<bool> flooding{true};
  std::vector<std::string> health_failures;
  std::thread health([&] {
    while (flooding) {
      std::string why;
      const auto start = Clock::now();
      const auto res = exchange(port, http_request("GET", "/health"), 2.0, &why);
      if (!res || res->status != 200 || seconds_since(start) >= 2.0)
        health_failures.push_back(res ? describe(res) : why);
      std::this_thread::sleep_for(200ms);
    }
  });
  for (std::thread& t : clients) t.join();
  flooding = false;
  health.join();

  int served = 0;
  int shed = 0;
  for (int i = 0; i < kClients; ++i) {
    const std::string what = "client " + std::to_string(i);
    ASSERT_TRUE(results[i]) << what << ": no response (" << errors[i] << ")";
    const RawResponse& res = *results[i];
    if (res.status == 200) {
      ++served;
      expect_complete_stream(res, what);
    } else {
      ++shed;
      expect_error(results[i], 503, what);
      EXPECT_TRUE(res.header("Retry-After")) << what << ": a 503 without Retry-After";
    }
  }
  EXPECT_GE(shed, 1) << "200 simultaneous streams with 8 parallel + 16 queued: none was shed";
  EXPECT_GE(served, 24) << served << " served, " << shed << " shed";
  EXPECT_TRUE(health_failures.empty()) << health_failures.size() << " /health checks failed during the flood, first: "
                                       << (health_failures.empty() ? "" : health_failures.front());
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: SIGTERM while streams are generating and more requests wait (--parallel 2
// --max-queue 32 --shutdown-timeout 10). Fixed: admitted requests run to the end (streams
// with their finish chunk and [DONE]); queued ones get a 503 JSON (streams too: their headers
// are not sent before the first token); no request sees a connection closed without a byte;
// new connections are refused or get 503; the process exits 0 within the shutdown timeout.
TEST(HostileClient, SigtermFinishesAdmittedAndRefusesTheRest) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2", "--max-queue", "32", "--shutdown-timeout", "10"})) << server.log();
  const int port = server.port();

  constexpr int kStreams = 10;
  constexpr int kPlain = 10;
  std::vector<std::optional<RawResponse>> results(kStreams + kPlain);
  std::vector<std::string> errors(kStreams + kPlain);
  std::latch sent(kStreams + kPlain);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams + kPlain; ++i) {
    clients.emplace_back([&, i] {
      RawConnection connection;
      // Greedy "The dream" runs to the end of the context: each request is as long as it can be.
      const json request = {{"prompt", "The dream"}, {"max_tokens", 400}, {"temperature", 0}, {"stream", i < kStreams}};
      const bool ok =
          connection.connect(port) && connection.send(http_request("POST", "/v1/completions", request.dump()));
      sent.count_down();
      if (ok) results[i] = connection.read_response(25.0);
      if (!results[i]) errors[i] = connection.error();
    });
  }
  // SIGTERM once every request is sent and some wait in the queue (or after 5 s regardless).
  sent.wait();
  double waiting = 0;
  for (const auto start = Clock::now(); seconds_since(start) < 5.0 && waiting < 4;) {
    waiting = metric(metrics_page(port), "tandem_requests_waiting").value_or(0);
    if (waiting < 4) std::this_thread::sleep_for(2ms);
  }
  server.send_signal(SIGTERM);
  const auto signalled = Clock::now();

  // (No ASSERT until the client threads are joined: returning would leave them running.)
  std::this_thread::sleep_for(100ms);
  {  // A newcomer during the drain: refused, or answered 503.
    RawConnection late;
    if (late.connect(port, 2.0)) {
      const auto res = late.send(http_request("GET", "/health")) ? late.read_response(5.0) : std::nullopt;
      EXPECT_TRUE(res && res->status == 503)
          << "a request made after SIGTERM: " << describe(res) << " (" << late.error() << ")";
    } else {
      EXPECT_EQ(late.last_errno(), ECONNREFUSED) << late.error();
    }
  }

  const std::optional<int> code = server.wait_exit(10.0 + 5.0);
  EXPECT_EQ(code, std::optional<int>(0)) << "exit code after SIGTERM with --shutdown-timeout 10 (none: still "
                                            "running 15 s later): "
                                         << server.log();
  EXPECT_LT(seconds_since(signalled), 15.0);
  for (std::thread& t : clients) t.join();

  int refused = 0;
  for (int i = 0; i < kStreams + kPlain; ++i) {
    const std::string what = (i < kStreams ? "stream " : "request ") + std::to_string(i);
    ASSERT_TRUE(results[i]) << what << ": the connection ended without a response (" << errors[i] << ")";
    if (results[i]->status == 200) {
      if (i < kStreams) {
        expect_complete_stream(*results[i], what);
      } else {
        const json body = parse(results[i]->body);
        EXPECT_TRUE(body.is_object() && body["choices"][0]["finish_reason"].is_string())
            << what << ": " << results[i]->body;
      }
    } else {
      ++refused;
      expect_error(results[i], 503, what);
    }
  }
  if (waiting >= 4) {
    EXPECT_GE(refused, 1) << waiting << " requests were queued at SIGTERM, yet none got 503";
  }
}

// Attack (row 4, the other half): clients connected just before SIGTERM whose request comes
// after it. Before, such accepted connections were closed without a byte. Fixed: a connection
// that has not sent a request yet gets a grace period at shutdown, and its request a 503.
TEST(HostileClient, RequestsOnConnectionsOpenedBeforeSigtermGet503) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--shutdown-timeout", "5"})) << server.log();
  constexpr int kConnections = 8;
  std::vector<RawConnection> connections(kConnections);
  for (RawConnection& connection : connections) ASSERT_TRUE(connection.connect(server.port())) << connection.error();
  std::this_thread::sleep_for(100ms);  // accepted by the server, still silent
  server.send_signal(SIGTERM);
  std::this_thread::sleep_for(200ms);
  for (RawConnection& connection : connections) {
    ASSERT_TRUE(connection.send(http_request("POST", "/v1/completions", completion(4)))) << connection.error();
    const auto res = connection.read_response(5.0);
    ASSERT_TRUE(res) << "closed without a byte: " << connection.error();
    expect_error(res, 503, "a request sent after SIGTERM on an older connection");
    EXPECT_TRUE(res->header("Retry-After").has_value());
  }
  const std::optional<int> code = server.wait_exit(10.0);
  ASSERT_TRUE(code) << "still running 10 s after SIGTERM";
  EXPECT_EQ(*code, 0) << server.log();
}

// A test-tiny model with aidreams260K's vocabulary and a 4096-token context, written once
// per test process (random weights: with ignore_eos a request runs to max_tokens).
const std::string& long_context_model() {
  static const GeneratedTinyModel model("tandem-hostile", shared_path(kAidreamsGguf));
  return model.path();
}

// Attack: clients that send a long non-streamed completion (max_tokens 4000) and close the
// socket while it generates, and one that closes a stream after its first event. Fixed: the
// server notices and cancels them — no request left running, no KV block held, every one
// counted as cancelled, and far fewer tokens generated than if they had run on.
//
// To abandon requests mid-generation on any machine, each must outlast the time the clients
// take to send them all: 256 of them share one batch (each step decodes 256 sequences),
// ignore_eos runs each to max_tokens, and the model's context is 4096 (aidreams260K's 128
// tokens ran out before the last of 256 requests was sent on one fast CI machine: all
// finished, none cancelled); the clients close as soon as the engine holds them all (not after
// a fixed delay that a fast machine could outrun).
TEST(HostileClient, DisconnectedClientsAreCancelled) {
  REQUIRE_MODEL();
  ASSERT_FALSE(long_context_model().empty()) << "gen-model failed";
  constexpr int kPlain = 256;
  constexpr int kMaxTokens = 4000;
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", std::to_string(kPlain + 4)}, 30.0, long_context_model())) << server.log();
  const int port = server.port();
  const int context = context_length(server);
  ASSERT_GE(context, kMaxTokens) << "the ready line's context: " << server.log();
  const json request = {{"prompt", "The dream"}, {"max_tokens", kMaxTokens}, {"temperature", 0}, {"ignore_eos", true}};
  const auto probe = post(port, "/v1/completions", json{{"prompt", "The dream"}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(probe && probe->status == 200) << describe(probe);
  const int64_t prompt_tokens = parse(probe->body)["usage"]["prompt_tokens"].get<int64_t>();
  const double before = metric(metrics_page(port), "tandem_generation_tokens_total").value_or(0);

  std::vector<RawConnection> plain(kPlain);
  for (RawConnection& c : plain) ASSERT_TRUE(c.connect(port)) << c.error();
  RawConnection stream;
  ASSERT_TRUE(stream.connect(port));
  json streamed = request;
  streamed["stream"] = true;
  for (RawConnection& c : plain) ASSERT_TRUE(c.send(http_request("POST", "/v1/completions", request.dump())));
  ASSERT_TRUE(stream.send(http_request("POST", "/v1/completions", streamed.dump())));

  // Once the engine holds all of them (running or queued; or after 5 s regardless), the
  // stream's client leaves after its first event, then the others at once — while the batch
  // is full, so every one of them still has most of its tokens to go.
  for (const auto start = Clock::now(); seconds_since(start) < 5.0;) {
    const std::string page = metrics_page(port);
    const double in_engine =
        metric(page, "tandem_requests_running").value_or(0) + metric(page, "tandem_requests_waiting").value_or(0);
    if (in_engine >= kPlain + 1) break;
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(stream.read_until("data: ", 10.0)) << "the stream sent no event: " << stream.error();
  stream.close();
  for (RawConnection& c : plain) c.close();

  // Within a few seconds the engine is idle again and has counted every request cancelled.
  std::string page;
  const auto settled = [&] {
    page = metrics_page(port);
    return metric(page, "tandem_requests_running") == 0.0 && metric(page, "tandem_kv_blocks_used") == 0.0 &&
           metric(page, "tandem_requests_cancelled_total").value_or(0) >= kPlain + 1;
  };
  for (const auto start = Clock::now(); seconds_since(start) < 5.0 && !settled();) std::this_thread::sleep_for(50ms);
  const std::string seen =
      metric_lines(page, {"tandem_requests_running", "tandem_kv_blocks_used", "tandem_requests_finished_total",
                          "tandem_requests_cancelled_total", "tandem_generation_tokens_total"});
  EXPECT_EQ(metric(page, "tandem_requests_running"), 0.0) << seen;
  EXPECT_EQ(metric(page, "tandem_kv_blocks_used"), 0.0) << seen;
  EXPECT_GE(metric(page, "tandem_requests_cancelled_total").value_or(0), kPlain + 1)
      << kPlain << " abandoned completions and 1 abandoned stream:\n"
      << seen;
  // Each could have generated min(max_tokens, context - prompt + 1) tokens (the last one is
  // sampled, never fed).
  const double could_generate = (kPlain + 1) * std::min<double>(kMaxTokens, context - prompt_tokens + 1);
  const double generated = metric(page, "tandem_generation_tokens_total").value_or(1e9) - before;
  EXPECT_LT(generated, could_generate / 2) << "the abandoned requests kept generating: " << generated << " of up to "
                                           << could_generate << " tokens (context " << context << "):\n"
                                           << seen;
  expect_completion_served(port, "after the abandoned requests");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: three requests pipelined in one write on one keep-alive connection. Fixed: three
// responses, in request order, on that connection.
TEST(HostileClient, PipelinedRequestsAreAnsweredInOrder) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  RawConnection connection;
  ASSERT_TRUE(connection.connect(server.port()));
  ASSERT_TRUE(connection.send(http_request("GET", "/health") + http_request("POST", "/v1/completions", completion(4)) +
                              http_request("GET", "/v1/models")));
  const auto health = connection.read_response(10.0);
  ASSERT_TRUE(health) << connection.error();
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(parse(health->body).value("status", ""), "ok") << health->body;
  const auto generated = connection.read_response(10.0);
  ASSERT_TRUE(generated) << connection.error();
  EXPECT_EQ(generated->status, 200) << generated->body;
  EXPECT_EQ(parse(generated->body).value("object", ""), "text_completion") << generated->body;
  const auto models = connection.read_response(10.0);
  ASSERT_TRUE(models) << connection.error();
  EXPECT_EQ(models->status, 200) << models->body;
  EXPECT_EQ(parse(models->body).value("object", ""), "list") << models->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Attack: an HTTP/1.0 client, which cannot parse chunked framing. Fixed: a stream comes as a
// close-delimited SSE body (no Transfer-Encoding, no chunk sizes) ending in [DONE], and the
// server closes the connection to end it; a non-streamed answer has a Content-Length.
TEST(HostileClient, Http10StreamIsCloseDelimited) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  const int port = server.port();
  {
    RawConnection connection;
    ASSERT_TRUE(connection.connect(port));
    ASSERT_TRUE(connection.send(http_request("POST", "/v1/completions", completion(8, true), {}, "1.0")));
    const auto res = connection.read_response(10.0);
    ASSERT_TRUE(res) << connection.error();
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_FALSE(res->header("Transfer-Encoding")) << "Transfer-Encoding: " << *res->header("Transfer-Encoding");
    EXPECT_EQ(res->body.rfind("data: ", 0), 0u) << "the body does not start with an SSE event: " << res->raw_body;
    const std::string done = "data: [DONE]\n\n";
    EXPECT_TRUE(res->body.size() >= done.size() && res->body.substr(res->body.size() - done.size()) == done)
        << res->raw_body;
    EXPECT_TRUE(res->close_delimited || connection.wait_closed(3.0)) << "the connection stayed open after the stream";
  }
  {
    RawConnection connection;
    ASSERT_TRUE(connection.connect(port));
    ASSERT_TRUE(connection.send(http_request("POST", "/v1/completions", completion(8), {}, "1.0")));
    const auto res = connection.read_response(10.0);
    ASSERT_TRUE(res) << connection.error();
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_TRUE(res->header("Content-Length")) << "a non-streamed HTTP/1.0 answer without Content-Length";
    EXPECT_FALSE(res->header("Transfer-Encoding"));
    EXPECT_EQ(parse(res->body).value("object", ""), "text_completion") << res->body;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace tandem::testing::hostile
