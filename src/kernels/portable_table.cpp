// The scalar level's table (declared in kernels/portable_kernels.h), and its GEMMs built from the row dot
// products in dot.cpp: every (row, token) one call, the reference arithmetic of every level.
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"
#include "kernels/elementwise.h"
#include "kernels/geglu.h"
#include "kernels/portable_kernels.h"
#include "kernels/swiglu_oai.h"

namespace tandem::portable {
namespace {

void gemm_q8k(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
              int64_t n_tokens, float* out, int64_t out_stride) {
  gemm_q8k_rows(kquant_row_dot(weight.dtype), weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

}  // namespace

void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_float_activations(weight.dtype, weight.row(r), x + t * n_in, n_in);
}

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_q8_activations(weight.dtype, weight.row(r), x + t * (n_in / 32), n_in);
}

const KernelTable& level_table() {
  static const KernelTable table{.isa = Isa::Scalar,
                                 .gemm_float = gemm_float,
                                 .gemm_q8 = gemm_q8,
                                 .gemm_q8k = gemm_q8k,
                                 .kquant_row_dot = kquant_row_dot,
                                 .quantize_q8 = quantize_q8,
                                 .quantize_q8k = quantize_q8k,
                                 .attention = attention_group,
                                 .attention_tokens = attention_tokens,
                                 .convert_kv_rows = convert_kv_rows,
                                 .swiglu = swiglu_row,
                                 .rmsnorm = rmsnorm_row,
                                 .rope = rope_apply,
                                 .geglu = geglu_row,
                                 .softcap = softcap_row,
                                 .swiglu_oai = swiglu_oai_row,
                                 .packer = {},
                                 .instruction_loops = {}};  // none: the scalar ceiling is its GEMM's
  return table;
}

}  // namespace tandem::portable
