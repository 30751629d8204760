// ProfileSummary: a Profiler snapshot as the tables `--profile` prints. Per phase (prefill,
// decode): steps, tokens, step time and how much of it the ops cover; per op kind and per
// weight (role and type, summed over layers): calls, ms, share of the phase, GB/s, GFLOP/s
// and, given machine ceilings, the roofline bound — max(bytes / bandwidth, flops / peak) per
// op site, summed — and the share of it achieved; and the op site that loses most (largest
// time minus its bound). Arithmetic and text only; measuring is the profiler's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profile/machine_ceilings.h"
#include "profile/profiler.h"

namespace tandem {

struct SummaryRow {
  std::string name;
  int64_t calls = 0;
  int64_t ns = 0;
  int64_t bound_ns = 0;  // 0 without ceilings
  int64_t bytes = 0;
  int64_t flops = 0;

  double ms() const { return static_cast<double>(ns) / 1e6; }
  double gbps() const { return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0; }
  double gflops() const { return ns > 0 ? static_cast<double>(flops) / static_cast<double>(ns) : 0.0; }
  // bound / time: 1 is the roofline; 0 without ceilings.
  double of_bound() const { return ns > 0 ? static_cast<double>(bound_ns) / static_cast<double>(ns) : 0.0; }
};

struct PhaseSummary {
  Phase phase = Phase::Decode;
  PhaseTotals totals;
  SummaryRow all;                     // every op of the phase
  std::vector<SummaryRow> by_kind;    // kinds that ran, in pipeline order
  std::vector<SummaryRow> by_weight;  // matmuls by role and weight type ("ffn_down Q8_0"), over layers
  SummaryRow worst;                   // the site losing most: "blk.3.ffn_down Q8_0"
  SummaryRow worst_kind;              // the op kind losing most, all its sites together
};

struct ProfileSummary {
  std::vector<PhaseSummary> phases;  // the phases that ran, prefill first
  std::optional<MachineCeilings> ceilings;
};

// The roofline time of a site's totals: max(bytes / bandwidth, flops / its peak), in ns.
int64_t roofline_bound_ns(const SiteStats& site, const MachineCeilings& ceilings);
// "blk.3.ffn_down Q8_0", "output Q6_K", "attention" (the layer for per-layer roles).
std::string site_name(OpRole role, int32_t layer, const SiteStats& site);

ProfileSummary summarize(const Profiler::Snapshot& snapshot, const std::optional<MachineCeilings>& ceilings);
// Markdown tables, one block per phase, for stderr.
std::string format_summary(const ProfileSummary& summary);

}  // namespace tandem
