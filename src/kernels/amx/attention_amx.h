// Attention with AMX-BF16 tiles (attention_amx.cpp): TANDEM_ATTENTION=bf16 on an AMX CPU.
// The same roundings as the AVX-512 bf16 kernel (Q, K, softmax weights and V to bf16, sums in
// float), computed as tile products: 16 queries x 16 positions x 32 head elements for the
// scores, 16 queries x 16 head elements x 32 positions for the weighted values.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/kernel_contract.h"

namespace tandem::amx {

// AttentionFn and AttentionTokensFn (kernels/kernel_contract.h). Need AMX-BF16
// (cpu_has_amx_bf16) and AVX512_BF16.
void attention_group_bf16(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                          int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                          float* out, float softcap, const float* sinks, AttentionPartial* partials);
void attention_tokens_bf16(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials);

}  // namespace tandem::amx
