// The Sampler's chain written plainly in double precision, one stage after another on the
// whole vocabulary: the reference Sampler::distribution is tested against on random inputs.
// Slow (sorts the vocabulary several times); never used to generate.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace tandem {

// (token, probability) pairs, most probable first, ties by lower id: what Sampler::distribution
// gives for `params` (temperature > 0), `suppressed` tokens as set_suppressed, when XTC is on
// `xtc_uniform` as the uniform its coin would draw, and with Mirostat its current `mirostat_mu`.
std::vector<std::pair<int32_t, double>> reference_distribution(const SamplingParams& params,
                                                               std::span<const float> logits,
                                                               std::span<const int32_t> history,
                                                               std::span<const int32_t> suppressed = {},
                                                               double xtc_uniform = 0.0, double mirostat_mu = 0.0);

}  // namespace tandem
