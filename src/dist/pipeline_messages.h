// Pipeline messages (`tandem serve --pipeline S`): the bytes stage ranks exchange — a stage's
// set-up (KV pool geometry from rank 0), the ready reply, the clock exchange, one micro-batch's Batch with the hidden
// states the next stage starts from, the stop that ends every stage, and the logits rows the last
// stage returns to rank 0. Knows nothing of MPI or ranks; a malformed buffer is refused with one
// line (InputError) before anything is taken from it. The byte layouts are in src/dist/README.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "model/batch.h"

namespace tandem {

// MPI tags of the pipeline's messages (each tag one kind of message).
constexpr int kTagStageSetup = 40;   // rank 0 -> every stage rank, once
constexpr int kTagStageReady = 41;   // every stage rank -> rank 0, once
constexpr int kTagActivations = 42;  // rank r -> rank r + 1: a micro-batch, or the stop
constexpr int kTagLogits = 43;       // last rank -> rank 0: a micro-batch's logits rows
constexpr int kTagClock = 44;        // rank 0 <-> a stage rank at set-up: clock pings and answers

// When a stage rank took a micro-batch in and ran it, in that rank's steady clock (ns): rank 0
// brings them into its own clock with the offset measured at set-up (ClockPing). Each stage
// adds its own to those of the stages before it; the last returns them all with the logits.
struct StageTiming {
  int32_t rank = 0;
  int64_t received_ns = 0;  // the message taken from MPI (the stage was free to run it)
  int64_t start_ns = 0;     // unpacked: its layers start
  int64_t end_ns = 0;       // its layers done, the output about to be packed and sent
  int64_t bytes_in = 0;     // the activations message it received
  bool operator==(const StageTiming&) const = default;
};

// Set-up's clock exchange: rank 0 sends its clock (or `done`), the stage answers with its own.
struct ClockPing {
  bool done = false;
  int64_t clock_ns = 0;
  bool operator==(const ClockPing&) const = default;
};
void pack_clock_ping(const ClockPing& ping, std::vector<uint8_t>& out);
ClockPing unpack_clock_ping(std::span<const uint8_t> bytes);

// What a stage rank needs from rank 0 to mirror its KV pool and forward pass: block ids in a
// Batch index the same pool on every rank, and the context length picks LongRoPE's factors.
struct StageSetup {
  int64_t n_blocks = 0;
  int32_t block_size = 0;
  KvTypes kv_types;
  int64_t max_batch_tokens = 0;
  int64_t context_length = 0;
  bool operator==(const StageSetup&) const = default;
};
void pack_stage_setup(const StageSetup& setup, std::vector<uint8_t>& out);
StageSetup unpack_stage_setup(std::span<const uint8_t> bytes);

// A stage rank's answer once its layers and KV cache are ready.
struct StageReady {
  int32_t rank = 0;
  int64_t weight_bytes = 0;  // the weights it holds
  int64_t kv_bytes = 0;      // its KV cache
  bool operator==(const StageReady&) const = default;
};
void pack_stage_ready(const StageReady& ready, std::vector<uint8_t>& out);
StageReady unpack_stage_ready(std::span<const uint8_t> bytes);

// One micro-batch on its way to the next stage: its place in the step (step number, index),
// the Batch every stage runs, the previous stage's output hidden states [n_tokens, d_model]
// f32, and the timings of the stages it went through (rank 0's own not among them). A stop
// message carries none of these.
struct ActivationsMessage {
  bool stop = false;
  uint64_t step = 0;
  int32_t micro_batch = 0;
  Batch batch;
  std::vector<float> hidden;  // [n_tokens, d_model]
  std::vector<StageTiming> timings;
};
// `out` is resized to the message (its capacity reused). hidden: [batch.n_tokens(), d_model].
void pack_activations(uint64_t step, int32_t micro_batch, const Batch& batch, std::span<const float> hidden,
                      int64_t d_model, std::span<const StageTiming> timings, std::vector<uint8_t>& out);
void pack_stop(std::vector<uint8_t>& out);
// Fills `out` (vectors' capacities reused); InputError for a malformed message or another d_model.
void unpack_activations(std::span<const uint8_t> bytes, int64_t d_model, ActivationsMessage& out);

// One micro-batch's logits rows [n_rows, vocab_size] and the timings of stages 1..S-1, from
// the last stage to rank 0, which knows each message's size in advance (its receive is posted
// before the rows exist).
int64_t logits_message_bytes(int64_t n_rows, int64_t vocab_size, int64_t n_timings);
void pack_logits(uint64_t step, int32_t micro_batch, std::span<const float> rows, int64_t vocab_size,
                 std::span<const StageTiming> timings, std::vector<uint8_t>& out);
// Checks the header against what rank 0 expects and copies the rows into `rows_out`
// ([n_rows, vocab_size]) and the timings into `timings_out` (its size: how many are expected);
// InputError on any difference.
void unpack_logits(std::span<const uint8_t> bytes, uint64_t step, int32_t micro_batch, int64_t vocab_size,
                   std::span<float> rows_out, std::span<StageTiming> timings_out);

}  // namespace tandem
