// HF gpt-oss MXFP4 -> BlockMXFP4. HF packs a block's 32 codes pairwise (byte i: elements 2i and
// 2i + 1); ggml packs them in halves (byte j: elements j and j + 16). The exponent byte means
// the same in both: HF's value is fp4 * 2^(s - 127) and BlockMXFP4's is (2 fp4) * 2^(e - 128),
// so e = s.
#include "model/hf_mxfp4.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "base/dtype.h"
#include "base/error.h"
#include "base/quant32.h"

namespace tandem {
namespace {

constexpr int64_t kHfBlockBytes = 16;
constexpr uint8_t kE8m0Nan = 0xff;

// Element k's 4-bit code in an HF block.
int hf_code(const uint8_t* block, int k) { return k % 2 == 0 ? block[k / 2] & 0x0f : block[k / 2] >> 4; }

}  // namespace

std::vector<uint8_t> repack_hf_mxfp4_rows(const HfMxfp4Tensor& tensor, int64_t expert, int64_t first, int64_t step,
                                          int64_t n_rows) {
  TANDEM_ASSERT(tensor.cols % kQ32BlockSize == 0 && expert >= 0 && expert < tensor.n_experts && first >= 0 &&
                step > 0 && (n_rows == 0 || first + step * (n_rows - 1) < tensor.rows));
  const int64_t blocks_per_row = tensor.cols / kQ32BlockSize;
  std::vector<uint8_t> out(static_cast<size_t>(n_rows * dtype_row_bytes(DType::MXFP4, tensor.cols)));
  auto* dst = reinterpret_cast<BlockMXFP4*>(out.data());  // 17-byte blocks: alignment 1
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t row = expert * tensor.rows + first + step * r;  // among all experts' rows
    for (int64_t b = 0; b < blocks_per_row; ++b, ++dst) {
      const int64_t block_index = row * blocks_per_row + b;
      const uint8_t scale = tensor.scales[block_index];
      TANDEM_CHECK_INPUT(scale != kE8m0Nan,
                         "tensor '{}_scales' holds 0xFF (E8M0 NaN) at expert {}, row {}, block {}: not a scale",
                         tensor.name, expert, first + step * r, b);
      const uint8_t* codes = tensor.blocks + block_index * kHfBlockBytes;
      dst->e = scale;
      for (int j = 0; j < 16; ++j)
        dst->nibbles[j] = static_cast<uint8_t>(hf_code(codes, j) | (hf_code(codes, j + 16) << 4));
    }
  }
  return out;
}

std::vector<std::vector<uint8_t>> repack_hf_mxfp4_experts(const HfMxfp4Tensor& tensor, int64_t first, int64_t step,
                                                          int64_t n_rows) {
  const auto n = static_cast<size_t>(tensor.n_experts);
  std::vector<std::vector<uint8_t>> experts(n);
  std::vector<std::exception_ptr> failures(n);
  std::atomic<size_t> next{0};
  auto repack_some = [&] {
    for (size_t e = next++; e < n; e = next++) {
      try {
        experts[e] = repack_hf_mxfp4_rows(tensor, static_cast<int64_t>(e), first, step, n_rows);
      } catch (...) {
        failures[e] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  const size_t n_workers = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  for (size_t i = 1; i < n_workers; ++i) workers.emplace_back(repack_some);
  repack_some();
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return experts;
}

}  // namespace tandem
