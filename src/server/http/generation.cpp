// Completions, chat completions and responses on one connection (see session.h): the body
// is parsed (by the endpoint's GenerationFormat, generation_format.h) and tokenized on the
// worker pool, admitted against --parallel + --max-queue, submitted to the engine, and
// answered from its events — one JSON body, or SSE chunks (chunked in HTTP/1.1,
// close-delimited in HTTP/1.0). Stream headers wait for the first event, so a request the
// engine refuses before admission (shutdown) still gets a proper 503.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "model/model_config.h"
#include "server/chat_reply.h"
#include "server/chat_request.h"
#include "server/http/event_stream.h"
#include "server/http/generation_format.h"
#include "server/http/session.h"
#include "server/http/worker_job.h"
#include "server/json_body.h"
#include "server/llama_server_api.h"
#include "server/model_names.h"
#include "server/refusal.h"
#include "server/sampling_extras.h"

namespace tandem::server {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
// How often a request with no new event checks whether its client is still there.
constexpr auto kDisconnectPoll = kPeerPoll;

// A request ready for the engine, or why it is not.
struct PreparedRequest {
  ApiRequest api;
  std::vector<std::vector<int32_t>> prompts;  // one (chat), or completions' 1..kMaxPrompts
  std::vector<std::string> echo_texts;        // completions with echo: each prompt as text, leading its choices
  Refusal refusal;
};

// How a refusal names a prompt: the field ("prompt", "messages"), and with several prompts the
// prompt's index in it ("prompt[2]").
std::string prompt_path(std::string_view field, size_t index, size_t count) {
  return count == 1 ? std::string(field) : fmt::format("{}[{}]", field, index);
}
std::string prompt_prefix(std::string_view field, size_t index, size_t count) {
  return count == 1 ? std::string() : fmt::format("'{}': ", prompt_path(field, index, count));
}

// A prompt text with more bytes than the context's tokens could ever cover: refused before it
// is tokenized (tokenizing megabytes takes seconds and many times their size in memory).
void check_prompt_bytes(const Tokenizer& tokenizer, std::string_view text, int64_t context_length,
                        std::string_view field, size_t index = 0, size_t count = 1) {
  if (const int64_t at_least = tokenizer.min_tokens_of(text.size()); at_least > context_length)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("{}the prompt has {} bytes, so at least {} tokens, but the context is {} tokens",
                               prompt_prefix(field, index, count), text.size(), at_least, context_length),
                   prompt_path(field, index, count), ErrorCode::ContextLengthExceeded);
}

// What the engine would refuse of one prompt (engine.h check_generation_request: the same
// words), refused here with its field, and, with several prompts, before any is submitted: one
// refused at submission must not leave the others running.
void check_prompt_tokens(const std::vector<int32_t>& prompt, int64_t vocab, int64_t context_length,
                         std::string_view field, size_t index = 0, size_t count = 1) {
  const std::string prefix = prompt_prefix(field, index, count), path = prompt_path(field, index, count);
  if (prompt.empty())
    throw ApiError(400, "invalid_request_error", prefix + "the prompt is empty", path, ErrorCode::InvalidValue);
  if (static_cast<int64_t>(prompt.size()) > context_length)
    throw ApiError(
        400, "invalid_request_error",
        fmt::format("{}the prompt has {} tokens but the context is {} tokens", prefix, prompt.size(), context_length),
        path, ErrorCode::ContextLengthExceeded);
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw ApiError(400, "invalid_request_error", fmt::format("{}token id {} is outside the vocabulary", prefix, id),
                     path, ErrorCode::InvalidValue);
}

