// Pipeline messages (see pipeline_messages.h): fixed little-endian headers written field by
// field, arrays after them, and the checks a receiver makes before it takes anything.
#include "dist/pipeline_messages.h"

#include <bit>
#include <cstring>
#include <string_view>

#include "base/error.h"
#include "kernels/attention.h"

namespace tandem {

namespace {

static_assert(std::endian::native == std::endian::little, "pipeline messages are little-endian");

// Bumped whenever a layout below changes: ranks of one job run one build, so a mismatch is a
// mixed installation, refused rather than misread.
constexpr uint32_t kVersion = 2;
constexpr char kSetupMagic[4] = {'T', 'P', 'S', 'U'};
constexpr char kReadyMagic[4] = {'T', 'P', 'R', 'D'};
constexpr char kActivationsMagic[4] = {'T', 'P', 'A', 'C'};
constexpr char kLogitsMagic[4] = {'T', 'P', 'L', 'G'};
constexpr char kClockMagic[4] = {'T', 'P', 'C', 'K'};
constexpr size_t kSetupBytes = 44;
constexpr size_t kReadyBytes = 28;
constexpr size_t kActivationsHeaderBytes = 64;
constexpr size_t kLogitsHeaderBytes = 40;
constexpr size_t kClockBytes = 20;
constexpr size_t kTimingBytes = 40;  // rank, 4 bytes of padding, four int64s
// More stages than any job has ranks: bounds a count read from a message before it is used.
constexpr int64_t kMaxTimings = 1 << 16;
constexpr uint32_t kKindRun = 1;
constexpr uint32_t kKindStop = 2;

class Writer {
 public:
  Writer(std::vector<uint8_t>& out, size_t size) : out_(out) { out_.resize(size); }
  template <typename T>
  void put(const T& value) {
    put_bytes(&value, sizeof(T));
  }
  void put_bytes(const void* bytes, size_t n) {
    TANDEM_ASSERT(offset_ + n <= out_.size());
    if (n > 0) std::memcpy(out_.data() + offset_, bytes, n);
    offset_ += n;
  }
  void done() const { TANDEM_ASSERT(offset_ == out_.size()); }

 private:
  std::vector<uint8_t>& out_;
  size_t offset_ = 0;
};

// Reads only what the caller's length checks have shown is there.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get() {
    T value;
    get_bytes(&value, sizeof(T));
    return value;
  }
  void get_bytes(void* out, size_t n) {
    TANDEM_ASSERT(offset_ + n <= in_.size());
    if (n > 0) std::memcpy(out, in_.data() + offset_, n);
    offset_ += n;
  }
  template <typename T>
  void get_array(std::vector<T>& out, int64_t n) {
    out.resize(static_cast<size_t>(n));
    get_bytes(out.data(), static_cast<size_t>(n) * sizeof(T));
  }

 private:
  std::span<const uint8_t> in_;
  size_t offset_ = 0;
};

// Magic and version, common to every message; `what` names the message in the error.
Reader open_message(std::span<const uint8_t> bytes, const char (&magic)[4], size_t header_bytes, const char* what) {
  TANDEM_CHECK_INPUT(bytes.size() >= header_bytes, "{} message of {} bytes is shorter than its {}-byte header", what,
                     bytes.size(), header_bytes);
  TANDEM_CHECK_INPUT(std::memcmp(bytes.data(), magic, 4) == 0, "not a {} message (its first 4 bytes are not {})", what,
                     std::string_view(magic, 4));
  Reader reader(bytes.subspan(4));
  const auto version = reader.get<uint32_t>();
  TANDEM_CHECK_INPUT(version == kVersion, "{} message version {}, this build reads version {}", what, version,
                     kVersion);
  return reader;
}

void put_timings(Writer& writer, std::span<const StageTiming> timings) {
  for (const StageTiming& timing : timings) {
    writer.put(timing.rank);
    writer.put(int32_t{0});
    writer.put(timing.received_ns);
    writer.put(timing.start_ns);
    writer.put(timing.end_ns);
    writer.put(timing.bytes_in);
  }
}

void get_timings(Reader& reader, std::span<StageTiming> timings) {
  for (StageTiming& timing : timings) {
    timing.rank = reader.get<int32_t>();
    reader.get<int32_t>();
    timing.received_ns = reader.get<int64_t>();
    timing.start_ns = reader.get<int64_t>();
    timing.end_ns = reader.get<int64_t>();
    timing.bytes_in = reader.get<int64_t>();
    TANDEM_CHECK_INPUT(timing.rank >= 1 && timing.start_ns >= timing.received_ns && timing.end_ns >= timing.start_ns &&
                           timing.bytes_in >= 0,
                       "stage timing of rank {} out of order or negative", timing.rank);
  }
}

