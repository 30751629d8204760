// POST /v1/embeddings, llama-server's /embedding and /rerank on one connection (see
// session.h): the body is parsed and tokenized on the worker pool (embeddings_api.h,
// llama_server_api.h), each input is admitted against --parallel + --max-queue and submitted to
// the engine as an embedding request (GenerationParams::pooling: the server's --pooling; the
// last position for /rerank), and the final events' pooled vectors (normalised as the endpoint
// asks, or scored by the model's head, rank_head.h) are answered in input order as one JSON
// body. A client that leaves cancels its inputs.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <unordered_map>

#include "base/error.h"
#include "model/model_config.h"
#include "server/embeddings_api.h"
#include "server/http/event_stream.h"
#include "server/http/session.h"
#include "server/http/worker_job.h"
#include "server/llama_server_api.h"
#include "server/model_names.h"
#include "server/refusal.h"

namespace tandem::server {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
constexpr auto kDisconnectPoll = kPeerPoll;
// Inputs per request at most (OpenAI allows 2048).
constexpr int64_t kMaxInputs = 2048;

using Shape = Session::EmbeddingShape;

struct PreparedEmbeddings {
  EmbeddingsRequest request;
  int32_t normalize = 2;  // llama-server's embd_normalize (OpenAI's: always 2, unit length; rerank: none)
  RerankRequest rerank;   // Shape::Rerank
  Refusal refusal;
};

PreparedEmbeddings prepare(const ServerState& state, const GenerationService& engine, const std::string& body,
                           Shape shape, const std::function<bool()>& abandoned) {
  PreparedEmbeddings prepared;
  try {
    // Each input is a request in the engine: more than --parallel + --max-queue can never be
    // admitted at once, however idle the server (a 400 then, not a 503 to retry).
    const int64_t capacity = engine.max_seqs() + state.config.max_queue;
    const int64_t max_inputs = std::min(kMaxInputs, capacity);
    const std::string reason =
        max_inputs < kMaxInputs
            ? fmt::format(" (each input runs as one request, and this server holds at most {}: --parallel {} + "
                          "--max-queue {})",
                          capacity, engine.max_seqs(), state.config.max_queue)
            : std::string();
    const int64_t d_model = engine.model_config().d_model;
    if (shape == Shape::Rerank) {
      prepared.rerank = parse_rerank(body, engine.tokenizer(), engine.context_length(), max_inputs,
                                     !state.rank_head.empty(), abandoned);
      prepared.request.inputs = prepared.rerank.inputs;
      prepared.request.model = prepared.rerank.model;
      prepared.normalize = -1;  // the head reads the hidden state as it is
    } else if (shape == Shape::Native) {
      prepared.request = parse_native_embedding(body, engine.tokenizer(), d_model, engine.context_length(), max_inputs,
                                                reason, prepared.normalize, abandoned);
    } else {
      if (state.config.pooling == Pooling::Tokens)
        throw ApiError(400, "invalid_request_error",
                       "this server runs with --pooling none (every token's state, not one vector per input): "
                       "/v1/embeddings needs --pooling mean or last; llama-server's /embedding answers per token");
      prepared.request = parse_embeddings_request(body, engine.tokenizer(), d_model, engine.context_length(),
                                                  max_inputs, reason, abandoned);
    }
    // llama-server's --pooling none: the states as they are.
    if (shape == Shape::Native && state.config.pooling == Pooling::Tokens) prepared.normalize = -1;
    check_model_name(state.model_names, prepared.request.model);
  } catch (...) {
    prepared.refusal = refusal_for_current_exception();
    if (!prepared.refusal.internal_detail.empty())
      log_line(state, "internal error preparing an embeddings request: " + prepared.refusal.internal_detail, "error");
  }
  return prepared;
}

}  // namespace