PreparedRequest prepare(const ServerState& state, const GenerationService& engine, GenerationFormat& format,
                        const std::string& body, const std::function<bool()>& abandoned) {
  PreparedRequest prepared;
  try {
    prepared.api = format.parse(body, engine.context_length(), abandoned);
    finish_sampling_extras(prepared.api, engine.tokenizer(),
                           {.priority_scheduling = state.config.priority_scheduling,
                            .trust_request_chat_template = state.config.trust_request_chat_template,
                            .extended_params = engine.workers().empty()});
    const ApiRequest& api = prepared.api;
    const Endpoint endpoint = api.endpoint;
    if (state.config.verbose && !api.ignored_fields.empty()) {
      std::string names;
      for (const std::string& name : api.ignored_fields) names += (names.empty() ? "'" : ", '") + name + "'";
      log_line(state, "ignoring unknown request fields " + names, "debug");
    }
    check_model_name(state.model_names, api.model);
    // The choices are meant to run side by side, sharing the prompt's blocks.
    if (api.n > engine.max_seqs())
      throw ApiError(400, "invalid_request_error",
                     fmt::format("'n' is {}, but this server runs at most {} sequences at once (--parallel)", api.n,
                                 engine.max_seqs()),
                     "n", ErrorCode::InvalidValue);
    // Several prompts run side by side or wait their turn; all of them must fit what the server
    // admits (--parallel + --max-queue), or the request could only ever be refused as busy.
    const int64_t sequences = static_cast<int64_t>(api.prompts.size()) * api.n;
    const int64_t capacity = engine.max_seqs() + state.config.max_queue;
    if (api.prompts.size() > 1 && sequences > capacity)
      throw ApiError(
          400, "invalid_request_error",
          fmt::format("'prompt' holds {} prompts with n = {}: {} sequences, but this server takes at most {} "
                      "(--parallel {} + --max-queue {})",
                      api.prompts.size(), api.n, sequences, capacity, engine.max_seqs(), state.config.max_queue),
          "prompt", ErrorCode::InvalidValue);
    const Tokenizer& tokenizer = engine.tokenizer();
    const bool bos = tokenizer.vocab().add_bos;
    const int64_t vocab = engine.model_config().vocab_size;
    // A prompt of many megabytes (a long context's worth) takes seconds to encode: the client
    // leaving, or the server stopping, ends it between the encoder's bounded parts.
    const EncodeCheckpoint checkpoint = [&abandoned] {
      if (abandoned()) throw BodyAbandoned();
    };
    if (endpoint == Endpoint::Chat) {
      // Control tokens are matched only in the template's own text, never in what a client wrote
      // (content, tool calls and results, names, tool definitions).
      chat::RenderOptions options = api.render;
      options.template_kwargs = merge_template_kwargs(state.config.chat_template_kwargs, options.template_kwargs);
      if (abandoned()) throw BodyAbandoned();
      // A request's own template (--trust-request-chat-template) is compiled for it alone.
      const chat::ChatRenderer own = api.chat_template.empty()
                                         ? chat::ChatRenderer{}
                                         : request_chat_renderer(state.chat_renderer, api.chat_template);
      const chat::ChatRenderer& renderer = api.chat_template.empty() ? state.chat_renderer : own;
      const RenderedChat chat = renderer.render_for_tokenizer(api.messages, api.tools, tokenizer, options);
      if (api.truncate_prompt_tokens == 0)
        check_prompt_bytes(tokenizer, chat.text, engine.context_length(), "messages");
      if (abandoned()) throw BodyAbandoned();
      prepared.prompts.push_back(
          tokenizer.encode(chat.text, bos && !renderer.starts_with_bos(chat.text), chat.special_spans, checkpoint));
      truncate_prompt(prepared.prompts.back(), api.truncate_prompt_tokens, engine.context_length());
      check_prompt_tokens(prepared.prompts.back(), vocab, engine.context_length(), "messages");
    } else {
      // Every text's length first: a prompt too long is refused before any is tokenized.
      const size_t count = api.prompts.size();
      for (size_t i = 0; i < count; ++i)
        if (api.prompts[i].ids.empty() && api.truncate_prompt_tokens == 0)
          check_prompt_bytes(tokenizer, api.prompts[i].text, engine.context_length(), "prompt", i, count);
      for (const PromptInput& prompt : api.prompts) {
        if (abandoned()) throw BodyAbandoned();
        prepared.prompts.push_back(
            prompt.ids.empty() ? tokenizer.encode(prompt.text, bos, prompt.parse_special, checkpoint) : prompt.ids);
        truncate_prompt(prepared.prompts.back(), api.truncate_prompt_tokens, engine.context_length());
        check_prompt_tokens(prepared.prompts.back(), vocab, engine.context_length(), "prompt",
                            prepared.prompts.size() - 1, count);
        if (api.echo) prepared.echo_texts.push_back(prompt.ids.empty() ? prompt.text : tokenizer.decode(prompt.ids));
      }
    }
  } catch (...) {
    prepared.refusal = refusal_for_current_exception();
    if (!prepared.refusal.internal_detail.empty())
      log_line(state, "internal error preparing a request: " + prepared.refusal.internal_detail, "error");
  }
  return prepared;
}

// Tool calls the model wrote that did not parse stay content; the operator sees why.
void log_reply_errors(const ServerState& state, const ChatReplyShaper& shaper) {
  for (const std::string& error : shaper.errors()) log_line(state, "tool call: " + error, "warning");
}

