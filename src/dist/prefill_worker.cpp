#include "dist/prefill_worker.h"

#include <unistd.h>

#include "dist/disagg_wire.h"
#include "dist/worker_loop.h"
#include "dist/worker_report.h"
#include "kv/kv_block_message.h"

namespace tandem::dist {

using nlohmann::json;

class PrefillWorker::BlockSender final : public KvBlockSink {
 public:
  BlockSender(PrefillWorker& worker, uint64_t front_id, int decode_rank)
      : worker_(worker), front_id_(front_id), decode_rank_(decode_rank) {}

  void block_computed(const KvCache& cache, int32_t physical_block, int64_t block_index, uint64_t parent_hash,
                      std::span<const int32_t> tokens) override {
    pack_kv_block(cache, physical_block, block_index, parent_hash, tokens, packed_);
    std::vector<uint8_t> frame = kv_block_frame(front_id_, packed_);
    worker_.kv_bytes_sent_ += static_cast<int64_t>(packed_.size());
    worker_.pump_.post(decode_rank_, kKvBlock, std::move(frame));
  }

 private:
  PrefillWorker& worker_;
  const uint64_t front_id_;
  const int decode_rank_;
  std::vector<uint8_t> packed_;  // reused: the frame copies it
};

PrefillWorker::PrefillWorker(Communicator& comm, Engine& engine, Profiler* profiler, int front_rank)
    : comm_(comm), engine_(engine), profiler_(profiler), front_rank_(front_rank), pump_(comm) {
  if (profiler_ == nullptr) return;
  transfer_trace_ = std::make_unique<KvTransferTrace>(*profiler_);
  pump_.set_send_observer([this](const MessagePump::CompletedSend& send) {
    if (send.tag != kKvBlock) return;
    const auto ns = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    // The block message's bytes, as kv_bytes_sent counts them (the frame adds the id).
    const std::span<const uint8_t> block = kv_block_frame_message(send.bytes);
    transfer_trace_->block_sent(send.destination, kv_block_frame_id(send.bytes), static_cast<int64_t>(block.size()),
                                ns(send.posted), ns(send.completed));
  });
}

void PrefillWorker::start_job(int decode_rank, const json& message) {
  const auto front_id = message.at("id").get<uint64_t>();
  GenerationParams params;
  params.max_tokens = 1;
  params.sampling.temperature = 0.0f;
  params.kv_export = std::make_shared<BlockSender>(*this, front_id, decode_rank);
  params.kv_export_first_block = message.at("first_block").get<int64_t>();
  {
    std::lock_guard lock(mutex_);
    jobs_[front_id] = Job{0, decode_rank};
  }
  // The final event says the job is over: every block was posted before it (export runs
  // before the request ends), and MPI keeps one sender's messages to one receiver in order.
  auto on_event = [this, front_id, decode_rank](RequestEvent&& event) {
    if (!event.finished) return;
    {
      std::lock_guard lock(mutex_);
      jobs_.erase(front_id);
    }
    ++requests_done_;
    const bool ok = event.finish_reason == FinishReason::Length;
    const std::string error = ok ? "" : event.error.empty() ? finish_reason_name(event.finish_reason) : event.error;
    pump_.post(decode_rank, kPrefillDone, to_bytes({{"id", front_id}, {"error", error}}));
  };
  try {
    const uint64_t engine_id =
        engine_.submit(message.at("tokens").get<std::vector<int32_t>>(), std::move(params), std::move(on_event));
    std::lock_guard lock(mutex_);
    if (const auto it = jobs_.find(front_id); it != jobs_.end()) it->second.engine_id = engine_id;
  } catch (const std::exception& error) {
    {
      std::lock_guard lock(mutex_);
      jobs_.erase(front_id);
    }
    pump_.post(decode_rank, kPrefillDone, to_bytes({{"id", front_id}, {"error", std::string(error.what())}}));
  }
}

void PrefillWorker::on_message(const MessageInfo& info, std::vector<uint8_t>& bytes) {
  const json message = from_bytes(bytes);
  switch (info.tag) {
    case kPrefillJob: start_job(info.source, message); break;
    case kCancel: {
      uint64_t engine_id = 0;
      {
        std::lock_guard lock(mutex_);
        const auto it = jobs_.find(message.at("id").get<uint64_t>());
        if (it != jobs_.end()) engine_id = it->second.engine_id;
      }
      if (engine_id != 0) engine_.cancel(engine_id);
      break;
    }
    case kWorkerDown: {
      const int rank = message.at("rank").get<int>();
      pump_.forget_rank(rank);
      std::lock_guard lock(mutex_);
      for (const auto& [id, job] : jobs_)
        if (job.decode_rank == rank && job.engine_id != 0) engine_.cancel(job.engine_id);
      break;
    }
    case kStop: stopping_ = true; break;
    default: break;
  }
}

void PrefillWorker::send_report() {
  WorkerReport report;
  report.pid = ::getpid();
  report.engine = engine_.stats();
  report.kv_bytes_sent = kv_bytes_sent_.load();
  report.kv_send_seconds = pump_.seconds_in_flight(kKvBlock);
  report.requests_done = requests_done_.load();
  pump_.post(front_rank_, kReport, to_bytes(report_to_json(report)));
}

bool PrefillWorker::run() {
  return run_worker_loop(
      pump_, engine_, comm_.rank(), front_rank_,
      {"prefill", [this](const MessageInfo& info, std::vector<uint8_t>& bytes) { on_message(info, bytes); },
       [this] { send_report(); }, [this] { return stopping_; }, profiler_});
}

}  // namespace tandem::dist