asio::awaitable<bool> Session::serve_embeddings(HttpRequest request, bool keep_alive, EmbeddingShape shape) {
  const unsigned version = request.version();
  GenerationService* engine = state_.engine.load();
  if (engine == nullptr) co_return co_await send(loading_response(version, keep_alive));
  const PreparedEmbeddings prepared = co_await on_worker([&](const std::function<bool()>& abandoned) {
    return prepare(state_, *engine, request.body(), shape, abandoned);
  });
  if (prepared.refusal.abandoned) co_return co_await answer_abandoned(version);
  if (prepared.refusal.refused()) co_return co_await send(error_response(version, prepared.refusal, keep_alive));

  const std::vector<std::vector<int32_t>>& inputs = prepared.request.inputs;
  const auto n_inputs = static_cast<int64_t>(inputs.size());
  ServingCounters& counters = *state_.counters;
  const int64_t capacity = engine->max_seqs() + state_.config.max_queue;
  if (state_.shutting_down || counters.in_engine.load() + n_inputs > capacity) {
    const bool shutting_down = state_.shutting_down;
    if (!shutting_down) counters.metrics.count(TransportEvent::Shed);
    HttpResponse response = error_response(
        version, 503,
        shutting_down ? "the server is shutting down"
                      : fmt::format("the server is busy: {} requests are running or waiting and this one brings {} "
                                    "inputs (--parallel {} + --max-queue {}); retry later",
                                    counters.in_engine.load(), n_inputs, engine->max_seqs(), state_.config.max_queue),
        "server_error", keep_alive && !shutting_down);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }

  auto events = std::make_shared<EventStream>(stream_.get_executor());
  std::unordered_map<uint64_t, size_t> index_of;  // engine request id -> input index
  std::string refusal;
  GenerationParams params;
  params.max_tokens = 1;
  params.sampling.temperature = 0.0f;
  // A reranker's head reads the last position's state (llama.cpp's rank pooling, causal models).
  params.pooling = shape == Shape::Rerank ? Pooling::Last : state_.config.pooling;
  for (size_t i = 0; i < inputs.size() && refusal.empty(); ++i) {
    ++counters.in_engine;
    try {
      const uint64_t id = engine->submit(inputs[i], params, [events, counters = state_.counters](RequestEvent&& event) {
        const bool finished = event.finished;
        events->push(std::move(event));
        if (finished) --counters->in_engine;
      });
      index_of.emplace(id, i);
    } catch (const InputError& e) {
      --counters.in_engine;
      refusal = e.what();
    }
  }
  if (!refusal.empty()) {
    for (const auto& [id, index] : index_of) engine->cancel(id);
  }

  asio::steady_timer wake(stream_.get_executor());
  const ScopedWaiter waiter(*events, wake);

  std::vector<std::vector<float>> vectors(inputs.size());
  int64_t prompt_tokens = 0;
  bool cancelled = false, gone = false;
  std::vector<RequestEvent> batch;
  // Every submitted input ends with a final event (cancelled ones too), so this always returns.
  for (size_t finished = 0; finished < index_of.size();) {
    batch.clear();
    if (!events->pop_all(batch)) {
      wake.expires_after(kDisconnectPoll);
      co_await wake.async_wait(kNoThrow);
      if (!gone && co_await peer_left()) {
        gone = true;
        counters.metrics.count(TransportEvent::Disconnect);
        for (const auto& [id, index] : index_of) engine->cancel(id);
      }
      continue;
    }
    for (RequestEvent& event : batch) {
      if (!event.finished) continue;
      ++finished;
      if (event.finish_reason != FinishReason::EndOfSequence) {
        cancelled = true;
        continue;
      }
      prompt_tokens += event.prompt_tokens;
      std::vector<float>& vector = vectors[index_of.at(event.request_id)];
      vector = std::move(event.embedding);
      normalize_embedding(vector, prepared.normalize);
    }
  }
  if (gone) co_return false;
  if (!refusal.empty())
    co_return co_await send(error_response(version, 400, refusal, "invalid_request_error", keep_alive));
  if (cancelled) {
    HttpResponse response =
        error_response(version, 503, "the server is shutting down; the request was cancelled", "server_error", false);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }
  if (shape == Shape::Rerank) {
    std::vector<float> scores;
    for (const std::vector<float>& vector : vectors) scores.push_back(state_.rank_head.scores(vector).front());
    const nlohmann::json ranked = rerank_response_json(prepared.rerank, scores, state_.model_id, prompt_tokens);
    co_return co_await send(json_response(version, ranked, keep_alive));
  }
  if (shape == Shape::Native) {
    const int64_t row_length = params.pooling == Pooling::Tokens ? engine->model_config().d_model : 0;
    co_return co_await send(json_response(version, native_embedding_json(vectors, row_length), keep_alive));
  }
  co_return co_await send(json_response(
      version, embeddings_response_json(vectors, prepared.request.base64, state_.model_id, prompt_tokens), keep_alive));
}

}  // namespace tandem::server
