// The tensor-parallel all-reduce over MPI (see mpi_all_reduce.h): a reduce-scatter summing in
// rank order, then an all-gather, with non-blocking sends and receives of known sizes.
#include "dist/mpi_all_reduce.h"

#include <chrono>
#include <cstring>

#include "base/error.h"
#include "dist/clock_offset.h"

namespace tandem {

namespace {

// Every message: this header, then the chunk's floats (little-endian, native: one build on
// one kind of machine). The sender's totals ride along for rank 0's /metrics.
struct AllReduceHeader {
  char magic[4] = {'T', 'P', 'A', 'R'};
  uint32_t phase = 0;           // 1: a part to sum, 2: a summed chunk
  uint64_t sequence = 0;        // the all-reduce's number on every rank, from 0
  int64_t count = 0;            // the sender's all-reduces before this one
  int64_t nanoseconds = 0;      // and their time
  int64_t bytes_sent = 0;       // and their bytes
  int64_t start_ns = 0;         // when the sender began this all-reduce (its steady clock)
  int64_t previous_end_ns = 0;  // when it finished the one before (0: none)
};
static_assert(sizeof(AllReduceHeader) == 56);

constexpr size_t kHeaderBytes = sizeof(AllReduceHeader);

// Every rank runs the same layer at once, so the other ranks' parts come within microseconds of
// this rank's; a sleep costs tens of microseconds at least (a tiny model's whole layer).
constexpr auto kSpin = std::chrono::microseconds(200);

// Chunk j of n values among `size` ranks: [begin, end).
int64_t chunk_begin(int64_t n, int size, int j) { return n * j / size; }

}  // namespace

MpiAllReduce::MpiAllReduce(Communicator& comm)
    : comm_(comm),
      rank_(comm.rank()),
      size_(comm.size()),
      send_buffers_(static_cast<size_t>(comm.size())),
      receive_buffers_(static_cast<size_t>(comm.size())),
      sends_(static_cast<size_t>(comm.size())),
      receives_(static_cast<size_t>(comm.size())),
      peer_last_start_(static_cast<size_t>(comm.size()), 0),
      peer_last_bytes_(static_cast<size_t>(comm.size()), 0),
      heard_count_(static_cast<size_t>(comm.size())),
      heard_ns_(static_cast<size_t>(comm.size())),
      heard_bytes_(static_cast<size_t>(comm.size())) {
  TANDEM_ASSERT(size_ >= 2);
}

void MpiAllReduce::all_reduce(std::span<float> rows) {
  const int64_t start = steady_clock_ns();
  const auto n = static_cast<int64_t>(rows.size());
  AllReduceHeader header;
  header.sequence = sequence_;
  header.count = count_.load();
  header.nanoseconds = nanoseconds_.load();
  header.bytes_sent = bytes_sent_.load();
  header.start_ns = start;
  header.previous_end_ns = last_end_ns_;
  int64_t sent = 0;
  // Posts the message of `phase` carrying rows [begin, end) to `peer`.
  auto post = [&](int peer, uint32_t phase, int tag, int64_t begin, int64_t end) {
    header.phase = phase;
    std::vector<uint8_t>& buffer = send_buffers_[static_cast<size_t>(peer)];
    buffer.resize(kHeaderBytes + static_cast<size_t>(end - begin) * sizeof(float));
    std::memcpy(buffer.data(), &header, kHeaderBytes);
    std::memcpy(buffer.data() + kHeaderBytes, rows.data() + begin, static_cast<size_t>(end - begin) * sizeof(float));
    sends_[static_cast<size_t>(peer)] = comm_.send_async(peer, tag, buffer);
    sent += static_cast<int64_t>(buffer.size());
  };
  auto expect = [&](int peer, int tag, int64_t count) {
    std::vector<uint8_t>& buffer = receive_buffers_[static_cast<size_t>(peer)];
    buffer.resize(kHeaderBytes + static_cast<size_t>(count) * sizeof(float));
    receives_[static_cast<size_t>(peer)] = comm_.receive_async(peer, tag, buffer);
  };
  auto check = [&](int peer, uint32_t phase) -> const float* {
    const std::vector<uint8_t>& buffer = receive_buffers_[static_cast<size_t>(peer)];
    AllReduceHeader got;
    std::memcpy(&got, buffer.data(), kHeaderBytes);
    TANDEM_CHECK_INPUT(std::memcmp(got.magic, "TPAR", 4) == 0 && got.phase == phase && got.sequence == sequence_,
                       "all-reduce message from rank {}: phase {} of all-reduce {}, expected phase {} of {}", peer,
                       got.phase, got.sequence, phase, sequence_);
    note_sender(peer, buffer);
    if (phase == 1 && recording_) {
      const auto p = static_cast<size_t>(peer);
      if (peer_last_start_[p] != 0 && got.previous_end_ns != 0)
        calls_.push_back({.rank = peer,
                          .start_ns = peer_last_start_[p],
                          .end_ns = got.previous_end_ns,
                          .values = -1,
                          .bytes_sent = got.bytes_sent - peer_last_bytes_[p]});
      peer_last_start_[p] = got.start_ns;
      peer_last_bytes_[p] = got.bytes_sent;
    }
    return reinterpret_cast<const float*>(buffer.data() + kHeaderBytes);
  };
  const int64_t mine_begin = chunk_begin(n, size_, rank_), mine_end = chunk_begin(n, size_, rank_ + 1);

  // Reduce-scatter: every other rank's part of my chunk in; my part of theirs out.
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) expect(peer, kTagAllReducePart, mine_end - mine_begin);
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) post(peer, 1, kTagAllReducePart, chunk_begin(n, size_, peer), chunk_begin(n, size_, peer + 1));
  wait_all_polling(receives_, kSpin);
  // The sum in rank order, p_0 + p_1 + ... + p_{T-1}, element by element: the same order on
  // whichever rank owns the chunk, so every run and every rank gets these bits.
  sum_.resize(static_cast<size_t>(mine_end - mine_begin));
  for (int r = 0; r < size_; ++r) {
    const float* part = r == rank_ ? rows.data() + mine_begin : check(r, 1);
    if (r == 0) {
      std::copy_n(part, sum_.size(), sum_.begin());
    } else {
      for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += part[i];
    }
  }
  std::copy(sum_.begin(), sum_.end(), rows.begin() + mine_begin);
  wait_all_polling(sends_, kSpin);  // the send buffers are reused below

  // All-gather: my chunk's sums out to every rank, theirs in.
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) expect(peer, kTagAllReduceSum, chunk_begin(n, size_, peer + 1) - chunk_begin(n, size_, peer));
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) post(peer, 2, kTagAllReduceSum, mine_begin, mine_end);
  wait_all_polling(receives_, kSpin);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const float* sums = check(peer, 2);
    const int64_t begin = chunk_begin(n, size_, peer);
    std::copy_n(sums, chunk_begin(n, size_, peer + 1) - begin, rows.begin() + begin);
  }
  wait_all_polling(sends_, kSpin);
  ++sequence_;
  const int64_t end = steady_clock_ns();
  bytes_sent_ += sent;
  nanoseconds_ += end - start;
  ++count_;
  last_end_ns_ = end;
  if (recording_) calls_.push_back({.rank = rank_, .start_ns = start, .end_ns = end, .values = n, .bytes_sent = sent});
}

void MpiAllReduce::note_sender(int rank, std::span<const uint8_t> message) {
  AllReduceHeader header;
  std::memcpy(&header, message.data(), kHeaderBytes);
  heard_count_[static_cast<size_t>(rank)] = header.count;
  heard_ns_[static_cast<size_t>(rank)] = header.nanoseconds;
  heard_bytes_[static_cast<size_t>(rank)] = header.bytes_sent;
}

AllReduceTotals MpiAllReduce::totals() const {
  return {.count = count_.load(), .nanoseconds = nanoseconds_.load(), .bytes_sent = bytes_sent_.load()};
}

std::vector<AllReduceTotals> MpiAllReduce::ranks_totals() const {
  std::vector<AllReduceTotals> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    all[i] = r == rank_ ? totals()
                        : AllReduceTotals{.count = heard_count_[i].load(),
                                          .nanoseconds = heard_ns_[i].load(),
                                          .bytes_sent = heard_bytes_[i].load()};
  }
  return all;
}

}  // namespace tandem
