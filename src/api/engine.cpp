// tandem::api::Engine (include/tandem/tandem.h): the public face of the internal Engine.
// Translates options into GenerationParams and internal events into public ones; streams
// are EventQueues filled by the engine's thread; generate() and chat() read a stream on the
// caller's thread, so their text callbacks never run on (or slow down) the engine's thread.
#include <random>

#include "api/engine_state.h"
#include "api/error_translation.h"
#include "base/error.h"
#include "engine/sampler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "kernels/kernel_table.h"
#include "profile/machine_ceilings.h"
#include "profile/profile_summary.h"
#include "profile/trace_writer.h"

namespace tandem::api {

namespace detail {

EngineState::EngineState(std::shared_ptr<const Model> public_model, const ModelState& model, const EngineConfig& config,
                         int threads, bool profile, bool trace)
    : public_model(std::move(public_model)),
      profiler(profile || trace ? std::make_unique<Profiler>() : nullptr),
      pool(threads),
      engine(model.model, model.tokenizer, config, pool) {
  if (trace) {
    profiler->enable_trace(pool.size());
    pool.set_chunk_observer(profiler.get());
  }
  engine.set_profiler(profiler.get());
  engine.start();
}

// stop() cancels what is in flight; each request's callback gets its final event first.
EngineState::~EngineState() { engine.stop(); }

}  // namespace detail

namespace {

FinishReason to_public(tandem::FinishReason reason) {
  switch (reason) {
    case tandem::FinishReason::None: return FinishReason::None;
    case tandem::FinishReason::EndOfSequence: return FinishReason::EndOfSequence;
    case tandem::FinishReason::StopString: return FinishReason::StopString;
    case tandem::FinishReason::Length: return FinishReason::Length;
    case tandem::FinishReason::ContextLimit: return FinishReason::ContextLimit;
    case tandem::FinishReason::Cancelled: return FinishReason::Cancelled;
    case tandem::FinishReason::Error: return FinishReason::Error;
  }
  return FinishReason::Error;
}

Event to_public(RequestEvent&& internal) {
  Event event;
  event.request_id = internal.request_id;
  event.text = std::move(internal.text);
  event.tokens = std::move(internal.tokens);
  event.finished = internal.finished;
  event.finish_reason = to_public(internal.finish_reason);
  event.error = std::move(internal.error);
  event.usage = {internal.prompt_tokens, internal.cached_tokens,  internal.completion_tokens,
                 internal.kv_bytes,      internal.drafted_tokens, internal.accepted_tokens};
  if (internal.finished) {
    event.timings.queue_ms = internal.queue_ms;
    event.timings.ttft_ms = internal.ttft_ms;
    event.timings.prefill_ms = internal.prefill_ms;
    event.timings.decode_ms = internal.decode_ms;
    event.timings.e2e_ms = internal.e2e_ms;
    event.timings.itl_ms = std::move(internal.itl_ms);
  }
  return event;
}

// The request's grammar, compiled per request (a schema compiles in well under a millisecond
// next to a prefill); null when neither field is set.
std::shared_ptr<const grammar::Grammar> compile_grammar(const GenerateOptions& options) {
  TANDEM_CHECK_INPUT(options.grammar.empty() || options.json_schema.empty(),
                     "grammar and json_schema are exclusive: give one of them");
  if (!options.grammar.empty()) return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(options.grammar));
  if (options.json_schema.empty()) return nullptr;
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(options.json_schema, nullptr, false);
  TANDEM_CHECK_INPUT(!schema.is_discarded(), "json_schema is not valid JSON");
  TANDEM_CHECK_INPUT(schema.is_object() || schema.is_boolean(), "json_schema must be a JSON object");
  if (schema.is_object() && schema.empty())
    return std::make_shared<const grammar::Grammar>(grammar::any_json_grammar());
  return std::make_shared<const grammar::Grammar>(grammar::json_schema_grammar(schema));
}

GenerationParams to_params(const GenerateOptions& options, uint64_t seed) {
  GenerationParams params;
  params.max_tokens = options.max_tokens;
  params.stop = options.stop;
  SamplingParams& sampling = params.sampling;
  sampling.temperature = options.temperature;
  sampling.top_k = options.top_k;
  sampling.top_p = options.top_p;
  sampling.min_p = options.min_p;
  sampling.repetition_penalty = options.repetition_penalty;
  sampling.repeat_last_n = options.repeat_last_n;
  sampling.presence_penalty = options.presence_penalty;
  sampling.frequency_penalty = options.frequency_penalty;
  sampling.seed = seed;
  SpeculationParams& speculation = params.speculation;
  switch (options.speculative.type) {
    case Speculation::None: speculation.type = SpeculationType::None; break;
    case Speculation::Ngram: speculation.type = SpeculationType::Ngram; break;
    case Speculation::Draft: speculation.type = SpeculationType::Draft; break;
  }
  speculation.draft_max = options.speculative.draft_max;
  speculation.draft_min = options.speculative.draft_min;
  speculation.ngram_min = options.speculative.ngram_min;
  speculation.ngram_max = options.speculative.ngram_max;
  params.grammar = compile_grammar(options);
  return params;
}

uint64_t choose_seed(const GenerateOptions& options) {
  if (options.seed.has_value()) return *options.seed;
  std::random_device entropy;
  return (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
}

// A request for no tokens never reaches the engine (which needs at least one); it gets the
// engine's own checks here and then its final event at once.
Event finished_without_tokens(const tandem::Engine& engine, const std::vector<int32_t>& prompt,
                              const GenerationParams& params, int64_t vocab_size) {
  TANDEM_CHECK_INPUT(params.max_tokens == 0, "max_tokens must not be negative");
  engine.check_request(prompt, params);
  Sampler check_sampling(params.sampling, vocab_size);  // throws for unusable sampling options
  Event event;
  event.finished = true;
  event.finish_reason = FinishReason::Length;
  event.usage.prompt_tokens = static_cast<int64_t>(prompt.size());
  return event;
}

void check_options(const EngineOptions& options) {
  TANDEM_CHECK_INPUT(options.max_sequences >= 1, "EngineOptions::max_sequences must be at least 1");
  TANDEM_CHECK_INPUT(options.max_batch_tokens >= 1, "EngineOptions::max_batch_tokens must be at least 1");
  TANDEM_CHECK_INPUT(options.kv_block_size >= 1 && options.kv_block_size <= 4096,
                     "EngineOptions::kv_block_size must be in 1..4096");
}

}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& options)
    : Engine(detail::EngineAccess::make_state(std::move(model), options, nullptr)) {}

