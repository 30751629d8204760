// Measuring and caching the roofline ceilings (see machine_ceilings.h). The compute peaks are
// this level's own GEMMs on operands that stay in cache, not the ISA's paper peak: a kernel
// level without 8-bit dot products has a lower ceiling, and the summary should say how far an
// op is from what this build can do on this machine.
#include "profile/machine_ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quant.h"
#include "base/tensor_view.h"
#include "kernels/instruction_peak.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Integer sums vectorize without reassociation concerns, and four accumulators keep the adds
// off the critical path, so the loop is bound by memory (bench/bandwidth.cpp's loop).
uint64_t sum_range(const uint64_t* data, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  for (; i < n; ++i) a += data[i];
  return a + b + c + d;
}

// The bandwidth test's sums end here, where the compiler cannot see them unused and drop them.
volatile uint64_t checksum_sink = 0;

std::string entry_key(std::string_view isa, int threads) { return std::string(isa) + "-t" + std::to_string(threads); }

}  // namespace

std::string cpu_model_name() {
  // The first processor's fields; a virtual machine may name its CPU only "AMD EPYC", so the
  // family and model numbers come along.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value_of = [&](std::string_view key, std::string& out) {
    if (!out.empty() || line.rfind(key, 0) != 0) return;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) return;
    out = line.substr(colon + 1);
    out.erase(0, out.find_first_not_of(" \t"));
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  };
  while (std::getline(cpuinfo, line) && !line.empty()) {
    value_of("model name", name);
    value_of("cpu family", family);
    value_of("model", model);
  }
  if (name.empty()) name = "unknown cpu";
  if (!family.empty() && !model.empty()) name += " (family " + family + " model " + model + ")";
  return name;
}

std::string default_ceilings_path() {
  std::filesystem::path dir;
  if (const char* cache = std::getenv("TANDEM_CACHE_DIR"); cache != nullptr && *cache != '\0') {
    dir = cache;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    dir = std::filesystem::path(xdg) / "tandem";
  } else {
    const char* home = std::getenv("HOME");
    dir = std::filesystem::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".cache" / "tandem";
  }
  std::string slug;
  for (const char ch : cpu_model_name()) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (alnum)
      slug += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return (dir / ("machine-" + (slug.empty() ? std::string("unknown") : slug) + ".json")).string();
}

double measure_read_bandwidth(ThreadPool& pool, int64_t mib, int passes) {
  TANDEM_CHECK_INPUT(mib >= 1 && passes >= 1, "bandwidth test needs at least 1 MiB and 1 pass");
  const auto n = static_cast<size_t>(mib * 1024 * 1024 / static_cast<int64_t>(sizeof(uint64_t)));
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[n]);
  // Written in parallel first: every page faulted in (no pass times page faults), each on
  // the node of the thread that will read it.
  const int parts = pool.size();
  pool.parallel_for(parts, [&](int64_t begin, int64_t end, int) {
    for (int64_t part = begin; part < end; ++part)
      for (size_t i = n * part / parts; i < n * (part + 1) / parts; ++i) buffer[i] = i;
  });
  std::vector<uint64_t> partial(static_cast<size_t>(parts) * 8);  // 64 bytes apart: no false sharing
  double best = 0.0;
  uint64_t checksum = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const Clock::time_point start = Clock::now();
    pool.parallel_for(parts, [&](int64_t begin, int64_t end, int) {
      for (int64_t part = begin; part < end; ++part) {
        const size_t first = n * part / parts, last = n * (part + 1) / parts;
        partial[static_cast<size_t>(part) * 8] = sum_range(buffer.get() + first, last - first);
      }
    });
    const double seconds = seconds_since(start);
    for (int part = 0; part < parts; ++part) checksum += partial[static_cast<size_t>(part) * 8];
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds / 1e9);
  }
  checksum_sink = checksum;
  return best;
}

double measure_gemm_peak(ThreadPool& pool, DType type, int repetitions) {
  // A few MiB of weights (most of them in L2/L3 across the threads), 64 tokens: 64
  // multiply-adds per weight element loaded, far above any machine's compute/bandwidth ratio.
  const int64_t n_out = type == DType::F32 ? 512 : 1024, n_in = 2048, n_tokens = 64;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n_in));
  const int64_t row_bytes = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_out * row_bytes));
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& v : row) v = uniform(rng);
    quantize_row(type, row.data(), bytes.data() + r * row_bytes, n_in);
  }
  TensorView weight = make_view(bytes.data(), type, {n_out, n_in});
  const std::vector<uint8_t> packed = pack_for_level(kernel_table(), weight);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in)), out(static_cast<size_t>(n_tokens * n_out));
  for (float& v : x) v = uniform(rng);
  MatmulScratch scratch;
  matmul(weight, x.data(), n_tokens, out.data(), pool, scratch);  // warm-up: caches, scratch
  double best = 0.0;
  for (int rep = 0; rep < repetitions; ++rep) {
    constexpr int kCallsPerRep = 4;
    const Clock::time_point start = Clock::now();
    for (int call = 0; call < kCallsPerRep; ++call) matmul(weight, x.data(), n_tokens, out.data(), pool, scratch);
    const double seconds = seconds_since(start);
    best = std::max(best, kCallsPerRep * 2.0 * static_cast<double>(n_out * n_in * n_tokens) / seconds / 1e9);
  }
  return best;
}

