// GET /slots and POST /slots/{id}?action=save|restore|erase on one connection (see session.h).
// A slot is one of the --parallel places (slot_table.h). Save runs the slot's tokens as a
// prefill-only request whose KV blocks are handed to a sink (engine/kv_export.h; its cached
// blocks are reused, not recomputed) and writes them to a slot file (slot_file.h); restore
// imports a file's blocks into the prefix cache (Engine::submit_imported, as a disaggregated
// decode rank receives them) through a one-token request, so a later prompt that starts with
// those tokens reuses them. Files are read and written on the worker pool.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <charconv>
#include <chrono>

#include <fmt/format.h>

#include "engine/kv_export.h"
#include "kv/kv_block_message.h"
#include "model/model_config.h"
#include "server/http/event_stream.h"
#include "server/http/session.h"
#include "server/http/worker_job.h"
#include "server/json_body.h"
#include "server/request_json.h"
#include "server/slot_file.h"

namespace tandem::server {

namespace asio = boost::asio;

namespace {

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

enum class SlotAction { Save, Restore, Erase };

// "/slots/3?action=save" -> 3 and the action; ApiError 400 for anything else.
std::pair<int32_t, SlotAction> slot_target(std::string_view target, int32_t n_slots) {
  constexpr std::string_view kPrefix = "/slots/";
  const size_t query = target.find('?');
  const std::string_view id_text = target.substr(kPrefix.size(), query - std::min(query, kPrefix.size()));
  int32_t id = -1;
  const auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (ec != std::errc() || end != id_text.data() + id_text.size() || id < 0 || id >= n_slots)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("'id_slot' must be a slot of this server, 0..{} (--parallel), not \"{}\"", n_slots - 1,
                               id_text.substr(0, 40)),
                   "id_slot", ErrorCode::InvalidValue);
  const std::string_view params = query == std::string_view::npos ? std::string_view() : target.substr(query + 1);
  for (const auto& [name, action] :
       {std::pair{"action=save", SlotAction::Save}, std::pair{"action=restore", SlotAction::Restore},
        std::pair{"action=erase", SlotAction::Erase}})
    if (params == name) return {id, action};
  throw ApiError(400, "invalid_request_error",
                 fmt::format("'action' must be save, restore or erase (/slots/{}?action=...), not \"{}\"", id,
                             params.substr(0, 40)),
                 "action", ErrorCode::InvalidValue);
}

// The body's filename, as a path under --slot-save-path (slot_file_path's 400s).
std::string filename_of(const std::string& body, const std::string& directory, std::string& filename,
                        const std::function<bool()>& abandoned) {
  const RequestJson json = parse_json_object(body, {}, abandoned);
  filename = string_field(json, "filename");
  if (filename.empty() && !field(json, "filename")) bad("'filename' is required", ErrorCode::MissingRequired);
  return slot_file_path(directory, filename);
}

// The blocks of a prefill-only request, packed as they are computed (engine thread), read once
// its final event has arrived.
class CollectBlocks final : public KvBlockSink {
 public:
  void block_computed(const KvCache& cache, int32_t physical_block, int64_t block_index, uint64_t parent_hash,
                      std::span<const int32_t> tokens) override {
    std::vector<uint8_t>& message = blocks.emplace_back();
    pack_kv_block(cache, physical_block, block_index, parent_hash, tokens, message);
  }
  std::vector<std::vector<uint8_t>> blocks;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct FileJob {
  std::string path, filename;
  SlotFile file;
  int64_t bytes = 0;
  Refusal refusal;
};

}  // namespace

asio::awaitable<bool> Session::serve_slots(HttpRequest request, bool keep_alive) {
  const unsigned version = request.version();
  GenerationService* engine = state_.engine.load();
  if (engine == nullptr) co_return co_await send(loading_response(version, keep_alive));
  if (request.method() != http::verb::post)
    co_return co_await send(
        json_response(version, state_.slots.json(engine->tokenizer(), engine->context_length()), keep_alive));

  int32_t id = 0;
  SlotAction action = SlotAction::Erase;
  Refusal refusal;
  try {
    std::tie(id, action) = slot_target(request.target(), state_.slots.size());
    if (state_.slots.at(id).processing)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("slot {} is processing a request; {} it once it is idle", id,
                                 action == SlotAction::Save      ? "save"
                                 : action == SlotAction::Restore ? "restore"
                                                                 : "erase"),
                     "id_slot", ErrorCode::InvalidValue);
  } catch (...) {
    refusal = refusal_for_current_exception();
  }
  if (refusal.refused()) co_return co_await send(error_response(version, refusal, keep_alive));
  const auto start = std::chrono::steady_clock::now();
  const bool save = action == SlotAction::Save;
  FileJob job = co_await on_worker([&](const std::function<bool()>& abandoned) {
    FileJob result;
    try {
      if (action == SlotAction::Erase) {
        if (!request.body().empty()) parse_json_object(request.body(), {}, abandoned);  // no fields, but JSON
      } else {
        result.path = filename_of(request.body(), state_.config.slot_save_path, result.filename, abandoned);
        if (!save) result.file = read_slot_file(result.path, &result.bytes);
      }
    } catch (...) {
      result.refusal = refusal_for_current_exception();
    }
    return result;
  });
  if (job.refusal.abandoned) co_return co_await answer_abandoned(version);
  if (job.refusal.refused()) co_return co_await send(error_response(version, job.refusal, keep_alive));
  if (action == SlotAction::Erase) {
    const nlohmann::json erased = {{"id_slot", id}, {"n_erased", state_.slots.erase(id)}};
    co_return co_await send(json_response(version, erased, keep_alive));
  }

