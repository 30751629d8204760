// What the ranks of a disaggregated job (`tandem serve --workers prefill:P,decode:D` under
// mpirun) say to each other besides KV blocks: message tags, and requests, generation
// parameters and token events as CBOR (nlohmann::json's binary form). Text travels as bytes
// (a token's text may be part of a UTF-8 character), floats exactly (CBOR doubles), a
// constrained request's grammar as its lowered rules. Knows no MPI and no engine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generation_service.h"

namespace tandem::dist {

// Every message between the ranks of a disaggregated job, by MPI tag.
enum Tag : int {
  kSubmit = 101,         // front -> decode: a request (id, prompt, params, imported blocks, prefill rank)
  kCancel = 102,         // front -> decode, decode -> prefill: {id}
  kCancelWaiting = 103,  // front -> decode: cancel the requests never admitted (shutdown)
  kPrefillJob = 104,     // decode -> prefill: compute these blocks and send them to me
  kKvBlock = 105,        // prefill -> decode: 8-byte request id, then a KV block message
  kPrefillDone = 106,    // prefill -> decode: {id, error}: every asked block was sent (or why not)
  kEvent = 107,          // decode -> front: a token event
  kReport = 108,         // worker -> front, every report interval: its state (and that it lives)
  kWorkerDown = 109,     // front -> workers: {rank}: that worker is gone; give up on it
  kStop = 110,           // front -> workers: finish and exit; {finalize, trace_origin with --trace}
  kStopped = 111,        // worker -> front: it has stopped its engine and sent everything
  kFailed = 112,         // worker -> front: {error}: it could not start (its model did not load)
  kClock = 113,          // front -> worker {t0}, worker -> front {t0, tw}: a round trip measuring its clock offset
  kTrace = 114,          // worker -> front, before kStopped: its Chrome trace, times from trace_origin
};

std::vector<uint8_t> to_bytes(const nlohmann::json& message);
// InputError (one line) for bytes that are not CBOR.
nlohmann::json from_bytes(std::span<const uint8_t> bytes);

nlohmann::json params_to_json(const GenerationParams& params);  // kv_export is local, never sent
GenerationParams params_from_json(const nlohmann::json& json);

nlohmann::json event_to_json(const RequestEvent& event);
RequestEvent event_from_json(const nlohmann::json& json);

// A KV block on the wire: the request's id (8 bytes, native order), then the block message.
std::vector<uint8_t> kv_block_frame(uint64_t request_id, std::span<const uint8_t> block_message);
uint64_t kv_block_frame_id(std::span<const uint8_t> frame);  // InputError when shorter than 8 bytes
std::span<const uint8_t> kv_block_frame_message(std::span<const uint8_t> frame);

}  // namespace tandem::dist
