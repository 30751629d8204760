// Summaries of a profile (see profile_summary.h): sites are folded into rows by kind and by
// weight; each site's bound is computed on its own totals before folding, so a row's bound
// is the sum of its sites' bounds (a phase is bound by the slowest resource op by op, not on
// average).
#include "profile/profile_summary.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tandem {
namespace {

void add_to(SummaryRow& row, const SiteStats& site, int64_t bound_ns) {
  row.calls += site.calls;
  row.ns += site.ns;
  row.bound_ns += bound_ns;
  row.bytes += site.bytes;
  row.flops += site.flops;
}

std::string format_row(const SummaryRow& row, int64_t phase_ns, bool roofline) {
  const double share = phase_ns > 0 ? 100.0 * static_cast<double>(row.ns) / static_cast<double>(phase_ns) : 0.0;
  std::string text = fmt::format("| {:<26} | {:>7} | {:>10.3f} | {:>6.1f} | {:>8.2f} | {:>9.2f} |", row.name, row.calls,
                                 row.ms(), share, row.gbps(), row.gflops());
  if (roofline)
    text += fmt::format(" {:>10.3f} | {:>6.1f} |", static_cast<double>(row.bound_ns) / 1e6, 100.0 * row.of_bound());
  return text + "\n";
}

std::string gflops_or_unknown(double gflops) {
  return gflops > 0 ? fmt::format("{:.1f} GFLOP/s", gflops) : std::string("not measured");
}

std::string table_header(std::string_view first, bool roofline) {
  std::string text = fmt::format("| {:<26} | {:>7} | {:>10} | {:>6} | {:>8} | {:>9} |", first, "calls", "ms", "% time",
                                 "GB/s", "GFLOP/s");
  std::string rule =
      fmt::format("| {:-<26} | {:->6}: | {:->9}: | {:->5}: | {:->7}: | {:->8}: |", "", "", "", "", "", "");
  if (roofline) {
    text += fmt::format(" {:>10} | {:>6} |", "bound ms", "% bound");
    rule += fmt::format(" {:->9}: | {:->5}: |", "", "");
  }
  text += '\n';
  text += rule;
  text += '\n';
  return text;
}

}  // namespace

namespace {

double compute_bound_ns(const SiteStats& site, const MachineCeilings& ceilings) {
  // flops / (GFLOP/s) is ns. An instruction ceiling the cache lacks (an entry from before
  // them, a level without the instruction) falls back to the next one below it.
  const double fma = ceilings.fma_gflops > 0 ? ceilings.fma_gflops : ceilings.f32_gflops;
  const double bf16 = ceilings.bf16_gflops > 0 ? ceilings.bf16_gflops : fma;
  const double tile_bf16 = ceilings.tile_bf16_gflops > 0 ? ceilings.tile_bf16_gflops : bf16;
  const auto flops = static_cast<double>(site.flops);
  const auto over = [](double work, double peak) { return peak > 0 ? work / peak : 0.0; };
  switch (site.peak) {
    case Peak::Int8: return over(flops, ceilings.int8_gops);
    case Peak::FmaF32: return over(flops, fma);
    case Peak::Bf16: return over(flops, bf16);
    case Peak::Bf16Values: return over(flops / 2, fma) + over(flops / 2, bf16);
    case Peak::TileBf16: return over(flops, tile_bf16);
    case Peak::F32: break;
  }
  return over(flops, ceilings.f32_gflops);
}

}  // namespace

int64_t roofline_bound_ns(const SiteStats& site, const MachineCeilings& ceilings) {
  // bytes / (GB/s) is ns.
  const double memory_ns = ceilings.read_gbps > 0 ? static_cast<double>(site.bytes) / ceilings.read_gbps : 0.0;
  const double compute_ns = compute_bound_ns(site, ceilings);
  return static_cast<int64_t>(std::llround(std::max(memory_ns, compute_ns)));
}

std::string site_name(OpRole role, int32_t layer, const SiteStats& site) {
  std::string name = layer >= 0 && is_layer_role(role) ? fmt::format("blk.{}.{}", layer, op_role_name(role))
                                                       : std::string(op_role_name(role));
  if (site.has_weight) name += fmt::format(" {}", dtype_name(site.weight_type));
  return name;
}

