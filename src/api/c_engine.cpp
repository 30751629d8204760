// The C API's engine, generation and stream calls (include/tandem/tandem_c.h). A blocking
// call reads a Stream on the caller's thread and hands each event to the C callback there;
// a nonzero return cancels the request. Results are malloc'd, for tandem_result_free.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/c_boundary.h"

using tandem::api::c_boundary::chat_messages;
using tandem::api::c_boundary::fail;
using tandem::api::c_boundary::guarded;

namespace {

namespace api = tandem::api;

api::GenerateOptions to_options(const tandem_generate_options* c_options) {
  const tandem_generate_options defaults = tandem_generate_options_default();
  const tandem_generate_options& c = c_options != nullptr ? *c_options : defaults;
  api::GenerateOptions options;
  options.max_tokens = c.max_tokens;
  options.temperature = c.temperature;
  options.top_k = c.top_k;
  options.top_p = c.top_p;
  options.min_p = c.min_p;
  options.repetition_penalty = c.repetition_penalty;
  options.repeat_last_n = c.repeat_last_n;
  options.presence_penalty = c.presence_penalty;
  options.frequency_penalty = c.frequency_penalty;
  if (c.seed != TANDEM_SEED_RANDOM) options.seed = c.seed;
  switch (c.speculation) {
    case TANDEM_SPECULATION_NONE: options.speculative.type = api::Speculation::None; break;
    case TANDEM_SPECULATION_NGRAM: options.speculative.type = api::Speculation::Ngram; break;
    case TANDEM_SPECULATION_DRAFT: options.speculative.type = api::Speculation::Draft; break;
    default:
      throw api::Error(
          "speculation must be TANDEM_SPECULATION_NONE, TANDEM_SPECULATION_NGRAM or TANDEM_SPECULATION_DRAFT");
  }
  options.speculative.draft_max = c.draft_max;
  options.speculative.draft_min = c.draft_min;
  options.speculative.ngram_min = c.ngram_min;
  options.speculative.ngram_max = c.ngram_max;
  if (c.stop == nullptr && c.n_stop > 0) throw api::Error("stop is NULL but n_stop is not 0");
  for (size_t i = 0; i < c.n_stop; ++i) {
    if (c.stop[i] == nullptr) throw api::Error("a stop string is NULL");
    options.stop.emplace_back(c.stop[i]);
  }
  if (c.grammar != nullptr) options.grammar = c.grammar;
  if (c.json_schema != nullptr) options.json_schema = c.json_schema;
  return options;
}

int32_t to_c(api::FinishReason reason) {
  switch (reason) {
    case api::FinishReason::None: return TANDEM_FINISH_NONE;
    case api::FinishReason::EndOfSequence: return TANDEM_FINISH_END_OF_SEQUENCE;
    case api::FinishReason::StopString: return TANDEM_FINISH_STOP_STRING;
    case api::FinishReason::Length: return TANDEM_FINISH_LENGTH;
    case api::FinishReason::ContextLimit: return TANDEM_FINISH_CONTEXT_LIMIT;
    case api::FinishReason::Cancelled: return TANDEM_FINISH_CANCELLED;
    case api::FinishReason::Error: return TANDEM_FINISH_ERROR;
  }
  return TANDEM_FINISH_ERROR;
}

tandem_usage to_c(const api::Usage& usage) {
  return {usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.kv_bytes};
}

tandem_speculation_usage speculation_to_c(const api::Usage& usage) {
  return {usage.drafted_tokens, usage.accepted_tokens};
}

tandem_timings to_c(const api::Timings& timings) {
  return {timings.queue_ms,
          timings.ttft_ms,
          timings.prefill_ms,
          timings.decode_ms,
          timings.e2e_ms,
          timings.tpot_mean_ms(),
          timings.tpot_percentile_ms(0.5),
          timings.tpot_percentile_ms(0.99)};
}

// A view of `event` (which must outlive it).
tandem_event to_c(const api::Event& event) {
  tandem_event c{};
  c.request_id = event.request_id;
  c.text = event.text.c_str();
  c.text_len = event.text.size();
  c.tokens = event.tokens.data();
  c.n_tokens = event.tokens.size();
  c.finished = event.finished ? 1 : 0;
  c.finish_reason = to_c(event.finish_reason);
  c.usage = to_c(event.usage);
  c.timings = to_c(event.timings);
  c.speculation = speculation_to_c(event.usage);
  c.error = event.error.c_str();
  c.error_len = event.error.size();
  return c;
}

// Reads the stream to its end on this thread, feeding the callback; fills *result if given.
tandem_status run_to_end(api::Stream& stream, tandem_event_callback callback, void* user_data, tandem_result* result) {
  std::string text;
  std::vector<int32_t> tokens;
  std::string error;
  tandem_result summary{};
  summary.seed = stream.seed();
  bool cancelled = false;
  while (std::optional<api::Event> event = stream.next()) {
    if (result != nullptr) {
      text += event->text;
      tokens.insert(tokens.end(), event->tokens.begin(), event->tokens.end());
    }
    if (event->finished) {
      summary.finish_reason = to_c(event->finish_reason);
      summary.usage = to_c(event->usage);
      summary.timings = to_c(event->timings);
      summary.speculation = speculation_to_c(event->usage);
      error = event->error;
    }
    if (callback != nullptr) {
      const tandem_event c_event = to_c(*event);
      // After a cancel the callback still sees the remaining events, the final one included.
      if (callback(&c_event, user_data) != 0 && !cancelled) {
        stream.cancel();
        cancelled = true;
      }
    }
  }
  if (result == nullptr) return TANDEM_OK;
  summary.text = static_cast<char*>(std::malloc(text.size() + 1));
  summary.tokens = static_cast<int32_t*>(std::malloc(tokens.size() * sizeof(int32_t) + 1));
  summary.error = static_cast<char*>(std::malloc(error.size() + 1));
  if (summary.text == nullptr || summary.tokens == nullptr || summary.error == nullptr) {
    std::free(summary.text);
    std::free(summary.tokens);
    std::free(summary.error);
    return fail(TANDEM_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  std::memcpy(summary.error, error.data(), error.size());
  summary.error[error.size()] = '\0';
  summary.error_len = error.size();
  std::memcpy(summary.text, text.data(), text.size());
  summary.text[text.size()] = '\0';
  summary.text_len = text.size();
  if (!tokens.empty()) std::memcpy(summary.tokens, tokens.data(), tokens.size() * sizeof(int32_t));
  summary.n_tokens = tokens.size();
  *result = summary;
  return TANDEM_OK;
}

}  // namespace

extern "C" {

tandem_engine_options tandem_engine_options_default(void) {
  const api::EngineOptions defaults;
  return {defaults.threads,
          defaults.max_sequences,
          defaults.max_batch_tokens,
          defaults.context_length,
          defaults.kv_memory_bytes,
          defaults.kv_block_size,
          static_cast<int32_t>(defaults.kv_type_k),
          static_cast<int32_t>(defaults.kv_type_v),
          nullptr};
}

tandem_status tandem_engine_create(const tandem_model* model, const tandem_engine_options* options,
                                   tandem_engine** engine) {
  if (engine == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_engine_create: engine is NULL");
  *engine = nullptr;
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_engine_create: model is NULL");
  return guarded([&] {
    const tandem_engine_options c = options != nullptr ? *options : tandem_engine_options_default();
    api::EngineOptions engine_options;
    engine_options.threads = c.threads;
    engine_options.max_sequences = c.max_sequences;
    engine_options.max_batch_tokens = c.max_batch_tokens;
    engine_options.context_length = c.context_length;
    engine_options.kv_memory_bytes = c.kv_memory_bytes;
    engine_options.kv_block_size = c.kv_block_size;
    for (int32_t type : {c.kv_type_k, c.kv_type_v})
      if (type < TANDEM_KV_F32 || type > TANDEM_KV_Q4_0)
        return fail(TANDEM_ERROR_INVALID_ARGUMENT,
                    "tandem_engine_create: kv_type_k/kv_type_v must be a tandem_kv_type");
    engine_options.kv_type_k = static_cast<api::KvCacheType>(c.kv_type_k);
    engine_options.kv_type_v = static_cast<api::KvCacheType>(c.kv_type_v);
    if (c.draft_model != nullptr) engine_options.draft_model = c.draft_model->model;
    *engine = new tandem_engine{api::Engine(model->model, engine_options)};
    return TANDEM_OK;
  });
}

void tandem_engine_free(tandem_engine* engine) { delete engine; }

void tandem_engine_cancel(tandem_engine* engine, uint64_t request_id) {
  if (engine == nullptr) return;
  guarded([&] {
    engine->engine.cancel(request_id);
    return TANDEM_OK;
  });
}

tandem_generate_options tandem_generate_options_default(void) {
  const api::GenerateOptions defaults;
  tandem_generate_options c{};
  c.max_tokens = defaults.max_tokens;
  c.temperature = defaults.temperature;
  c.top_k = defaults.top_k;
  c.top_p = defaults.top_p;
  c.min_p = defaults.min_p;
  c.repetition_penalty = defaults.repetition_penalty;
  c.repeat_last_n = defaults.repeat_last_n;
  c.presence_penalty = defaults.presence_penalty;
  c.frequency_penalty = defaults.frequency_penalty;
  c.seed = TANDEM_SEED_RANDOM;
  c.stop = nullptr;
  c.n_stop = 0;
  c.speculation = TANDEM_SPECULATION_NONE;
  c.draft_max = defaults.speculative.draft_max;
  c.draft_min = defaults.speculative.draft_min;
  c.ngram_min = defaults.speculative.ngram_min;
  c.ngram_max = defaults.speculative.ngram_max;
  return c;
}

const char* tandem_finish_reason_name(int32_t finish_reason) {
  switch (finish_reason) {
    case TANDEM_FINISH_NONE: return api::finish_reason_name(api::FinishReason::None);
    case TANDEM_FINISH_END_OF_SEQUENCE: return api::finish_reason_name(api::FinishReason::EndOfSequence);
    case TANDEM_FINISH_STOP_STRING: return api::finish_reason_name(api::FinishReason::StopString);
    case TANDEM_FINISH_LENGTH: return api::finish_reason_name(api::FinishReason::Length);
    case TANDEM_FINISH_CONTEXT_LIMIT: return api::finish_reason_name(api::FinishReason::ContextLimit);
    case TANDEM_FINISH_CANCELLED: return api::finish_reason_name(api::FinishReason::Cancelled);
    case TANDEM_FINISH_ERROR: return api::finish_reason_name(api::FinishReason::Error);
  }
  return "unknown finish reason";
}

tandem_status tandem_generate(tandem_engine* engine, const char* prompt, const tandem_generate_options* options,
                              tandem_event_callback callback, void* user_data, tandem_result* result) {
  if (result != nullptr) *result = tandem_result{};
  if (engine == nullptr || prompt == nullptr)
    return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_generate: engine or prompt is NULL");
  return guarded([&] {
    api::Stream stream = engine->engine.stream(prompt, to_options(options));
    return run_to_end(stream, callback, user_data, result);
  });
}

tandem_status tandem_generate_tokens(tandem_engine* engine, const int32_t* prompt_ids, size_t n_prompt_ids,
                                     const tandem_generate_options* options, tandem_event_callback callback,
                                     void* user_data, tandem_result* result) {
  if (result != nullptr) *result = tandem_result{};
  if (engine == nullptr || (prompt_ids == nullptr && n_prompt_ids > 0))
    return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_generate_tokens: engine or prompt_ids is NULL");
  return guarded([&] {
    api::Stream stream =
        engine->engine.stream(std::vector<int32_t>(prompt_ids, prompt_ids + n_prompt_ids), to_options(options));
    return run_to_end(stream, callback, user_data, result);
  });
}

tandem_status tandem_chat(tandem_engine* engine, const tandem_chat_message* messages, size_t n_messages,
                          const tandem_generate_options* options, tandem_event_callback callback, void* user_data,
                          tandem_result* result) {
  if (result != nullptr) *result = tandem_result{};
  if (engine == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_chat: engine is NULL");
  return guarded([&] {
    const auto converted = chat_messages(messages, n_messages);
    if (!converted)
      return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_chat: a message (or its role or content) is NULL");
    api::Stream stream = engine->engine.stream(engine->engine.model().tokenize_chat(*converted), to_options(options));
    return run_to_end(stream, callback, user_data, result);
  });
}

void tandem_result_free(tandem_result* result) {
  if (result == nullptr) return;
  std::free(result->text);
  std::free(result->tokens);
  std::free(result->error);
  *result = tandem_result{};
}

tandem_status tandem_stream_open(tandem_engine* engine, const char* prompt, const tandem_generate_options* options,
                                 tandem_stream** stream) {
  if (stream == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_stream_open: stream is NULL");
  *stream = nullptr;
  if (engine == nullptr || prompt == nullptr)
    return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_stream_open: engine or prompt is NULL");
  return guarded([&] {
    *stream = new tandem_stream{engine->engine.stream(prompt, to_options(options)), std::nullopt, false};
    return TANDEM_OK;
  });
}

tandem_status tandem_stream_open_tokens(tandem_engine* engine, const int32_t* prompt_ids, size_t n_prompt_ids,
                                        const tandem_generate_options* options, tandem_stream** stream) {
  if (stream == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_stream_open_tokens: stream is NULL");
  *stream = nullptr;
  if (engine == nullptr || (prompt_ids == nullptr && n_prompt_ids > 0))
    return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_stream_open_tokens: engine or prompt_ids is NULL");
  return guarded([&] {
    std::vector<int32_t> ids(prompt_ids, prompt_ids + n_prompt_ids);
    *stream = new tandem_stream{engine->engine.stream(std::move(ids), to_options(options)), std::nullopt, false};
    return TANDEM_OK;
  });
}

tandem_status tandem_stream_next(tandem_stream* stream, tandem_event* event) {
  if (stream == nullptr || event == nullptr)
    return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_stream_next: stream or event is NULL");
  if (stream->ended) return fail(TANDEM_ERROR_INPUT, "tandem_stream_next: the stream has ended");
  return guarded([&] {
    stream->current = stream->stream.next();
    stream->ended = !stream->current.has_value() || stream->current->finished;
    if (!stream->current.has_value()) return fail(TANDEM_ERROR_INPUT, "tandem_stream_next: the stream has ended");
    *event = to_c(*stream->current);
    return TANDEM_OK;
  });
}

void tandem_stream_cancel(tandem_stream* stream) {
  if (stream == nullptr) return;
  guarded([&] {
    stream->stream.cancel();
    return TANDEM_OK;
  });
}

uint64_t tandem_stream_seed(const tandem_stream* stream) { return stream != nullptr ? stream->stream.seed() : 0; }

void tandem_stream_free(tandem_stream* stream) { delete stream; }

}  // extern "C"
