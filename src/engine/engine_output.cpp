// Engine: each sequence's output (see engine.h) — sample from its logits row under the
// grammar's mask (waiting for the mask when it is not done), hold back end tokens before
// min_tokens and bad words, detokenize, release text up to a stop string, report logprobs,
// emit the event; and finish, the one place a sequence ends and is destroyed. Speculative rows
// come through verify_draft (engine_speculation.cpp) and end here in emit_token.
#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/bad_words.h"
#include "engine/engine.h"
#include "engine/engine_sequence.h"
#include "engine/stop_strings.h"
#include "grammar/mask_worker.h"

namespace tandem {

namespace {

// The grammar takes an emitted token: sampled under the mask, so it is allowed; a complete
// grammar ends the request here rather than spend a step on the only token left (EOS, or none
// under ignore_eos). The caller launches the next mask (launch_mask) once the token is emitted.
FinishReason advance_grammar(grammar::MaskJob& job, int32_t token, RequestEvent& event) {
  bool taken = false;
  try {
    taken = job.masker.accept_token(job.matcher, token);
    if (!taken) event.error = "grammar: the sampled token was refused";
  } catch (const InputError& error) {
    event.error = error.what();
  }
  if (!taken) {
    event.error_from_request = true;
    return FinishReason::Error;
  }
  return job.matcher.must_end() ? FinishReason::EndOfSequence : FinishReason::None;
}

}  // namespace

void Engine::hold_end_tokens(Sequence& sequence) {
  const Request& request = sequence.request;
  const bool hold = static_cast<int64_t>(request.generated.size()) < request.params.min_tokens;
  if (!request.params.bad_words.empty()) {  // what is banned changes with every token
    sequence.suppressed.clear();
    if (hold) sequence.suppressed = sequence.end_tokens;
    append_bad_word_bans(request.params.bad_words, request.generated, sequence.suppressed);
    sequence.sampler.set_suppressed(sequence.suppressed);
    sequence.holding_end = hold;
    return;
  }
  if (hold == sequence.holding_end) return;
  sequence.sampler.set_suppressed(hold ? std::span<const int32_t>(sequence.end_tokens) : std::span<const int32_t>());
  sequence.holding_end = hold;
}

bool Engine::process_sample(Sequence& sequence, std::span<const float> logits) {
  if (sequence.grammar && !sequence.grammar->done()) {
    // Its mask is still being computed: the sample waits (these logits kept), the step and
    // the other sequences do not. The same logits and mask later give the same token.
    Request& request = sequence.request;
    sequence.awaiting_logits.assign(logits.begin(), logits.end());
    request.awaiting_sample = true;
    if (std::find(awaiting_.begin(), awaiting_.end(), request.id) == awaiting_.end()) awaiting_.push_back(request.id);
    ++samples_awaited_;
    return false;
  }
  hold_end_tokens(sequence);
  const std::span<const float> allowed = constrain(sequence, logits);
  if (allowed.empty()) {
    end_unconstrainable(sequence);
    return true;
  }
  const int32_t token = sequence.sampler.sample(allowed, sequence.request.tokens);
  if (emit_token(sequence, token, logits)) return true;
  if (sequence.grammar) launch_mask(sequence);
  return false;
}

void Engine::sample_awaiting() {
  std::erase_if(awaiting_, [&](uint64_t id) {
    const auto it = sequences_.find(id);
    if (it == sequences_.end()) return true;  // ended (cancelled) while it waited
    Sequence& sequence = *it->second;
    if (!sequence.request.awaiting_sample) {
      sequence.awaiting_logits.clear();  // preempted: its recompute samples afresh
      return true;
    }
    if (!sequence.grammar->done()) return false;
    sequence.request.awaiting_sample = false;
    const std::vector<float> logits = std::move(sequence.awaiting_logits);
    process_sample(sequence, logits);  // may end (and destroy) the sequence
    return true;
  });
}

void Engine::launch_mask(Sequence& sequence) {
  grammar::MaskJob& job = *sequence.grammar;
  // A mask in the masker's cache is a copy: made here, without the hand-over's latency.
  if (job.masker.cached(job.matcher)) {
    job.run();
    return;
  }
  mask_worker_.submit(sequence.grammar);
}

std::span<const float> Engine::constrain(Sequence& sequence, std::span<const float> logits) {
  if (!sequence.grammar) return logits;
  // The mask for the current grammar state is done (computed on the mask worker, or here for
  // a speculative chunk's later rows); past a matching limit this request ends, others go on.
  const grammar::MaskJob& job = *sequence.grammar;
  TANDEM_ASSERT(job.done());
  switch (job.outcome()) {
    case grammar::MaskJob::Outcome::Allowed: break;
    case grammar::MaskJob::Outcome::Error: sequence.grammar_error = job.error(); return {};
    case grammar::MaskJob::Outcome::NothingAllowed:
    case grammar::MaskJob::Outcome::Stopped:  // only a destroyed sequence's job is stopped
      sequence.grammar_error =
          "grammar: no token can continue the output here (the vocabulary cannot spell what the grammar needs next)";
      return {};
  }
  std::copy(logits.begin(), logits.end(), sequence.masked_logits.begin());
  grammar::apply_token_mask(job.mask, sequence.masked_logits);
  return sequence.masked_logits;
}

void Engine::end_unconstrainable(Sequence& sequence) {
  RequestEvent event;
  event.text = std::move(sequence.held) + sequence.detokenizer.finish();
  sequence.held.clear();
  event.error = std::move(sequence.grammar_error);
  event.error_from_request = true;
  finish(sequence, RequestState::Finished, FinishReason::Error, event);
}

bool Engine::emit_token(Sequence& sequence, int32_t token, std::span<const float> logits) {
  Request& request = sequence.request;
  const GenerationParams& params = request.params;
  RequestEvent event;
  if (params.top_logprobs >= 0) event.logprobs.push_back(logprobs_.of(logits, token, params.top_logprobs));

  const RequestClock::time_point now = RequestClock::now();
  if (request.generated.empty()) {
    request.times.first_token = now;
  } else {
    request.times.itl_ms.push_back(ms_between(request.times.last_token, now));
  }
  request.times.last_token = now;
  request.append_token(token);
  event.tokens.push_back(token);

  FinishReason reason = take_token(sequence, token, event);
  // Stop strings count from min_tokens on (vLLM's rule): before that the text is released.
  const std::vector<std::string> no_stops;
  const std::vector<std::string>& stops =
      static_cast<int64_t>(request.generated.size()) < params.min_tokens ? no_stops : params.stop;
  ReleasedText released =
      release_held_text(sequence.held, stops, params.include_stop_str_in_output, reason != FinishReason::None);
  event.text = std::move(released.text);
  if (released.stopped) {
    reason = FinishReason::StopString;
    event.stop_string = std::move(released.stop_string);
  }

  if (reason != FinishReason::None) {
    finish(sequence, RequestState::Finished, reason, event);  // emits and destroys `sequence`
    return true;
  }
  event.request_id = request.id;
  event.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  event.cached_tokens = cached_tokens_of(sequence);
  event.completion_tokens = static_cast<int64_t>(request.generated.size());
  event.drafted_tokens = sequence.drafted_tokens;
  event.accepted_tokens = sequence.accepted_tokens;
  if (sequence.on_event) sequence.on_event(std::move(event));
  return false;
}

FinishReason Engine::take_token(Sequence& sequence, int32_t token, RequestEvent& event) {
  const Request& request = sequence.request;
  const GenerationParams& params = request.params;
  FinishReason reason = FinishReason::None;
  if (std::find(sequence.end_tokens.begin(), sequence.end_tokens.end(), token) != sequence.end_tokens.end()) {
    reason = FinishReason::EndOfSequence;
    if (params.include_stop_str_in_output) sequence.held += sequence.detokenizer.push(token);
  } else {
    sequence.held += sequence.detokenizer.push(token);
    if (sequence.grammar) reason = advance_grammar(*sequence.grammar, token, event);
  }
  if (reason == FinishReason::None && static_cast<int64_t>(request.generated.size()) >= params.max_tokens)
    reason = FinishReason::Length;
  // The newest token would sit at position tokens.size() - 1; past the context it cannot be fed.
  if (reason == FinishReason::None && static_cast<int64_t>(request.tokens.size()) > config_.context_length)
    reason = FinishReason::ContextLimit;
  if (reason != FinishReason::None) sequence.held += sequence.detokenizer.finish();
  return reason;
}

void Engine::finish(Sequence& sequence, RequestState state, FinishReason reason, RequestEvent& event) {
  Request& request = sequence.request;
  event.kv_bytes = request.blocks.n_held() * cache_.bytes_per_block();
  scheduler_.remove(&request, state);
  if (sequence.import) {  // out of the import list
    sequence.import->set_wake(nullptr);
    std::erase(importing_, &sequence);
    event.kv_transfer_bytes = sequence.kv_transfer_bytes;
    event.kv_transfer_ms = sequence.kv_transfer_ms;
  }
  if (draft_) draft_->remove(request.id);
  request.finish_reason = reason;
  request.times.finished = RequestClock::now();
  const RequestTimes& times = request.times;
  event.request_id = request.id;
  event.finished = true;
  event.finish_reason = reason;
  event.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  event.cached_tokens = cached_tokens_of(sequence);
  event.completion_tokens = static_cast<int64_t>(request.generated.size());
  const bool was_admitted = request.cached_prompt_tokens >= 0;
  event.admitted = was_admitted;
  event.queue_ms = ms_between(times.arrival, was_admitted ? times.admitted : times.finished);
  event.ttft_ms = request.generated.empty() ? 0.0 : ms_between(times.arrival, times.first_token);
  if (was_admitted && !request.generated.empty()) {
    event.prefill_ms = ms_between(times.admitted, times.first_token);
    event.decode_ms = ms_between(times.first_token, times.last_token);
  }
  event.preemptions = request.n_preemptions;
  event.e2e_ms = ms_between(times.arrival, times.finished);
  event.itl_ms = times.itl_ms;
  event.drafted_tokens = sequence.drafted_tokens;
  event.accepted_tokens = sequence.accepted_tokens;
  EventCallback on_event = std::move(sequence.on_event);
  sequences_.erase(request.id);  // `sequence` is gone from here on
  if (on_event) on_event(std::move(event));
}

void Engine::finish_embedding(Sequence& sequence) {
  Request& request = sequence.request;
  const auto n_prompt = static_cast<int64_t>(request.prompt.size());
  RequestEvent event;
  event.embedding = sequence.pool.result(n_prompt);
  request.times.first_token = request.times.last_token = RequestClock::now();
  finish(sequence, RequestState::Finished, FinishReason::EndOfSequence, event);
}

}  // namespace tandem
