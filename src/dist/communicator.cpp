// Byte-buffer messaging over one MPI communicator (see communicator.h).
#include "dist/communicator.h"

#include <fmt/format.h>

#include <climits>

#include "dist/mpi_error.h"

namespace tandem {

namespace {

// MPI counts are ints (MPI 4's large-count calls are not in OpenMPI 4): a larger buffer is
// refused rather than silently cut. KV block messages are a few MB at most.
int byte_count(size_t bytes, const char* call) {
  if (bytes > static_cast<size_t>(INT_MAX))
    throw MpiError(fmt::format("{}: a message of {} bytes is over MPI's limit of {}", call, bytes, INT_MAX), 0);
  return static_cast<int>(bytes);
}

}  // namespace

Communicator::Communicator(const MpiSession& /*session*/) {
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Communicator::send(int destination, int tag, std::span<const uint8_t> bytes) {
  check_mpi(MPI_Send(bytes.data(), byte_count(bytes.size(), "MPI_Send"), MPI_BYTE, destination, tag, comm_),
            "MPI_Send");
}

MessageInfo Communicator::receive(int source, int tag, std::span<uint8_t> bytes) {
  MPI_Status status;
  check_mpi(MPI_Recv(bytes.data(), byte_count(bytes.size(), "MPI_Recv"), MPI_BYTE, source, tag, comm_, &status),
            "MPI_Recv");
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  if (count != static_cast<int64_t>(bytes.size()))
    throw MpiError(fmt::format("MPI_Recv: a message of {} bytes into a buffer of {} (from rank {}, tag {})", count,
                               bytes.size(), status.MPI_SOURCE, status.MPI_TAG),
                   0);
  return {.source = status.MPI_SOURCE, .tag = status.MPI_TAG, .bytes = count};
}

MpiRequest Communicator::send_async(int destination, int tag, std::span<const uint8_t> bytes) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(bytes.data(), byte_count(bytes.size(), "MPI_Isend"), MPI_BYTE, destination, tag, comm_, &request),
            "MPI_Isend");
  return MpiRequest(request, MpiRequest::Kind::kSend, static_cast<int64_t>(bytes.size()));
}

MpiRequest Communicator::receive_async(int source, int tag, std::span<uint8_t> bytes) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Irecv(bytes.data(), byte_count(bytes.size(), "MPI_Irecv"), MPI_BYTE, source, tag, comm_, &request),
            "MPI_Irecv");
  return MpiRequest(request, MpiRequest::Kind::kReceive, static_cast<int64_t>(bytes.size()));
}

MessageInfo Communicator::receive_any_size(int source, int tag, std::vector<uint8_t>& out) {
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Mprobe(source, tag, comm_, &message, &status), "MPI_Mprobe");
  return receive_matched(message, status, out);
}

std::optional<MessageInfo> Communicator::try_receive_any_size(int source, int tag, std::vector<uint8_t>& out) {
  int found = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Improbe(source, tag, comm_, &found, &message, &status), "MPI_Improbe");
  if (!found) return std::nullopt;
  return receive_matched(message, status, out);
}

MessageInfo Communicator::receive_matched(MPI_Message message, const MPI_Status& status, std::vector<uint8_t>& out) {
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  out.resize(static_cast<size_t>(count));
  MPI_Status received;
  check_mpi(MPI_Mrecv(out.data(), count, MPI_BYTE, &message, &received), "MPI_Mrecv");
  return {.source = status.MPI_SOURCE, .tag = status.MPI_TAG, .bytes = count};
}

void Communicator::barrier() { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace tandem
