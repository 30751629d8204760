#include "dist/decode_worker.h"

#include <unistd.h>

#include <fmt/format.h>

#include "base/error.h"
#include "dist/disagg_wire.h"
#include "dist/worker_loop.h"
#include "dist/worker_report.h"

namespace tandem::dist {

using nlohmann::json;

DecodeWorker::DecodeWorker(Communicator& comm, Engine& engine, Profiler* profiler, int front_rank)
    : comm_(comm),
      engine_(engine),
      profiler_(profiler),
      front_rank_(front_rank),
      pump_(comm),
      transfer_trace_(profiler ? std::make_unique<KvTransferTrace>(*profiler) : nullptr) {}

void DecodeWorker::submit(const json& message) {
  const auto front_id = message.at("id").get<uint64_t>();
  auto prompt = message.at("prompt").get<std::vector<int32_t>>();
  const auto n_blocks = message.at("blocks").get<int64_t>();
  const int prefill_rank = message.at("prefill_rank").get<int>();
  {
    std::lock_guard lock(mutex_);
    entries_[front_id] = Entry{0, n_blocks > 0 ? prefill_rank : -1, nullptr, n_blocks == 0};
  }
  auto callback = [this, front_id](RequestEvent&& event) { this->on_event(front_id, std::move(event)); };
  try {
    GenerationParams params = params_from_json(message.at("params"));
    uint64_t engine_id = 0;
    if (n_blocks > 0) {
      std::vector<int32_t> head(prompt.begin(), prompt.begin() + n_blocks * engine_.config().block_size);
      // On the engine thread once it has looked in its prefix cache: ask the prefill rank for
      // the ones its prefix cache did not have (none: the import is complete at once).
      auto import = std::make_shared<KvImport>(n_blocks, [this, front_id, prefill_rank, head = std::move(head),
                                                          n_blocks](int64_t first_needed) mutable {
        if (first_needed >= n_blocks) {
          std::lock_guard lock(mutex_);
          if (const auto it = entries_.find(front_id); it != entries_.end() && it->second.import) {
            it->second.blocks_done = true;
            it->second.import->complete();
          }
          return;
        }
        {
          // The engine's import clock starts now too (kv_transfer_ms in the final event).
          std::lock_guard lock(mutex_);
          if (const auto it = entries_.find(front_id); it != entries_.end()) it->second.asked_ns = Profiler::now_ns();
        }
        pump_.post(
            prefill_rank, kPrefillJob,
            to_bytes(
                {{"id", front_id}, {"tokens", head}, {"first_block", first_needed}, {"decode_rank", comm_.rank()}}));
      });
      {
        std::lock_guard lock(mutex_);
        entries_[front_id].import = import;
      }
      engine_id = engine_.submit_imported(std::move(prompt), std::move(params), callback, import);
    } else {
      engine_id = engine_.submit(std::move(prompt), std::move(params), callback);
    }
    std::lock_guard lock(mutex_);
    if (const auto it = entries_.find(front_id); it != entries_.end()) it->second.engine_id = engine_id;
  } catch (const std::exception& error) {  // a request the engine refuses: its one final event says why
    {
      std::lock_guard lock(mutex_);
      entries_.erase(front_id);
    }
    RequestEvent event;
    event.request_id = front_id;
    event.finished = true;
    event.finish_reason = FinishReason::Error;
    event.error = error.what();
    pump_.post(front_rank_, kEvent, to_bytes(event_to_json(event)));
  }
}

void DecodeWorker::on_event(uint64_t front_id, RequestEvent&& event) {
  event.request_id = front_id;
  if (event.finished) {
    int cancel_at = -1;
    Entry ended;
    {
      std::lock_guard lock(mutex_);
      if (const auto it = entries_.find(front_id); it != entries_.end()) {
        // Ended before its blocks all came (cancelled, or failed): the prefill rank may stop.
        if (it->second.prefill_rank >= 0 && !it->second.blocks_done) cancel_at = it->second.prefill_rank;
        ended = std::move(it->second);
        entries_.erase(it);
      }
    }
    if (cancel_at >= 0) pump_.post(cancel_at, kCancel, to_bytes({{"id", front_id}}));
    if (transfer_trace_ && ended.asked_ns > 0) {
      // Applied kv_transfer_ms after it was asked for; 0: it ended without them.
      const bool complete = event.kv_transfer_ms > 0.0;
      const int64_t applied_ns =
          complete ? ended.asked_ns + static_cast<int64_t>(event.kv_transfer_ms * 1e6) : Profiler::now_ns();
      transfer_trace_->imported(ended.prefill_rank, front_id, event.kv_transfer_bytes, ended.asked_ns, applied_ns,
                                complete);
    }
    kv_bytes_received_ += event.kv_transfer_bytes;
    kv_transfer_us_ += static_cast<int64_t>(event.kv_transfer_ms * 1000.0);
    ++requests_done_;
  }
  pump_.post(front_rank_, kEvent, to_bytes(event_to_json(event)));
}

void DecodeWorker::on_message(const MessageInfo& info, std::vector<uint8_t>& bytes) {
  if (info.tag == kKvBlock) {
    const uint64_t front_id = kv_block_frame_id(bytes);
    const std::span<const uint8_t> block = kv_block_frame_message(bytes);
    std::lock_guard lock(mutex_);
    if (const auto it = entries_.find(front_id); it != entries_.end() && it->second.import)
      it->second.import->add(std::vector<uint8_t>(block.begin(), block.end()));
    return;
  }
  const json message = from_bytes(bytes);
  switch (info.tag) {
    case kSubmit: submit(message); break;
    case kPrefillDone: {
      std::lock_guard lock(mutex_);
      const auto it = entries_.find(message.at("id").get<uint64_t>());
      if (it == entries_.end() || !it->second.import) break;
      it->second.blocks_done = true;
      const std::string error = message.at("error").get<std::string>();
      if (error.empty()) {
        it->second.import->complete();
      } else {
        it->second.import->fail(fmt::format("prefill rank {}: {}", info.source, error));
      }
      break;
    }
    case kCancel: {
      uint64_t engine_id = 0;
      {
        std::lock_guard lock(mutex_);
        const auto it = entries_.find(message.at("id").get<uint64_t>());
        if (it != entries_.end()) engine_id = it->second.engine_id;
      }
      if (engine_id != 0) engine_.cancel(engine_id);
      break;
    }
    case kCancelWaiting: engine_.cancel_waiting(); break;
    case kWorkerDown: {
      const int rank = message.at("rank").get<int>();
      pump_.forget_rank(rank);
      std::lock_guard lock(mutex_);
      for (auto& [id, entry] : entries_)
        if (entry.prefill_rank == rank && !entry.blocks_done && entry.import) {
          entry.blocks_done = true;
          entry.import->fail(
              fmt::format("prefill rank {} is down ({})", rank, message.at("reason").get<std::string>()));
        }
      break;
    }
    case kStop: stopping_ = true; break;
    default: break;
  }
}

void DecodeWorker::send_report() {
  WorkerReport report;
  report.pid = ::getpid();
  report.engine = engine_.stats();
  report.kv_bytes_received = kv_bytes_received_.load();
  report.kv_wait_seconds = static_cast<double>(kv_transfer_us_.load()) / 1e6;
  report.requests_done = requests_done_.load();
  pump_.post(front_rank_, kReport, to_bytes(report_to_json(report)));
}

bool DecodeWorker::run() {
  return run_worker_loop(
      pump_, engine_, comm_.rank(), front_rank_,
      {"decode", [this](const MessageInfo& info, std::vector<uint8_t>& bytes) { on_message(info, bytes); },
       [this] { send_report(); }, [this] { return stopping_; }, profiler_});
}

}  // namespace tandem::dist
