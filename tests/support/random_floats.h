// Random inputs for kernel tests: n floats drawn uniformly from [low, high).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tandem {

inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float low, float high) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(rng);
  return values;
}

}  // namespace tandem
