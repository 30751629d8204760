// Session::on_worker (see session.h): a request's parsing and tokenizing run on the worker
// pool while the session's coroutine, on the I/O thread, watches the client. The job learns
// that nobody waits for it any more through a flag it polls (`abandoned`), never through the
// socket, which stays the I/O thread's. Included by the .cpp files that prepare requests.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "server/http/session.h"
#include "server/refusal.h"

namespace tandem::server {

// How often a session whose request is on the worker pool checks that its client is there.
inline constexpr std::chrono::milliseconds kPeerPoll{200};

// Shared by the worker running the job and the session waiting for it. Result: default-
// constructible, with a `Refusal refusal` (a job abandoned before it started is one).
template <class Result>
struct WorkerJob {
  explicit WorkerJob(const boost::asio::any_io_executor& io) : wake(io) {}
  std::atomic<bool> client_left{false};  // set by the session
  std::atomic<bool> done{false};         // set by the worker, after result or error
  std::optional<Result> result;
  std::exception_ptr error;
  boost::asio::steady_timer wake;  // the session's wait, cut short when the job is done
};

template <class Work>
auto Session::on_worker(Work work) -> boost::asio::awaitable<decltype(work(std::function<bool()>()))> {
  using Result = decltype(work(std::function<bool()>()));
  auto job = std::make_shared<WorkerJob<Result>>(stream_.get_executor());
  const std::atomic<bool>& stopping = state_.abandon_work;
  boost::asio::post(state_.work, [job, &work, &stopping, io = stream_.get_executor()] {
    const std::function<bool()> abandoned = [&job, &stopping] { return job->client_left.load() || stopping.load(); };
    // Not started at all when it was abandoned while it waited for a worker.
    try {
      if (abandoned()) {
        job->result.emplace();
        job->result->refusal = abandoned_refusal();
      } else {
        job->result.emplace(work(abandoned));
      }
    } catch (...) {
      job->error = std::current_exception();
    }
    job->done = true;
    boost::asio::post(io, [job] { job->wake.cancel(); });
  });
  while (!job->done) {
    job->wake.expires_after(kPeerPoll);
    co_await job->wake.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (!job->done && !job->client_left && co_await peer_left()) job->client_left = true;
  }
  if (job->error) std::rethrow_exception(job->error);
  co_return std::move(*job->result);
}

}  // namespace tandem::server