KvTypes kv_types_from(uint32_t k, uint32_t v) {
  const auto known = [](uint32_t id) {
    return dtype_traits(id).has_value() && kv_type_supported(static_cast<DType>(id));
  };
  TANDEM_CHECK_INPUT(known(k) && known(v), "stage set-up names KV types {} and {}, not KV cache types", k, v);
  return {static_cast<DType>(k), static_cast<DType>(v)};
}

}  // namespace

void pack_stage_setup(const StageSetup& setup, std::vector<uint8_t>& out) {
  Writer writer(out, kSetupBytes);
  writer.put_bytes(kSetupMagic, 4);
  writer.put(kVersion);
  writer.put(setup.n_blocks);
  writer.put(setup.max_batch_tokens);
  writer.put(setup.context_length);
  writer.put(setup.block_size);
  writer.put(static_cast<uint32_t>(setup.kv_types.k));
  writer.put(static_cast<uint32_t>(setup.kv_types.v));
  writer.done();
}

StageSetup unpack_stage_setup(std::span<const uint8_t> bytes) {
  Reader reader = open_message(bytes, kSetupMagic, kSetupBytes, "stage set-up");
  TANDEM_CHECK_INPUT(bytes.size() == kSetupBytes, "stage set-up message of {} bytes, not {}", bytes.size(),
                     kSetupBytes);
  StageSetup setup;
  setup.n_blocks = reader.get<int64_t>();
  setup.max_batch_tokens = reader.get<int64_t>();
  setup.context_length = reader.get<int64_t>();
  setup.block_size = reader.get<int32_t>();
  const auto k = reader.get<uint32_t>();
  setup.kv_types = kv_types_from(k, reader.get<uint32_t>());
  TANDEM_CHECK_INPUT(
      setup.n_blocks >= 1 && setup.block_size >= 1 && setup.max_batch_tokens >= 1 && setup.context_length >= 1,
      "stage set-up with {} blocks of {} tokens, a {}-token batch and a {}-token context", setup.n_blocks,
      setup.block_size, setup.max_batch_tokens, setup.context_length);
  return setup;
}

void pack_stage_ready(const StageReady& ready, std::vector<uint8_t>& out) {
  Writer writer(out, kReadyBytes);
  writer.put_bytes(kReadyMagic, 4);
  writer.put(kVersion);
  writer.put(ready.rank);
  writer.put(ready.weight_bytes);
  writer.put(ready.kv_bytes);
  writer.done();
}

StageReady unpack_stage_ready(std::span<const uint8_t> bytes) {
  Reader reader = open_message(bytes, kReadyMagic, kReadyBytes, "stage ready");
  TANDEM_CHECK_INPUT(bytes.size() == kReadyBytes, "stage ready message of {} bytes, not {}", bytes.size(), kReadyBytes);
  StageReady ready;
  ready.rank = reader.get<int32_t>();
  ready.weight_bytes = reader.get<int64_t>();
  ready.kv_bytes = reader.get<int64_t>();
  return ready;
}

void pack_clock_ping(const ClockPing& ping, std::vector<uint8_t>& out) {
  Writer writer(out, kClockBytes);
  writer.put_bytes(kClockMagic, 4);
  writer.put(kVersion);
  writer.put(static_cast<uint32_t>(ping.done ? 1 : 0));
  writer.put(ping.clock_ns);
  writer.done();
}

ClockPing unpack_clock_ping(std::span<const uint8_t> bytes) {
  Reader reader = open_message(bytes, kClockMagic, kClockBytes, "clock ping");
  TANDEM_CHECK_INPUT(bytes.size() == kClockBytes, "clock ping message of {} bytes, not {}", bytes.size(), kClockBytes);
  const auto done = reader.get<uint32_t>();
  TANDEM_CHECK_INPUT(done <= 1, "clock ping with done {}", done);
  return {.done = done == 1, .clock_ns = reader.get<int64_t>()};
}

