// Timings' per-token statistics (TPOT mean and percentiles over the inter-token gaps) and the
// finish reasons' names, as tandem run and the C API print them.
#include <algorithm>

#include "tandem/tandem.h"

namespace tandem::api {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfSequence: return "end of sequence";
    case FinishReason::StopString: return "stop string";
    case FinishReason::Length: return "token limit";
    case FinishReason::ContextLimit: return "context limit";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "none";
}

double Timings::tpot_mean_ms() const { return itl_ms.empty() ? 0.0 : decode_ms / static_cast<double>(itl_ms.size()); }

double Timings::tpot_percentile_ms(double fraction) const {
  if (itl_ms.empty()) return 0.0;
  std::vector<double> sorted = itl_ms;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank, rounding the fractional index to the closer neighbour.
  const auto index = static_cast<size_t>(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

}  // namespace tandem::api