namespace {

InstructionLoop run_loop(InstructionLoopKind kind, Isa isa, int64_t iterations) {
  switch (kind) {
    case InstructionLoopKind::FmaF32: return fma_f32_loop(isa, iterations);
    case InstructionLoopKind::DotBf16: return dot_bf16_loop(isa, iterations);
    case InstructionLoopKind::TileBf16: return tile_bf16_loop(isa, iterations);
    case InstructionLoopKind::DotI8: return dot_i8_loop(isa, iterations);
  }
  return {};
}

}  // namespace

double measure_instruction_peak(ThreadPool& pool, InstructionLoopKind kind, int repetitions) {
  const Isa isa = kernel_table().isa;
  // Many short loops claimed by the pool's threads (a thread the OS delays takes fewer, as in
  // the kernels), 2^16 rounds of 12 instructions each: milliseconds per repetition in all.
  constexpr int64_t kIterations = int64_t{1} << 16;
  const int64_t n_loops = int64_t{16} * pool.size();
  std::vector<InstructionLoop> loops(static_cast<size_t>(n_loops));
  double best = 0.0;
  for (int rep = 0; rep < repetitions; ++rep) {
    const Clock::time_point start = Clock::now();
    pool.parallel_for(n_loops, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) loops[static_cast<size_t>(i)] = run_loop(kind, isa, kIterations);
    });
    const double seconds = seconds_since(start);
    int64_t flops = 0;
    for (const InstructionLoop& loop : loops) flops += loop.flops;
    if (flops == 0) return 0.0;
    best = std::max(best, static_cast<double>(flops) / seconds / 1e9);
  }
  return best;
}

MachineCeilings measure_ceilings(ThreadPool& pool, int64_t bandwidth_mib) {
  MachineCeilings ceilings;
  ceilings.cpu = cpu_model_name();
  ceilings.isa = std::string(isa_name(kernel_table().isa));
  ceilings.threads = pool.size();
  ceilings.read_gbps = measure_read_bandwidth(pool, bandwidth_mib, 5);
  ceilings.int8_gops = measure_gemm_peak(pool, DType::Q8_0);
  ceilings.f32_gflops = measure_gemm_peak(pool, DType::F32);
  ceilings.fma_gflops = measure_instruction_peak(pool, InstructionLoopKind::FmaF32);
  ceilings.bf16_gflops = measure_instruction_peak(pool, InstructionLoopKind::DotBf16);
  ceilings.tile_bf16_gflops = measure_instruction_peak(pool, InstructionLoopKind::TileBf16);
  ceilings.dot_i8_gops = measure_instruction_peak(pool, InstructionLoopKind::DotI8);
  return ceilings;
}

void save_ceilings(const std::string& path, const MachineCeilings& ceilings) {
  nlohmann::json file = nlohmann::json::object();
  {
    std::ifstream in(path);
    if (in) {
      try {
        file = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception&) {
        file = nlohmann::json::object();  // an unreadable cache is rewritten, not an error
      }
    }
  }
  if (!file.is_object() || file.value("cpu", std::string()) != ceilings.cpu) file = nlohmann::json::object();
  file["cpu"] = ceilings.cpu;
  if (!file.contains("entries") || !file["entries"].is_object()) file["entries"] = nlohmann::json::object();
  file["entries"][entry_key(ceilings.isa, ceilings.threads)] = {{"isa", ceilings.isa},
                                                                {"threads", ceilings.threads},
                                                                {"read_gbps", ceilings.read_gbps},
                                                                {"int8_gops", ceilings.int8_gops},
                                                                {"f32_gflops", ceilings.f32_gflops},
                                                                {"fma_gflops", ceilings.fma_gflops},
                                                                {"bf16_gflops", ceilings.bf16_gflops},
                                                                {"tile_bf16_gflops", ceilings.tile_bf16_gflops},
                                                                {"dot_i8_gops", ceilings.dot_i8_gops}};
  std::error_code error;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  std::ofstream out(path, std::ios::trunc);
  TANDEM_CHECK_INPUT(static_cast<bool>(out), "cannot write the machine ceilings to {}", path);
  out << file.dump(2) << "\n";
  TANDEM_CHECK_INPUT(static_cast<bool>(out), "cannot write the machine ceilings to {}", path);
}

std::optional<MachineCeilings> load_ceilings(const std::string& path, std::string_view isa, int threads) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json file = nlohmann::json::parse(in);
    const std::string cpu = file.at("cpu").get<std::string>();
    if (cpu != cpu_model_name()) return std::nullopt;  // a copied file from another machine
    const nlohmann::json& entry = file.at("entries").at(entry_key(isa, threads));
    MachineCeilings ceilings;
    ceilings.cpu = cpu;
    ceilings.isa = std::string(isa);
    ceilings.threads = threads;
    ceilings.read_gbps = entry.at("read_gbps").get<double>();
    ceilings.int8_gops = entry.at("int8_gops").get<double>();
    ceilings.f32_gflops = entry.at("f32_gflops").get<double>();
    // Entries cached before the instruction ceilings have none: unknown, not an error.
    ceilings.fma_gflops = std::max(0.0, entry.value("fma_gflops", 0.0));
    ceilings.bf16_gflops = std::max(0.0, entry.value("bf16_gflops", 0.0));
    ceilings.tile_bf16_gflops = std::max(0.0, entry.value("tile_bf16_gflops", 0.0));
    ceilings.dot_i8_gops = std::max(0.0, entry.value("dot_i8_gops", 0.0));
    if (ceilings.read_gbps <= 0 || ceilings.int8_gops <= 0 || ceilings.f32_gflops <= 0) return std::nullopt;
    return ceilings;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace tandem