void pack_activations(uint64_t step, int32_t micro_batch, const Batch& batch, std::span<const float> hidden,
                      int64_t d_model, std::span<const StageTiming> timings, std::vector<uint8_t>& out) {
  const int64_t n_tokens = batch.n_tokens();
  TANDEM_ASSERT(static_cast<int64_t>(hidden.size()) == n_tokens * d_model);
  int64_t n_block_ids = 0;
  for (const std::vector<int32_t>& table : batch.block_tables) n_block_ids += static_cast<int64_t>(table.size());
  const int64_t n_seqs = batch.n_sequences();
  // tokens, positions, seq_ids, wants_logits (as int32), table lengths, block ids, hidden.
  const size_t size = kActivationsHeaderBytes +
                      sizeof(int32_t) * static_cast<size_t>(4 * n_tokens + n_seqs + n_block_ids) + hidden.size_bytes() +
                      kTimingBytes * timings.size();
  Writer writer(out, size);
  writer.put_bytes(kActivationsMagic, 4);
  writer.put(kVersion);
  writer.put(kKindRun);
  writer.put(micro_batch);
  writer.put(step);
  writer.put(n_tokens);
  writer.put(n_seqs);
  writer.put(n_block_ids);
  writer.put(d_model);
  writer.put(static_cast<int64_t>(timings.size()));
  writer.put_bytes(batch.tokens.data(), batch.tokens.size() * sizeof(int32_t));
  writer.put_bytes(batch.positions.data(), batch.positions.size() * sizeof(int32_t));
  writer.put_bytes(batch.seq_ids.data(), batch.seq_ids.size() * sizeof(int32_t));
  for (uint8_t wants : batch.wants_logits) writer.put(static_cast<int32_t>(wants));
  for (const std::vector<int32_t>& table : batch.block_tables) writer.put(static_cast<int32_t>(table.size()));
  for (const std::vector<int32_t>& table : batch.block_tables)
    writer.put_bytes(table.data(), table.size() * sizeof(int32_t));
  writer.put_bytes(hidden.data(), hidden.size_bytes());
  put_timings(writer, timings);
  writer.done();
}

void pack_stop(std::vector<uint8_t>& out) {
  Writer writer(out, kActivationsHeaderBytes);
  writer.put_bytes(kActivationsMagic, 4);
  writer.put(kVersion);
  writer.put(kKindStop);
  writer.put(int32_t{0});
  writer.put(uint64_t{0});
  for (int i = 0; i < 5; ++i) writer.put(int64_t{0});
  writer.done();
}

void unpack_activations(std::span<const uint8_t> bytes, int64_t d_model, ActivationsMessage& out) {
  Reader reader = open_message(bytes, kActivationsMagic, kActivationsHeaderBytes, "activations");
  const auto kind = reader.get<uint32_t>();
  TANDEM_CHECK_INPUT(kind == kKindRun || kind == kKindStop, "activations message of unknown kind {}", kind);
  out.stop = kind == kKindStop;
  out.micro_batch = reader.get<int32_t>();
  out.step = reader.get<uint64_t>();
  const auto n_tokens = reader.get<int64_t>();
  const auto n_seqs = reader.get<int64_t>();
  const auto n_block_ids = reader.get<int64_t>();
  const auto message_d_model = reader.get<int64_t>();
  const auto n_timings = reader.get<int64_t>();
  out.batch.clear();
  out.hidden.clear();
  out.timings.clear();
  if (out.stop) {
    TANDEM_CHECK_INPUT(bytes.size() == kActivationsHeaderBytes, "stop message of {} bytes, not {}", bytes.size(),
                       kActivationsHeaderBytes);
    return;
  }
  TANDEM_CHECK_INPUT(message_d_model == d_model, "activations of width {}, this stage's model has d_model {}",
                     message_d_model, d_model);
  // Bounds before any product: each count is at most the message's bytes.
  const auto limit = static_cast<int64_t>(bytes.size());
  TANDEM_CHECK_INPUT(n_tokens >= 1 && n_tokens <= limit && n_seqs >= 1 && n_seqs <= limit && n_block_ids >= 0 &&
                         n_block_ids <= limit && n_timings >= 0 && n_timings <= kMaxTimings,
                     "activations message counts out of range: {} tokens, {} sequences, {} block ids, {} stage timings",
                     n_tokens, n_seqs, n_block_ids, n_timings);
  const auto expected = static_cast<int64_t>(kActivationsHeaderBytes) + 4 * (4 * n_tokens + n_seqs + n_block_ids) +
                        4 * n_tokens * d_model + static_cast<int64_t>(kTimingBytes) * n_timings;
  TANDEM_CHECK_INPUT(limit == expected, "activations message of {} bytes, its header says {}", limit, expected);
  reader.get_array(out.batch.tokens, n_tokens);
  reader.get_array(out.batch.positions, n_tokens);
  reader.get_array(out.batch.seq_ids, n_tokens);
  std::vector<int32_t> wants;
  reader.get_array(wants, n_tokens);
  out.batch.wants_logits.assign(wants.begin(), wants.end());
  for (int32_t w : wants) TANDEM_CHECK_INPUT(w == 0 || w == 1, "activations message wants_logits {}", w);
  for (int32_t s : out.batch.seq_ids)
    TANDEM_CHECK_INPUT(s >= 0 && s < n_seqs, "activations message names sequence {} of {}", s, n_seqs);
  std::vector<int32_t> lengths;
  reader.get_array(lengths, n_seqs);
  int64_t total = 0;
  for (int32_t length : lengths) {
    TANDEM_CHECK_INPUT(length >= 0, "activations message block table of length {}", length);
    total += length;
  }
  TANDEM_CHECK_INPUT(total == n_block_ids, "activations message block tables hold {} ids, its header says {}", total,
                     n_block_ids);
  out.batch.block_tables.resize(static_cast<size_t>(n_seqs));
  for (int64_t s = 0; s < n_seqs; ++s)
    reader.get_array(out.batch.block_tables[static_cast<size_t>(s)], lengths[static_cast<size_t>(s)]);
  reader.get_array(out.hidden, n_tokens * d_model);
  out.timings.resize(static_cast<size_t>(n_timings));
  get_timings(reader, out.timings);
}