// One choice of a request: its own engine sequence (seed + index), sharing the prompt.
struct Choice {
  uint64_t request_id = 0;
  int32_t slot = -1;  // its place among --parallel (SlotTable); -1: none was idle
  bool finished = false;
  bool first = true;  // no chunk of it sent yet
  Completion completion;
  std::optional<ChatReplyShaper> shaper;  // chat: content, reasoning and tool calls read from the text
};

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// /v1/completions and /v1/chat/completions: OpenAI's shapes (openai_protocol.h).
class OpenAIFormat final : public GenerationFormat {
 public:
  OpenAIFormat(Endpoint endpoint, const SpeculationParams& speculation)
      : endpoint_(endpoint), speculation_(speculation) {}

  ApiRequest parse(const std::string& body, int64_t context_length, const std::function<bool()>& abandoned) override {
    // Chat has no natural length: by default it may run to the end of the context.
    const int64_t default_max_tokens = endpoint_ == Endpoint::Chat ? context_length : 16;
    ApiRequest api = parse_request(endpoint_, body, default_max_tokens, speculation_, abandoned);
    include_usage_ = api.include_usage;
    return api;
  }
  std::string response_id(uint64_t serial) const override {
    return fmt::format("{}-{}", endpoint_ == Endpoint::Chat ? "chatcmpl" : "cmpl", serial);
  }
  std::string whole(const ResponseMeta& meta, const std::vector<Completion>& choices) override {
    return dump_json(response_json(meta, choices));
  }
  std::string stream_event(const ResponseMeta& meta, const RequestEvent& event,
                           const std::vector<nlohmann::json>& deltas, bool first, bool called_tools,
                           int32_t index) override {
    return sse_choice_event(meta, event, deltas, first, called_tools, index);
  }
  std::string stream_error(const ResponseMeta&, const RequestEvent& event) override {
    return sse_data(stream_error_json(event));
  }
  std::string stream_end(const ResponseMeta& meta, const std::vector<Completion>& choices) override {
    return sse_stream_end(meta, include_usage_ ? choices_usage(meta, choices) : nlohmann::json(nullptr));
  }

 private:
  const Endpoint endpoint_;
  const SpeculationParams speculation_;
  bool include_usage_ = false;
};

}  // namespace

asio::awaitable<bool> Session::serve_generation(Endpoint endpoint, HttpRequest request, bool keep_alive) {
  OpenAIFormat format(endpoint, state_.config.speculation);
  co_return co_await serve_generation(format, std::move(request), keep_alive);
}

