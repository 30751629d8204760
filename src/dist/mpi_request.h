// MpiRequest: one non-blocking send or receive in flight, as a move-only handle — wait()
// blocks until it completes, test() asks without blocking. Also MessageInfo, what a completed
// receive learnt (source, tag, bytes). The buffer a request reads or fills belongs to the
// caller and must outlive the request's completion.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace tandem {

struct MessageInfo {
  int source = -1;
  int tag = -1;
  int64_t bytes = 0;
};

class MpiRequest {
 public:
  enum class Kind { kSend, kReceive };

  MpiRequest() = default;
  // `bytes`: the buffer's size; a receive that gets a message of another size fails.
  MpiRequest(MPI_Request request, Kind kind, int64_t bytes) : request_(request), kind_(kind), bytes_(bytes) {}
  MpiRequest(MpiRequest&& other) noexcept { *this = std::move(other); }
  MpiRequest& operator=(MpiRequest&& other) noexcept;
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;
  // A request still pending is cancelled and then waited for (MPI requires every request be
  // completed): a receive ends at once; a send MPI cannot cancel ends when the peer takes it.
  ~MpiRequest();

  bool pending() const { return request_ != MPI_REQUEST_NULL; }
  // Blocks until done. For a receive: where it came from and its size; for a send: the bytes
  // sent. MpiError when MPI reports a failure or a receive's message is not the buffer's size.
  MessageInfo wait();
  // The same without blocking: nullopt while the request is still in flight.
  std::optional<MessageInfo> test();
  // Gives the request up without waiting for it (MPI_Request_free): for a send to a peer that
  // is gone, which would never complete and so would block the destructor forever. The
  // buffer must then stay untouched for as long as MPI might still read it (the caller keeps
  // it until the process ends).
  void forget() noexcept;

 private:
  void abandon() noexcept;
  void check(int code, const char* call);  // MpiError unless MPI_SUCCESS
  MessageInfo finish(const MPI_Status& status);

  MPI_Request request_ = MPI_REQUEST_NULL;
  Kind kind_ = Kind::kSend;
  int64_t bytes_ = 0;
};

// Polls the pending requests of `requests` (MPI_Test, which also moves sends' fragments along)
// until every one has completed: for `spin` without sleeping (a peer that answers within
// microseconds), then sleeping between polls as PollBackoff does (never holding a core).
void wait_all_polling(std::span<MpiRequest> requests, std::chrono::microseconds spin = {});

}  // namespace tandem
