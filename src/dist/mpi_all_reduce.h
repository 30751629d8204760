// MpiAllReduce: the all-reduce of a tensor-parallel forward pass (`tandem serve --tensor-parallel
// T`) over MPI, as Forward's PartialSums: every rank calls all_reduce with its partial rows,
// in the same order (each rank runs the same layers of the same batches), and each gets back
// the same bits.
//
// The order that makes it so: the n values are cut into T contiguous chunks; rank j gathers
// every rank's chunk j and sums it in rank order, ((p_0 + p_1) + p_2) + ... (reduce-scatter),
// then sends its sums to every rank (all-gather). Each element is thus added in one fixed
// order whoever sums it, whatever the run, and every rank copies the same result: no MPI
// collective (whose algorithm, and so association, OpenMPI picks by message size) decides it.
// Each rank sends 2 (T-1)/T of the rows' bytes and adds a T-th of them.
//
// Waits spin on MPI_Test for a moment (the other ranks run the same layer at the same time, so
// their parts come within microseconds), then sleep as PollBackoff does. Not thread-safe: one
// thread calls all_reduce; totals() may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "model/forward.h"

namespace tandem {

constexpr int kTagAllReducePart = 45;  // rank r -> rank j: r's partial values of chunk j
constexpr int kTagAllReduceSum = 46;   // rank j -> every rank: chunk j summed over the ranks

// A rank's all-reduces so far.
struct AllReduceTotals {
  int64_t count = 0;
  int64_t nanoseconds = 0;  // in all_reduce, from its call to its return (waiting included)
  int64_t bytes_sent = 0;   // messages sent, headers included
};

// One all-reduce of a rank (a trace's span), on that rank's steady clock.
struct AllReduceCall {
  int rank = 0;
  int64_t start_ns = 0, end_ns = 0;
  int64_t values = 0;      // floats summed (-1: not known, another rank's)
  int64_t bytes_sent = 0;  // by that rank
};

class MpiAllReduce final : public PartialSums {
 public:
  explicit MpiAllReduce(Communicator& comm);

  void all_reduce(std::span<float> rows) override;

  AllReduceTotals totals() const;
  // Each rank's totals as of the all-reduce before its latest message here ([rank]; this
  // rank's own are current): every message carries its sender's totals.
  std::vector<AllReduceTotals> ranks_totals() const;

  // While recording (a tracing profiler), each all-reduce is kept as an AllReduceCall until
  // take_calls() hands them over: this rank's, and every other rank's all-reduce before the one
  // whose part just came from it (each message carries its sender's start of this all-reduce
  // and end of the one before, on the sender's clock: a rank's last all-reduce never comes).
  void set_recording(bool recording) { recording_ = recording; }
  std::vector<AllReduceCall> take_calls() { return std::exchange(calls_, {}); }

 private:
  void note_sender(int rank, std::span<const uint8_t> message);

  Communicator& comm_;
  int rank_, size_;
  uint64_t sequence_ = 0;
  std::vector<std::vector<uint8_t>> send_buffers_;     // [rank] the part (then the sum) sent to it
  std::vector<std::vector<uint8_t>> receive_buffers_;  // [rank] what came from it
  std::vector<MpiRequest> sends_, receives_;           // [rank]
  std::vector<float> sum_;                             // this rank's chunk, summed
  bool recording_ = false;
  std::vector<AllReduceCall> calls_;
  int64_t last_end_ns_ = 0;               // this rank's previous all-reduce's end
  std::vector<int64_t> peer_last_start_;  // [rank] its latest all-reduce's start, its clock (0: none)
  std::vector<int64_t> peer_last_bytes_;  // [rank] its bytes sent before that all-reduce
  std::atomic<int64_t> count_{0}, nanoseconds_{0}, bytes_sent_{0};
  // [rank] totals from the latest message of each (count, ns, bytes)
  std::vector<std::atomic<int64_t>> heard_count_, heard_ns_, heard_bytes_;
};

}  // namespace tandem
