// HF gpt-oss MXFP4 -> BlockMXFP4. HF packs a block's 32 codes pairwise (byte i: elements 2i and
// 2i + 1); ggml packs them in halves (byte j: elements j and j + 16). The exponent byte means
// the same in both: HF's value is fp4 * 2^(s - 127) and BlockMXFP4's is (2 fp4) * 2^(e - 128),
// so e = s.
#include "model/hf_mxfp4.h"

#include <cstring>

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

}  // namespace tandem