ProfileSummary summarize(const Profiler::Snapshot& snapshot, const std::optional<MachineCeilings>& ceilings) {
  ProfileSummary summary;
  summary.ceilings = ceilings;
  for (int p = 0; p < kPhases; ++p) {
    const PhaseTotals& totals = snapshot.phases[static_cast<size_t>(p)];
    if (totals.steps == 0) continue;
    PhaseSummary phase;
    phase.phase = static_cast<Phase>(p);
    phase.totals = totals;
    phase.all.name = "all ops";
    std::vector<SummaryRow> kinds(kOpKinds);
    for (int k = 0; k < kOpKinds; ++k) kinds[static_cast<size_t>(k)].name = op_kind_name(static_cast<OpKind>(k));
    int64_t worst_loss = -1;
    const std::vector<SiteStats>& sites = snapshot.sites[static_cast<size_t>(p)];
    for (size_t index = 0; index < sites.size(); ++index) {
      const SiteStats& site = sites[index];
      if (site.calls == 0) continue;
      const auto role = static_cast<OpRole>(index % kOpRoles);
      const auto layer = static_cast<int32_t>(static_cast<int64_t>(index) / kOpRoles - 1);
      const int64_t bound = ceilings ? roofline_bound_ns(site, *ceilings) : 0;
      add_to(phase.all, site, bound);
      add_to(kinds[static_cast<size_t>(op_kind(role))], site, bound);
      if (site.has_weight) {
        const std::string name = site_name(role, -1, site);
        auto row = std::find_if(phase.by_weight.begin(), phase.by_weight.end(),
                                [&](const SummaryRow& r) { return r.name == name; });
        if (row == phase.by_weight.end()) {
          phase.by_weight.push_back(SummaryRow{name});
          row = phase.by_weight.end() - 1;
        }
        add_to(*row, site, bound);
      }
      // Without ceilings every bound is 0, and the loss is the time itself.
      if (site.ns - bound > worst_loss) {
        worst_loss = site.ns - bound;
        phase.worst = SummaryRow{site_name(role, layer, site)};
        add_to(phase.worst, site, bound);
      }
    }
    for (SummaryRow& row : kinds)
      if (row.calls > 0) phase.by_kind.push_back(std::move(row));
    for (const SummaryRow& row : phase.by_kind)
      if (phase.worst_kind.calls == 0 || row.ns - row.bound_ns > phase.worst_kind.ns - phase.worst_kind.bound_ns)
        phase.worst_kind = row;
    std::sort(phase.by_weight.begin(), phase.by_weight.end(),
              [](const SummaryRow& a, const SummaryRow& b) { return a.ns > b.ns; });
    summary.phases.push_back(std::move(phase));
  }
  return summary;
}

std::string format_summary(const ProfileSummary& summary) {
  const bool roofline = summary.ceilings.has_value();
  std::string text = "\nprofile (op times are wall clock on the stepping thread; bytes and FLOPs from shapes)\n";
  if (roofline) {
    const MachineCeilings& c = *summary.ceilings;
    text +=
        fmt::format("ceilings: {}, {} kernels, {} threads: read {:.1f} GB/s, int8 {:.1f} GOP/s, f32 {:.1f} GFLOP/s"
                    "; instructions: f32 FMA {}, bf16 dot {}, bf16 tiles {}, int8 dot {}\n",
                    c.cpu, c.isa, c.threads, c.read_gbps, c.int8_gops, c.f32_gflops, gflops_or_unknown(c.fma_gflops),
                    gflops_or_unknown(c.bf16_gflops), gflops_or_unknown(c.tile_bf16_gflops),
                    c.dot_i8_gops > 0 ? fmt::format("{:.1f} GOP/s", c.dot_i8_gops) : std::string("not measured"));
    text += "(the bound takes every byte from memory: ops on data that stays in cache can pass 100 % of it)\n";
  } else {
    text += "no machine ceilings cached for this kernel level and thread count: run `tandem bench --machine -t N` "
            "for the roofline columns\n";
  }
  if (summary.phases.empty()) text += "no steps were profiled\n";
  for (const PhaseSummary& phase : summary.phases) {
    const PhaseTotals& t = phase.totals;
    const double step_ms = static_cast<double>(t.step_ns) / 1e6;
    const double covered = t.step_ns > 0 ? 100.0 * static_cast<double>(t.op_ns) / static_cast<double>(t.step_ns) : 0.0;
    text += fmt::format("\n{}: {} steps, {} tokens, {:.3f} ms in steps ({:.3f} ms/step), ops cover {:.1f} %\n",
                        phase_name(phase.phase), t.steps, t.tokens, step_ms, step_ms / static_cast<double>(t.steps),
                        covered);
    if (roofline)
      text += fmt::format("roofline: bound {:.3f} ms, achieved {:.1f} % of it (bound / op time)\n",
                          static_cast<double>(phase.all.bound_ns) / 1e6, 100.0 * phase.all.of_bound());
    if (roofline)
      text += fmt::format("loses most: {} ({:.3f} ms over its {:.3f} ms bound); of the op kinds, {} ({:.3f} ms over "
                          "{:.3f} ms)\n\n",
                          phase.worst.name, static_cast<double>(phase.worst.ns - phase.worst.bound_ns) / 1e6,
                          static_cast<double>(phase.worst.bound_ns) / 1e6, phase.worst_kind.name,
                          static_cast<double>(phase.worst_kind.ns - phase.worst_kind.bound_ns) / 1e6,
                          static_cast<double>(phase.worst_kind.bound_ns) / 1e6);
    else
      text += fmt::format("slowest op: {} ({:.3f} ms)\n\n", phase.worst.name, phase.worst.ms());
    text += table_header("op kind", roofline);
    for (const SummaryRow& row : phase.by_kind) text += format_row(row, t.op_ns, roofline);
    text += format_row(phase.all, t.op_ns, roofline);
    text += '\n';
    text += table_header("weight (all layers)", roofline);
    for (const SummaryRow& row : phase.by_weight) text += format_row(row, t.op_ns, roofline);
  }
  return text;
}

}  // namespace tandem