asio::awaitable<bool> Session::serve_generation(GenerationFormat& format, HttpRequest request, bool keep_alive) {
  const unsigned version = request.version();
  GenerationService* engine = state_.engine.load();
  if (engine == nullptr) {
    HttpResponse response = error_response(version, 503, "the model is still loading", "server_error", keep_alive);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }

  const PreparedRequest prepared = co_await on_worker([&](const std::function<bool()>& abandoned) {
    return prepare(state_, *engine, format, request.body(), abandoned);
  });
  if (prepared.refusal.abandoned) co_return co_await answer_abandoned(version);
  if (prepared.refusal.refused()) co_return co_await send(error_response(version, prepared.refusal, keep_alive));

  ServingCounters& counters = *state_.counters;
  const int64_t capacity = engine->max_seqs() + state_.config.max_queue;
  if (state_.shutting_down || counters.in_engine.load() >= capacity) {
    const bool shutting_down = state_.shutting_down;
    if (!shutting_down) counters.metrics.count(TransportEvent::Shed);
    HttpResponse response = error_response(
        version, 503,
        shutting_down ? "the server is shutting down"
                      : fmt::format("the server is busy: {} requests are running or waiting (--parallel {} + "
                                    "--max-queue {}); retry later",
                                    counters.in_engine.load(), engine->max_seqs(), state_.config.max_queue),
        "server_error", keep_alive && !shutting_down);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }

  const ApiRequest& api = prepared.api;
  const Endpoint endpoint = api.endpoint;
  const int32_t n = api.n;  // choices per prompt
  const auto n_prompts = static_cast<int32_t>(prepared.prompts.size());
  const int32_t n_choices = n_prompts * n;  // prompt-major: prompt p's choice i is p * n + i
  if (counters.in_engine.load() + n_choices > capacity) {
    counters.metrics.count(TransportEvent::Shed);
    HttpResponse response = error_response(
        version, 503,
        fmt::format("the server is busy: {} requests are running or waiting and this one has {} choices (--parallel "
                    "{} + --max-queue {}); retry later",
                    counters.in_engine.load(), n_choices, engine->max_seqs(), state_.config.max_queue),
        "server_error", keep_alive);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }
  auto events = std::make_shared<EventStream>(stream_.get_executor());
  std::vector<Choice> choices(static_cast<size_t>(n_choices));
  // Every choice still in a slot when this returns (a client that left mid-stream) gives it back.
  struct ReleaseSlots {
    SlotTable& slots;
    const std::vector<Choice>& choices;
    ~ReleaseSlots() {
      for (const Choice& choice : choices)
        if (!choice.finished) slots.advance(choice.slot, {}, /*finished=*/true);
    }
  } release_slots{state_.slots, choices};
  // Choice i of a prompt samples with seed + i; each prompt's choice 0 is submitted now, all
  // prompts at once (the engine batches them). A prompt's other choices follow its choice 0's
  // first event: by then its prompt is prefilled and its full blocks are in the prefix cache,
  // so they reuse them instead of computing the same prompt n times over.
  const auto submit_choice = [&](int32_t index) -> std::string {
    GenerationParams params = api.params;
    params.sampling.seed = choice_seed(api.params.sampling.seed, index % n);
    const std::vector<int32_t>& prompt = prepared.prompts[static_cast<size_t>(index / n)];
    ++counters.in_engine;
    try {
      Choice& choice = choices[static_cast<size_t>(index)];
      choice.request_id = engine->submit(prompt, params, [events, counters = state_.counters](RequestEvent&& event) {
        const bool finished = event.finished;
        if (finished) counters->metrics.observe(event);
        events->push(std::move(event));
        if (finished) --counters->in_engine;
      });
      nlohmann::json settings =
          generation_settings_json(api, std::max(0, params.top_logprobs), engine->context_length(), params.max_tokens);
      settings["seed"] = params.sampling.seed;
      choice.slot = state_.slots.acquire(choice.request_id, prompt, params.max_tokens, std::move(settings));
    } catch (const InputError& e) {
      --counters.in_engine;
      choices[static_cast<size_t>(index)].finished = true;
      return e.what();
    }
    return {};
  };
  // Every unfinished choice (one not submitted yet has id 0, which the engine ignores).
  const auto cancel_all = [&] {
    for (const Choice& choice : choices)
      if (!choice.finished) engine->cancel(choice.request_id);
  };
  for (int32_t p = 0; p < n_prompts; ++p) {
    if (const std::string refusal = submit_choice(p * n); !refusal.empty()) {
      // The prompts were checked before (prepare): the same refusal for every one, so the first.
      for (int32_t q = 0; q < p; ++q) engine->cancel(choices[static_cast<size_t>(q * n)].request_id);
      co_return co_await send(error_response(version, 400, refusal, "invalid_request_error", keep_alive));
    }
  }
  std::vector<bool> rest_submitted(static_cast<size_t>(n_prompts), n == 1);  // per prompt
  const auto choice_of = [&](const RequestEvent& event) -> int32_t {
    for (int32_t i = 0; i < n_choices; ++i)
      if (choices[static_cast<size_t>(i)].request_id == event.request_id) return i;
    return -1;  // not ours: cannot happen (one stream per request)
  };

  ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.id = format.response_id(state_.next_response_id++);
  meta.created = unix_seconds();
  meta.model = state_.model_id;
  meta.logprobs = api.logprobs;
  meta.tokens_as_ids = api.tokens_as_ids;
  meta.n = n;
  log_entry_.id = meta.id;
  log_entry_.generation = true;
  log_entry_.choices = n_choices;

  asio::steady_timer wake(stream_.get_executor());
  const ScopedWaiter waiter(*events, wake);

  // HTTP/1.0 has no chunked encoding: its stream is the body up to the close.
  const bool chunked = version >= 11;
  const auto write_timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(state_.config.write_timeout_s));
  bool gone = false;  // the client left: cancelled, waiting for the final events
  bool headers_sent = false;
  for (Choice& choice : choices)
    if (endpoint == Endpoint::Chat) choice.shaper.emplace(api, state_.tool_call_syntax, chat::random_tool_call_seed());
  const auto all_finished = [&] {
    return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.finished; });
  };
  // The log line's tokens and times, from each choice's final event.
  const auto note_final = [&](int32_t index, const RequestEvent& event) {
    log_entry_.cached_tokens += event.cached_tokens;
    log_entry_.completion_tokens += event.completion_tokens;
    if (event.finish_reason == FinishReason::Error && log_entry_.error.empty()) log_entry_.error = event.error;
    if (index % n == 0) log_entry_.prompt_tokens += event.prompt_tokens;  // each prompt once
    if (index != 0) return;
    log_entry_.queue_ms = event.queue_ms;
    log_entry_.ttft_ms = event.ttft_ms;
    log_entry_.finish_reason = finish_reason_name(event.finish_reason);
  };
  std::vector<RequestEvent> batch;
  std::string failure;  // why a choice ended with an error (a worker failed under it, or its grammar passed a limit)
  bool failure_from_request = false;  // the latter: a 400, not a 503
  // The client is looked at every kDisconnectPoll, whether or not events came in between: a
  // request whose events arrive faster than that (every step, on a busy machine) would
  // otherwise never be checked, and a non-streamed one writes nothing that could fail.
  auto last_check = std::chrono::steady_clock::now();
  const auto check_client = [&]() -> asio::awaitable<void> {
    last_check = std::chrono::steady_clock::now();
    if (gone || !co_await peer_left()) co_return;
    gone = true;
    counters.metrics.count(TransportEvent::Disconnect);
    cancel_all();
  };
  for (bool finished = false; !finished;) {
    batch.clear();
    if (!events->pop_all(batch)) {
      wake.expires_after(kDisconnectPoll);
      co_await wake.async_wait(kNoThrow);  // a push cancels it early
      co_await check_client();
      continue;
    }
    if (std::chrono::steady_clock::now() - last_check >= kDisconnectPoll) co_await check_client();
    // Refused before it ran (shutdown): nothing was sent yet, so it can still be a 503.
    bool refused = false;
    std::vector<int32_t> started;  // prompts whose choice 0 had its first event in this batch
    std::vector<bool> prompt_refused(static_cast<size_t>(n_prompts), false);
    for (const RequestEvent& event : batch) {
      const int32_t index = choice_of(event);
      if (index < 0) continue;
      const int32_t p = index / n;
      if (index % n == 0 && !rest_submitted[static_cast<size_t>(p)] &&
          std::find(started.begin(), started.end(), p) == started.end())
        started.push_back(p);
      state_.slots.advance(choices[static_cast<size_t>(index)].slot, event.tokens, event.finished);
      if (event.finished) {
        choices[static_cast<size_t>(index)].finished = true;
        note_final(index, event);
        const bool not_run = event.finish_reason == FinishReason::Cancelled && !event.admitted;
        refused |= not_run;
        if (not_run) prompt_refused[static_cast<size_t>(p)] = true;
      }
    }
    for (const int32_t p : started) {
      rest_submitted[static_cast<size_t>(p)] = true;
      const bool submit = !prompt_refused[static_cast<size_t>(p)] && !gone && !state_.shutting_down;
      for (int32_t i = p * n + 1; i < (p + 1) * n; ++i) {
        if (submit) {
          submit_choice(i);  // the same prompt and parameters as the prompt's choice 0: accepted too
        } else {
          choices[static_cast<size_t>(i)].finished = true;
        }
      }
    }
    finished = all_finished();

    if (!api.stream) {
      for (RequestEvent& event : batch) {
        const int32_t index = choice_of(event);
        if (index < 0) continue;
        Completion& completion = choices[static_cast<size_t>(index)].completion;
        if (completion.text.empty() && api.echo) completion.text = prepared.echo_texts[static_cast<size_t>(index / n)];
        completion.text += event.text;
        completion.tokens.insert(completion.tokens.end(), event.tokens.begin(), event.tokens.end());
        for (TokenLogprob& lp : event.logprobs) completion.logprobs.push_back(std::move(lp));
        if (!event.finished) continue;
        completion.finish_reason = event.finish_reason;
        if (event.finish_reason == FinishReason::Error && !event.error.empty()) {
          failure = event.error;
          failure_from_request = failure_from_request || event.error_from_request;
        }
        note_totals(completion, event);
      }
      if (!finished) continue;
      if (gone) co_return false;
      std::vector<Completion> completions;
      bool cancelled = false;
      for (Choice& choice : choices) {
        if (choice.shaper) {
          choice.completion.reply = choice.shaper->whole(choice.completion.text);
          log_reply_errors(state_, *choice.shaper);
        }
        cancelled |= choice.completion.finish_reason == FinishReason::Cancelled ||
                     choice.completion.finish_reason == FinishReason::None;
        completions.push_back(std::move(choice.completion));
      }
      if (!failure.empty() && failure_from_request)  // its grammar passed a limit: the same again would too
        co_return co_await send(error_response(version, 400, failure, "invalid_request_error", keep_alive));
      if (!failure.empty()) {  // a worker process failed under it (tandem serve --workers)
        HttpResponse response = error_response(version, 503, failure, "server_error", keep_alive);
        response.set(http::field::retry_after, "1");
        co_return co_await send(std::move(response));
      }
      if (cancelled) {
        HttpResponse response = error_response(version, 503, "the server is shutting down; the request was cancelled",
                                               "server_error", false);
        response.set(http::field::retry_after, "1");
        co_return co_await send(std::move(response));
      }
      HttpResponse response{http::status::ok, version};
      response.set(http::field::content_type, "application/json");
      response.keep_alive(keep_alive);
      response.body() = format.whole(meta, completions);
      co_return co_await send(std::move(response));
    }

    if (gone) continue;
    if (!headers_sent && refused) {
      cancel_all();
      HttpResponse response = error_response(version, 503, "the server is shutting down; the request was not started",
                                             "server_error", false);
      response.set(http::field::retry_after, "1");
      co_return co_await send(std::move(response));
    }
    std::string chunks;
    for (RequestEvent& event : batch) {
      const int32_t index = choice_of(event);
      if (index < 0) continue;
      Choice& choice = choices[static_cast<size_t>(index)];
      if (choice.first && api.echo) event.text = prepared.echo_texts[static_cast<size_t>(index / n)] + event.text;
      if (choice.shaper) {
        std::vector<nlohmann::json> deltas = choice.shaper->feed(event.text);
        if (event.finished) {
          for (nlohmann::json& delta : choice.shaper->finish()) deltas.push_back(std::move(delta));
          log_reply_errors(state_, *choice.shaper);
        }
        chunks += format.stream_event(meta, event, deltas, choice.first, choice.shaper->called_tools(), index);
      } else {
        std::vector<nlohmann::json> deltas;
        if (!event.text.empty()) deltas.push_back({{"content", event.text}});
        chunks += format.stream_event(meta, event, deltas, choice.first, false, index);
      }
      choice.first = false;
      // A worker process failed under it (503), or its grammar passed a limit (400).
      if (event.finished && event.finish_reason == FinishReason::Error && !event.error.empty())
        chunks += format.stream_error(meta, event);
      if (event.finished) {
        choice.completion.finish_reason = event.finish_reason;
        note_totals(choice.completion, event);
      }
    }
    if (finished) {
      std::vector<Completion> totals;
      for (const Choice& choice : choices) totals.push_back(choice.completion);
      chunks += format.stream_end(meta, totals);
    }
    beast::error_code ec;
    if (!headers_sent) {
      http::response<http::empty_body> head{http::status::ok, version};
      head.set(http::field::server, "tandem");
      set_cors_headers(head);
      head.set(http::field::content_type, "text/event-stream");
      head.set(http::field::cache_control, "no-cache");
      if (chunked) {
        head.chunked(true);
        head.keep_alive(keep_alive);
      } else {
        head.keep_alive(false);
      }
      http::response_serializer<http::empty_body> serializer{head};
      response_started_ = true;
      stream_.expires_after(write_timeout);
      std::tie(ec, std::ignore) = co_await http::async_write_header(stream_, serializer, kNoThrow);
      headers_sent = true;
      log_entry_.status = 200;
    }
    if (!ec && !chunks.empty()) {
      stream_.expires_after(write_timeout);
      if (chunked) {
        std::tie(ec, std::ignore) =
            co_await asio::async_write(stream_, http::make_chunk(asio::buffer(chunks)), kNoThrow);
      } else {
        std::tie(ec, std::ignore) = co_await asio::async_write(stream_, asio::buffer(chunks), kNoThrow);
      }
    }
    if (!ec && finished && chunked) {
      stream_.expires_after(write_timeout);
      std::tie(ec, std::ignore) = co_await asio::async_write(stream_, http::make_chunk_last(), kNoThrow);
    }
    stream_.expires_never();
    if (ec) {
      // The client left (or stopped reading): stop generating for it at the next step.
      counters.metrics.count(ec == beast::error::timeout ? TransportEvent::WriteTimeout : TransportEvent::Disconnect);
      if (!finished) cancel_all();
      co_return false;
    }
  }
  co_return chunked&& keep_alive;
}

}  // namespace tandem::server
