// Float error measures for kernel tests that hold a level's results against float64 formulas
// or against another level: the spacing of floats at a value, an error in those units, and
// the distance between two floats counted in representable steps.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tandem {

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The spacing of floats at |v| (v a float64 value): 2^(e-23) for |v| in [2^e, 2^(e+1)), the
// subnormal spacing below FLT_MIN.
inline double float_ulp(double v) {
  v = std::fabs(v);
  if (v < FLT_MIN) return std::ldexp(1.0, -149);
  int exponent = 0;
  std::frexp(v, &exponent);  // v in [2^(exponent-1), 2^exponent)
  return std::ldexp(1.0, exponent - 24);
}

// |got - exact| in ulps of exact; 0 when both are the same infinity or both NaN, infinite when
// only one is. An exact value past FLT_MAX is the infinity a float result rounds to.
inline double ulp_error(float got, double exact) {
  if (std::fabs(exact) > FLT_MAX) exact = std::copysign(INFINITY, exact);
  if (std::isnan(exact) || std::isnan(got)) return std::isnan(exact) && std::isnan(got) ? 0.0 : INFINITY;
  if (std::isinf(exact) || std::isinf(got)) return static_cast<double>(got) == exact ? 0.0 : INFINITY;
  return std::fabs(static_cast<double>(got) - exact) / float_ulp(exact);
}

// How many representable floats lie between a and b (+0 and -0 count as one); 0 for two NaNs,
// the largest int64 when only one is NaN.
inline int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  // Floats ordered as integers: the magnitude's bits for positives, their negation for negatives.
  auto ordered = [](float v) {
    int32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : static_cast<int64_t>(bits);
  };
  const int64_t distance = ordered(a) - ordered(b);
  return distance < 0 ? -distance : distance;
}

}  // namespace tandem