Engine::Engine(std::shared_ptr<detail::EngineState> state) : state_(std::move(state)) {}

Engine detail::EngineAccess::make(std::shared_ptr<const Model> model, const EngineOptions& options,
                                  DeviceForwardFactory device_forward) {
  return Engine(make_state(std::move(model), options, std::move(device_forward)));
}

std::shared_ptr<detail::EngineState> detail::EngineAccess::make_state(std::shared_ptr<const Model> model,
                                                                      const EngineOptions& options,
                                                                      DeviceForwardFactory device_forward) {
  return detail::translating_errors([&] {
    TANDEM_CHECK_INPUT(model != nullptr, "no model (null pointer)");
    check_options(options);
    EngineConfig config;
    config.max_seqs = options.max_sequences;
    config.max_batch_tokens = options.max_batch_tokens;
    config.block_size = options.kv_block_size;
    config.context_length = options.context_length;
    config.kv_memory_bytes = options.kv_memory_bytes;
    config.kv_types = {detail::kv_dtype(options.kv_type_k), detail::kv_dtype(options.kv_type_v)};
    if (options.draft_model) {
      // The internal engine keeps the draft's weights; its tokenizer is only compared.
      config.draft_model = options.draft_model->state_->model;
      config.draft_tokenizer = &options.draft_model->state_->tokenizer;
    }
    config.device_forward = std::move(device_forward);
    const detail::ModelState& model_state = *model->state_;
    return std::make_shared<detail::EngineState>(std::move(model), model_state, config, options.threads,
                                                 options.profile, options.trace);
  });
}

// Stops the engine thread now (cancelling what is in flight); streams still holding the
// state read their final events from their queues.
Engine::~Engine() {
  if (state_) state_->engine.stop();
}

Engine::Engine(Engine&&) noexcept = default;

