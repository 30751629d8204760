#include "server/stage_metrics.h"

#include <fmt/format.h>

namespace tandem::server {

std::string render_stage_metrics(const std::vector<StageStatus>& stages) {
  if (stages.empty()) return {};
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const StageStatus& s : stages)
      out += fmt::format("{}{{stage=\"{}\",rank=\"{}\"}} {}\n", name, s.stage, s.rank, value(s));
  };
  family("tandem_stage_layers", "gauge", "The model's layers the pipeline stage holds",
         [](const StageStatus& s) { return s.layer_end - s.layer_first; });
  family("tandem_stage_weight_bytes", "gauge", "Weight bytes the stage holds",
         [](const StageStatus& s) { return s.weight_bytes; });
  family("tandem_stage_kv_bytes", "gauge", "Bytes of the stage's KV cache (its layers)",
         [](const StageStatus& s) { return s.kv_bytes; });
  family("tandem_stage_micro_batches_total", "counter", "Micro-batches the stage ran",
         [](const StageStatus& s) { return s.micro_batches; });
  family("tandem_stage_tokens_total", "counter", "Tokens in the micro-batches the stage ran",
         [](const StageStatus& s) { return s.tokens; });
  family("tandem_stage_compute_seconds_total", "counter", "The stage's layers at work on its micro-batches",
         [](const StageStatus& s) { return s.compute_seconds; });
  family("tandem_stage_queue_seconds_total", "counter",
         "Summed over micro-batches: handed on (stage 0: cut at the step's start) to taken in by the stage, the "
         "transfer included; its rate is the mean number of micro-batches queued at the stage",
         [](const StageStatus& s) { return s.queue_seconds; });
  family("tandem_stage_received_bytes_total", "counter",
         "Activation bytes from the stage before (stage 0: logits rows from the last stage)",
         [](const StageStatus& s) { return s.received_bytes; });
  return out;
}

std::string render_tensor_parallel_metrics(const std::vector<TensorRankStatus>& ranks) {
  if (ranks.empty()) return {};
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const TensorRankStatus& r : ranks) out += fmt::format("{}{{rank=\"{}\"}} {}\n", name, r.rank, value(r));
  };
  family("tandem_tensor_parallel_weight_bytes", "gauge", "Weight bytes the tensor-parallel rank holds (its slices)",
         [](const TensorRankStatus& r) { return r.weight_bytes; });
  family("tandem_tensor_parallel_kv_bytes", "gauge", "Bytes of the rank's KV cache (its KV heads)",
         [](const TensorRankStatus& r) { return r.kv_bytes; });
  family("tandem_tensor_parallel_all_reduces_total", "counter",
         "All-reduces of row-parallel outputs the rank took part in (two a layer a step)",
         [](const TensorRankStatus& r) { return r.all_reduces; });
  family("tandem_tensor_parallel_all_reduce_seconds_total", "counter",
         "The rank's time in all-reduces, waiting for the other ranks included",
         [](const TensorRankStatus& r) { return r.all_reduce_seconds; });
  family("tandem_tensor_parallel_all_reduce_sent_bytes_total", "counter",
         "Bytes the rank sent in all-reduces (headers included)",
         [](const TensorRankStatus& r) { return r.all_reduce_bytes_sent; });
  return out;
}

}  // namespace tandem::server
