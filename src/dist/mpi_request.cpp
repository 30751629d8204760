// Non-blocking request handles (see mpi_request.h).
#include "dist/mpi_request.h"

#include <fmt/format.h>

#include <thread>
#include <utility>

#include "dist/mpi_error.h"
#include "dist/poll_backoff.h"

namespace tandem {

MpiRequest& MpiRequest::operator=(MpiRequest&& other) noexcept {
  if (this != &other) {
    abandon();
    request_ = std::exchange(other.request_, MPI_REQUEST_NULL);
    kind_ = other.kind_;
    bytes_ = other.bytes_;
  }
  return *this;
}

MpiRequest::~MpiRequest() { abandon(); }

void MpiRequest::forget() noexcept {
  if (!pending()) return;
  MPI_Request_free(&request_);  // a failure leaves nothing better to do: the request is dropped either way
  request_ = MPI_REQUEST_NULL;
}

void MpiRequest::abandon() noexcept {
  if (!pending()) return;
  // Called from the destructor, which cannot throw: failures here are dropped, as the
  // request is being given up on anyway.
  MPI_Cancel(&request_);
  MPI_Wait(&request_, MPI_STATUS_IGNORE);
  request_ = MPI_REQUEST_NULL;
}

void MpiRequest::check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  // Whether MPI freed a failed request is not specified; waiting on it again (as the
  // destructor would) could block forever, so it is forgotten.
  request_ = MPI_REQUEST_NULL;
  check_mpi(code, fmt::format("{} ({})", call, kind_ == Kind::kSend ? "send" : "receive"));
}

MessageInfo MpiRequest::wait() {
  MPI_Status status;
  check(MPI_Wait(&request_, &status), "MPI_Wait");
  return finish(status);
}

std::optional<MessageInfo> MpiRequest::test() {
  int done = 0;
  MPI_Status status;
  check(MPI_Test(&request_, &done, &status), "MPI_Test");
  if (!done) return std::nullopt;
  return finish(status);
}

MessageInfo MpiRequest::finish(const MPI_Status& status) {
  if (kind_ == Kind::kSend) return {.source = -1, .tag = -1, .bytes = bytes_};
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  if (count != bytes_)
    throw MpiError(fmt::format("received a message of {} bytes into a buffer of {} (from rank {}, tag {})", count,
                               bytes_, status.MPI_SOURCE, status.MPI_TAG),
                   0);
  return {.source = status.MPI_SOURCE, .tag = status.MPI_TAG, .bytes = count};
}

void wait_all_polling(std::span<MpiRequest> requests, std::chrono::microseconds spin) {
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  PollBackoff backoff;
  for (;;) {
    bool all_done = true;
    for (MpiRequest& request : requests)
      if (request.pending() && !request.test()) all_done = false;
    if (all_done) return;
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace tandem
