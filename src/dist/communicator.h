// Communicator: the ranks of an MPI job as a group that exchanges byte buffers with tags —
// blocking and non-blocking sends and receives, and the receive of a message whose size the
// receiver does not know (probed first). It owns a private duplicate of MPI_COMM_WORLD, so
// no other library's messages match its own, with MPI_ERRORS_RETURN set on it: failures come
// back as MpiError carrying MPI's error string instead of aborting the job. Not thread-safe:
// one thread at a time (MpiSession's MPI_THREAD_SERIALIZED). What the bytes mean is the
// caller's business (kv/kv_block_message.h for KV blocks).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dist/mpi_request.h"
#include "dist/mpi_session.h"

namespace tandem {

constexpr int kAnySource = MPI_ANY_SOURCE;
constexpr int kAnyTag = MPI_ANY_TAG;

class Communicator {
 public:
  // Every rank of the job (a duplicate of MPI_COMM_WORLD; a collective call, so every rank
  // constructs its Communicators in the same order). `session` must outlive it.
  explicit Communicator(const MpiSession& session);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Blocking: returns once `bytes` may be reused (not necessarily once received).
  void send(int destination, int tag, std::span<const uint8_t> bytes);
  // Blocking receive of a message of exactly bytes.size() bytes (MpiError for another size).
  MessageInfo receive(int source, int tag, std::span<uint8_t> bytes);
  // Non-blocking: `bytes` must stay valid, and unchanged for a send, until the request completes.
  MpiRequest send_async(int destination, int tag, std::span<const uint8_t> bytes);
  MpiRequest receive_async(int source, int tag, std::span<uint8_t> bytes);

  // Waits for the next message matching (source, tag) — kAnySource / kAnyTag match any — and
  // receives it into `out`, resized to its size (capacity reused). The probe and the receive
  // are matched (MPI_Mprobe / MPI_Mrecv): no other receive can take the probed message between.
  MessageInfo receive_any_size(int source, int tag, std::vector<uint8_t>& out);
  // The same without blocking: nullopt, `out` untouched, when no such message has arrived.
  std::optional<MessageInfo> try_receive_any_size(int source, int tag, std::vector<uint8_t>& out);

  void barrier();

 private:
  MessageInfo receive_matched(MPI_Message message, const MPI_Status& status, std::vector<uint8_t>& out);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace tandem