Engine& Engine::operator=(Engine&& other) noexcept {
  if (this != &other) {
    if (state_) state_->engine.stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

Stream Engine::stream(std::string_view prompt, const GenerateOptions& options) {
  return stream(model().tokenize(prompt), options);
}

Stream Engine::stream(std::vector<int32_t> prompt_ids, const GenerateOptions& options) {
  return detail::translating_errors([&] {
    auto stream = std::make_unique<detail::StreamState>();
    stream->engine = state_;
    stream->events = std::make_shared<detail::EventQueue>();
    stream->seed = choose_seed(options);
    stream->prompt_ids = prompt_ids;
    GenerationParams params = to_params(options, stream->seed);
    if (params.max_tokens <= 0) {
      stream->events->push(
          finished_without_tokens(state_->engine, prompt_ids, params, state_->public_model->vocab_size()));
    } else {
      stream->id = state_->engine.submit(
          std::move(prompt_ids), std::move(params),
          [events = stream->events](RequestEvent&& event) { events->push(to_public(std::move(event))); });
    }
    return Stream(std::move(stream));
  });
}

uint64_t Engine::submit(std::vector<int32_t> prompt_ids, const GenerateOptions& options, EventCallback on_event) {
  return detail::translating_errors([&] {
    GenerationParams params = to_params(options, choose_seed(options));
    if (params.max_tokens <= 0) {
      const Event event =
          finished_without_tokens(state_->engine, prompt_ids, params, state_->public_model->vocab_size());
      if (on_event) on_event(event);
      return uint64_t{0};
    }
    tandem::Engine* engine = &state_->engine;  // outlives the callback, which it owns
    return engine->submit(std::move(prompt_ids), std::move(params),
                          [engine, on_event = std::move(on_event)](RequestEvent&& internal) {
                            const Event event = to_public(std::move(internal));
                            if (!on_event) return;
                            try {
                              on_event(event);
                            } catch (...) {
                              // Nothing on the engine's thread can take the exception; the
                              // request is what failed, so it ends.
                              if (!event.finished) engine->cancel(event.request_id);
                            }
                          });
  });
}

void Engine::cancel(uint64_t request_id) { state_->engine.cancel(request_id); }

Result Engine::generate(std::string_view prompt, const GenerateOptions& options, const TextCallback& on_text) {
  return generate(model().tokenize(prompt), options, on_text);
}

Result Engine::generate(std::vector<int32_t> prompt_ids, const GenerateOptions& options, const TextCallback& on_text) {
  Stream request = stream(std::move(prompt_ids), options);
  Result result;
  result.prompt_ids = request.prompt_ids();
  result.seed = request.seed();
  while (std::optional<Event> event = request.next()) {
    result.text += event->text;
    result.tokens.insert(result.tokens.end(), event->tokens.begin(), event->tokens.end());
    if (on_text && !event->text.empty()) on_text(event->text);
    if (event->finished) {
      result.finish_reason = event->finish_reason;
      result.error = std::move(event->error);
      result.usage = event->usage;
      result.timings = std::move(event->timings);
    }
  }
  return result;
}

Result Engine::chat(const std::vector<ChatMessage>& messages, const GenerateOptions& options,
                    const TextCallback& on_text) {
  return generate(model().tokenize_chat(messages), options, on_text);
}

const Model& Engine::model() const { return *state_->public_model; }
const std::shared_ptr<const Model>& Engine::shared_model() const { return state_->public_model; }
int64_t Engine::context_length() const { return state_->engine.context_length(); }

std::string Engine::profile_summary() const {
  return detail::translating_errors([&] {
    const Profiler* profiler = state_->profiler.get();
    if (profiler == nullptr) return std::string();
    profiler->wait_for_step_end();
    const std::optional<MachineCeilings> ceilings =
        load_ceilings(default_ceilings_path(), isa_name(kernel_table().isa), state_->pool.size());
    return format_summary(summarize(profiler->snapshot(), ceilings));
  });
}

void Engine::write_trace(const std::string& path) const {
  detail::translating_errors([&] {
    const Profiler* profiler = state_->profiler.get();
    TANDEM_CHECK_INPUT(profiler != nullptr && profiler->tracing(), "tracing is off (EngineOptions::trace)");
    profiler->wait_for_step_end();
    write_chrome_trace(*profiler, path);
  });
}

}  // namespace tandem::api