  const int64_t block_size = engine->stats().block_size;
  GenerationParams params;
  params.max_tokens = 1;
  params.sampling.temperature = 0.0f;
  std::vector<int32_t> prompt;
  std::shared_ptr<CollectBlocks> sink;
  std::shared_ptr<KvImport> kv_import;
  try {
    if (save) {
      // Whole blocks, and one token more for a restore to compute (slot_file.h).
      const std::vector<int32_t>& tokens = state_.slots.at(id).tokens;
      const int64_t n_blocks = tokens.empty() ? 0 : static_cast<int64_t>(tokens.size() - 1) / block_size;
      if (n_blocks == 0)
        throw ApiError(400, "invalid_request_error",
                       fmt::format("slot {} holds {} tokens; a slot file keeps whole KV blocks of {} tokens (and one "
                                   "token more), so there is nothing to save",
                                   id, tokens.size(), block_size));
      job.file.block_size = block_size;
      job.file.tokens.assign(tokens.begin(), tokens.begin() + n_blocks * block_size + 1);
      prompt.assign(tokens.begin(), tokens.begin() + n_blocks * block_size);
      sink = std::make_shared<CollectBlocks>();
      params.kv_export = sink;
    } else {
      if (job.file.block_size != block_size)
        throw ApiError(400, "invalid_request_error",
                       fmt::format("{} holds KV blocks of {} tokens; this server's are {} (--kv-block)", job.filename,
                                   job.file.block_size, block_size));
      for (const int32_t token : job.file.tokens)
        if (token < 0 || token >= engine->model_config().vocab_size)
          throw ApiError(400, "invalid_request_error",
                         fmt::format("{} holds token {}, outside this model's vocabulary", job.filename, token));
      prompt = job.file.tokens;
      auto blocks = std::make_shared<std::vector<std::vector<uint8_t>>>(std::move(job.file.blocks));
      auto self = std::make_shared<std::weak_ptr<KvImport>>();
      // Engine thread, once: the blocks its prefix cache lacks, then the end.
      kv_import = std::make_shared<KvImport>(static_cast<int64_t>(blocks->size()), [blocks, self](int64_t first) {
        const std::shared_ptr<KvImport> to = self->lock();
        if (!to) return;
        for (size_t b = static_cast<size_t>(first); b < blocks->size(); ++b) to->add(std::move((*blocks)[b]));
        to->complete();
      });
      *self = kv_import;
    }
  } catch (...) {
    refusal = refusal_for_current_exception();
  }
  if (refusal.refused()) co_return co_await send(error_response(version, refusal, keep_alive));

