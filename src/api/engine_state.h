// What a public tandem::api::Engine holds — the compute threads and the internal engine
// running on its own thread — and what one Stream holds. Streams share the engine state,
// so a stream outliving its Engine object can still be read to its (cancelled) end.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "api/event_queue.h"
#include "api/model_state.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "profile/profiler.h"
#include "tandem/tandem.h"

namespace tandem::api::detail {

struct EngineState {
  EngineState(std::shared_ptr<const Model> public_model, const ModelState& model, const EngineConfig& config,
              int threads, bool profile, bool trace);
  ~EngineState();

  std::shared_ptr<const Model> public_model;  // keeps the weights and the tokenizer alive
  std::unique_ptr<Profiler> profiler;         // with EngineOptions::profile; outlives the pool and engine
  ThreadPool pool;
  tandem::Engine engine;
};

// The public Engine with what EngineOptions cannot name (internal types): the CLI's run and
// chat on --device cuda (EngineConfig::device_forward). Not part of the public API.
struct EngineAccess {
  static Engine make(std::shared_ptr<const Model> model, const EngineOptions& options,
                     DeviceForwardFactory device_forward);
  // What every Engine constructor builds; throws Error for unusable options.
  static std::shared_ptr<EngineState> make_state(std::shared_ptr<const Model> model, const EngineOptions& options,
                                                 DeviceForwardFactory device_forward);
};

struct StreamState {
  std::shared_ptr<EngineState> engine;
  std::shared_ptr<EventQueue> events;  // also held by the request's callback in the engine
  uint64_t id = 0;                     // 0: nothing was submitted (max_tokens 0)
  uint64_t seed = 0;
  std::vector<int32_t> prompt_ids;
  bool finished = false;  // the final event has been returned (reader's thread only)
};

}  // namespace tandem::api::detail
