// tandem::api::Stream (include/tandem/tandem.h): reads one request's EventQueue; cancelling
// goes to the engine, whose final event then ends the stream.
#include "api/engine_state.h"

namespace tandem::api {

Stream::Stream(std::unique_ptr<detail::StreamState> state) : state_(std::move(state)) {}
Stream::Stream(Stream&&) noexcept = default;

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (state_ && !state_->finished) cancel();
    state_ = std::move(other.state_);
  }
  return *this;
}

Stream::~Stream() {
  if (state_ && !state_->finished) cancel();
}

std::optional<Event> Stream::next() {
  if (state_->finished) return std::nullopt;
  Event event = state_->events->pop();
  state_->finished = event.finished;
  return event;
}

void Stream::cancel() {
  // Only touches the engine's thread-safe side: safe from any thread, even once finished.
  if (state_ && state_->id != 0) state_->engine->engine.cancel(state_->id);
}

uint64_t Stream::id() const { return state_->id; }
uint64_t Stream::seed() const { return state_->seed; }
const std::vector<int32_t>& Stream::prompt_ids() const { return state_->prompt_ids; }

}  // namespace tandem::api