  ServingCounters& counters = *state_.counters;
  if (state_.shutting_down || counters.in_engine.load() >= engine->max_seqs() + state_.config.max_queue) {
    HttpResponse response = error_response(version, 503, "the server is busy or shutting down; retry later",
                                           "server_error", keep_alive && !state_.shutting_down);
    response.set(http::field::retry_after, "1");
    co_return co_await send(std::move(response));
  }
  auto events = std::make_shared<EventStream>(stream_.get_executor());
  const EventCallback on_event = [events, counters = state_.counters](RequestEvent&& event) {
    const bool finished = event.finished;
    events->push(std::move(event));
    if (finished) --counters->in_engine;
  };
  ++counters.in_engine;
  uint64_t request_id = 0;
  std::string not_submitted;
  try {
    request_id =
        save ? engine->submit(prompt, params, on_event) : engine->submit_imported(prompt, params, on_event, kv_import);
  } catch (const InputError& e) {
    --counters.in_engine;
    not_submitted = e.what();
  }
  if (!not_submitted.empty())
    co_return co_await send(error_response(version, 400, not_submitted, "invalid_request_error", keep_alive));
  asio::steady_timer wake(stream_.get_executor());
  const ScopedWaiter waiter(*events, wake);
  RequestEvent final_event;
  std::vector<RequestEvent> batch;
  bool gone = false;
  for (bool finished = false; !finished;) {
    batch.clear();
    if (!events->pop_all(batch)) {
      wake.expires_after(kPeerPoll);
      co_await wake.async_wait(kNoThrow);
      if (!gone && co_await peer_left()) {
        gone = true;
        engine->cancel(request_id);
      }
      continue;
    }
    for (RequestEvent& event : batch)
      if (event.finished) {
        final_event = std::move(event);
        finished = true;
      }
  }
  if (gone) co_return false;
  const bool ran =
      save ? final_event.finish_reason == FinishReason::Length
           : final_event.finish_reason != FinishReason::Error && final_event.finish_reason != FinishReason::Cancelled;
  if (!ran) {
    const std::string why = fmt::format("{} of slot {} failed: {}", save ? "save" : "restore", id,
                                        final_event.error.empty() ? "the request was cancelled" : final_event.error);
    HttpResponse response =
        error_response(version, save ? 503 : 400, why, save ? "server_error" : "invalid_request_error", keep_alive);
    co_return co_await send(std::move(response));
  }
  if (!save) {
    state_.slots.remember(id, job.file.tokens);
    const nlohmann::json restored = {{"id_slot", id},
                                     {"filename", job.filename},
                                     {"n_restored", job.file.tokens.size()},
                                     {"n_read", job.bytes},
                                     {"timings", {{"restore_ms", ms_since(start)}}}};
    co_return co_await send(json_response(version, restored, keep_alive));
  }
  job.file.blocks = std::move(sink->blocks);
  // A front of worker processes (--workers) runs the request elsewhere: nothing comes back here.
  if (static_cast<int64_t>(job.file.blocks.size()) * block_size + 1 != static_cast<int64_t>(job.file.tokens.size())) {
    HttpResponse response = error_response(
        version, 400, fmt::format("slot {} cannot be saved: its KV blocks are not computed in this process", id),
        "invalid_request_error", keep_alive);
    co_return co_await send(std::move(response));
  }
  const FileJob written = co_await on_worker([&](const std::function<bool()>&) {
    FileJob result;
    try {
      result.bytes = write_slot_file(job.path, job.file);
    } catch (...) {
      result.refusal = refusal_for_current_exception();
    }
    return result;
  });
  if (written.refusal.abandoned) co_return co_await answer_abandoned(version);
  if (written.refusal.refused()) co_return co_await send(error_response(version, written.refusal, keep_alive));
  const nlohmann::json saved = {{"id_slot", id},
                                {"filename", job.filename},
                                {"n_saved", job.file.tokens.size()},
                                {"n_written", written.bytes},
                                {"timings", {{"save_ms", ms_since(start)}}}};
  co_return co_await send(json_response(version, saved, keep_alive));
}  // namespace tandem::server

}  // namespace tandem::server