int64_t logits_message_bytes(int64_t n_rows, int64_t vocab_size, int64_t n_timings) {
  return static_cast<int64_t>(kLogitsHeaderBytes) + n_rows * vocab_size * static_cast<int64_t>(sizeof(float)) +
         n_timings * static_cast<int64_t>(kTimingBytes);
}

void pack_logits(uint64_t step, int32_t micro_batch, std::span<const float> rows, int64_t vocab_size,
                 std::span<const StageTiming> timings, std::vector<uint8_t>& out) {
  TANDEM_ASSERT(vocab_size >= 1 && static_cast<int64_t>(rows.size()) % vocab_size == 0);
  const int64_t n_rows = static_cast<int64_t>(rows.size()) / vocab_size;
  const auto n_timings = static_cast<int64_t>(timings.size());
  Writer writer(out, static_cast<size_t>(logits_message_bytes(n_rows, vocab_size, n_timings)));
  writer.put_bytes(kLogitsMagic, 4);
  writer.put(kVersion);
  writer.put(micro_batch);
  writer.put(static_cast<uint32_t>(n_timings));
  writer.put(step);
  writer.put(n_rows);
  writer.put(vocab_size);
  writer.put_bytes(rows.data(), rows.size_bytes());
  put_timings(writer, timings);
  writer.done();
}

void unpack_logits(std::span<const uint8_t> bytes, uint64_t step, int32_t micro_batch, int64_t vocab_size,
                   std::span<float> rows_out, std::span<StageTiming> timings_out) {
  Reader reader = open_message(bytes, kLogitsMagic, kLogitsHeaderBytes, "logits");
  const auto message_micro = reader.get<int32_t>();
  const auto n_timings = static_cast<int64_t>(reader.get<uint32_t>());
  const auto message_step = reader.get<uint64_t>();
  const auto n_rows = reader.get<int64_t>();
  const auto message_vocab = reader.get<int64_t>();
  TANDEM_CHECK_INPUT(message_step == step && message_micro == micro_batch,
                     "logits of step {} micro-batch {} arrived for step {} micro-batch {}", message_step, message_micro,
                     step, micro_batch);
  TANDEM_CHECK_INPUT(message_vocab == vocab_size && n_rows * vocab_size == static_cast<int64_t>(rows_out.size()),
                     "logits message of {} rows of {}, expected {} values of rows of {}", n_rows, message_vocab,
                     rows_out.size(), vocab_size);
  TANDEM_CHECK_INPUT(n_timings == static_cast<int64_t>(timings_out.size()),
                     "logits message with {} stage timings, expected {}", n_timings, timings_out.size());
  TANDEM_CHECK_INPUT(static_cast<int64_t>(bytes.size()) == logits_message_bytes(n_rows, vocab_size, n_timings),
                     "logits message of {} bytes, its header says {}", bytes.size(),
                     logits_message_bytes(n_rows, vocab_size, n_timings));
  reader.get_bytes(rows_out.data(), rows_out.size_bytes());
  get_timings(reader, timings_out);
}

}  // namespace tandem
