// The listener and the server's lifecycle (see http_server.h): bind without sharing the
// port, accept into sessions up to --max-connections, and the graceful shutdown sequence.
#include "server/http/http_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "base/error.h"
#include "model/model_config.h"
#include "server/http/server_state.h"
#include "server/http/session.h"

namespace tandem::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// At shutdown, how long a connection that has sent nothing yet may take to send its request.
constexpr std::chrono::milliseconds kFreshConnectionGrace{1000};
// Connections past --max-connections that may still ask for /health (load balancers' and
// Kubernetes' probes must succeed while slow clients hold every connection); each gets a
// second for its request and one answer.
constexpr int64_t kHealthReserve = 16;

struct HttpServer::Impl {
  explicit Impl(ServerConfig config) : state(std::move(config)), acceptor(state.io) {}

  ServerState state;
  tcp::acceptor acceptor;
  int port = 0;
  std::thread io_thread;
  std::mutex stop_mutex;
  bool stopped = false;

  void start_session(tcp::socket socket) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // an SSE chunk must leave at once
    const auto regular = static_cast<int64_t>(state.sessions.size()) - state.health_only_sessions;
    const bool over = regular >= state.config.max_connections;
    if (over && state.health_only_sessions >= kHealthReserve) {
      state.counters->metrics.count(TransportEvent::ConnectionRefused);
      asio::co_spawn(state.io, Session::refuse(state, std::move(socket)), asio::detached);
      return;
    }
    auto session = std::make_shared<Session>(state, std::move(socket), /*health_only=*/over);
    asio::co_spawn(state.io, Session::run(std::move(session)), asio::detached);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
      if (ec) {
        // Out of descriptors (or a connection reset before we took it): pause, never spin.
        asio::steady_timer pause(state.io, std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        continue;
      }
      start_session(std::move(socket));
    }
  }

  // I/O thread: stop accepting, but answer what already waits in the kernel's backlog (those
  // clients connected before the signal and deserve a 503, not a reset).
  void stop_accepting() {
    state.shutting_down = true;
    state.abandon_work = true;
    if (acceptor.is_open()) {
      beast::error_code ec;
      acceptor.non_blocking(true, ec);
      for (;;) {
        tcp::socket socket(state.io);
        acceptor.accept(socket, ec);
        if (ec) break;
        start_session(std::move(socket));
      }
      acceptor.close(ec);
    }
    for (Session* session : state.sessions) session->close_if_idle(/*include_fresh=*/false);
    // Connections that have sent nothing yet get a moment for their request, then close.
    asio::co_spawn(
        state.io,
        [this]() -> asio::awaitable<void> {
          asio::steady_timer grace(state.io, kFreshConnectionGrace);
          co_await grace.async_wait(asio::as_tuple(asio::use_awaitable));
          for (Session* session : state.sessions) session->close_if_idle(/*include_fresh=*/true);
        },
        asio::detached);
  }
};

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
  const ServerConfig& config = impl_->state.config;
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(config.host, ec);
  TANDEM_CHECK_INPUT(!ec, "--host '{}' is not an IP address", config.host);
  // Cast to 16 bits, 70000 would be port 4464 and -1 port 65535.
  TANDEM_CHECK_INPUT(config.port >= 0 && config.port <= 65535,
                     "--port {} is not a TCP port (0 to 65535; 0: any free one)", config.port);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(config.port));
  tcp::acceptor& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  TANDEM_CHECK_INPUT(!ec, "cannot open a socket: {}", ec.message());
  // SO_REUSEADDR only (a restart may bind over TIME_WAIT); never SO_REUSEPORT, which would
  // let a second server share the port and split the traffic between two models.
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  TANDEM_CHECK_INPUT(
      !ec, "cannot bind {}:{}: {}{}", config.host, config.port, ec.message(),
      ec == asio::error::address_in_use ? " (another server is listening there; pick another --port)" : "");
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  TANDEM_CHECK_INPUT(!ec, "cannot listen on {}:{}: {}", config.host, config.port, ec.message());
  impl_->port = acceptor.local_endpoint().port();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::start() {
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped || impl_->io_thread.joinable()) return;
  asio::co_spawn(impl_->state.io, impl_->accept_loop(), asio::detached);
  impl_->io_thread = std::thread([this] { impl_->state.io.run(); });
}

void HttpServer::attach(GenerationService* engine, ServedModel model, chat::ChatRenderer chat_renderer) {
  TANDEM_ASSERT(!model.names.empty());
  impl_->state.model_id = model.names.front();
  impl_->state.model_names = std::move(model.names);
  impl_->state.model_path = std::move(model.path);
  // A reranker's head is read from its GGUF (rank_head.h); other models have none.
  if (impl_->state.model_path.ends_with(".gguf"))
    impl_->state.rank_head = read_rank_head(impl_->state.model_path, engine->model_config().d_model);
  impl_->state.tool_call_syntax = chat_renderer.jinja_template.empty()
                                      ? chat::default_tool_call_syntax(chat::ToolCallFormat::kHermes)
                                      : chat::detect_tool_call_syntax(chat_renderer.jinja_template);
  if (impl_->state.config.tool_call_format)
    impl_->state.tool_call_syntax.format = *impl_->state.config.tool_call_format;
  impl_->state.chat_renderer = std::move(chat_renderer);
  // The I/O thread reads the slots only once the engine is published below.
  impl_->state.slots.resize(engine->max_seqs());
  impl_->state.engine.store(engine);  // publishes the model's names, path and chat_renderer to the I/O thread
}

void HttpServer::shutdown(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  ServerState& state = impl_->state;
  {
    std::lock_guard lock(impl_->stop_mutex);
    if (impl_->stopped || !impl_->io_thread.joinable()) return;
  }
  std::promise<void> accepted_none;
  asio::post(state.io, [this, &accepted_none] {
    impl_->stop_accepting();
    accepted_none.set_value();
  });
  accepted_none.get_future().wait();

  GenerationService* engine = state.engine.load();
  ServingCounters& counters = *state.counters;
  const auto wait_until = [&](Clock::time_point until, auto done) {
    while (!done() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  };
  if (engine != nullptr) {
    engine->cancel_waiting();  // their sessions answer 503
    if (!wait_until(deadline, [&] { return counters.in_engine.load() == 0; })) {
      std::fprintf(stderr, "tandem serve: --shutdown-timeout reached; cancelling %lld requests\n",
                   static_cast<long long>(counters.in_engine.load()));
      engine->cancel_all();
      // A cancel takes effect at the engine's next step: bounded, but not instant.
      wait_until(Clock::now() + std::chrono::seconds(2), [&] { return counters.in_engine.load() == 0; });
    }
  }
  // Let the last final chunks and 503s reach their clients, and connections accepted but
  // still silent send their request (they are closed after kFreshConnectionGrace).
  wait_until(std::max(deadline, Clock::now() + std::chrono::milliseconds(200)),
             [&] { return counters.busy_sessions.load() == 0 && counters.fresh_connections.load() == 0; });
  stop();
}

void HttpServer::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->state.io.stop();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
  impl_->state.work.join();
}

}  // namespace tandem::server
