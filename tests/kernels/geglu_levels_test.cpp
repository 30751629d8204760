// Every CPU level's Gemma kernels (kernel_table(isa).softcap / .geglu: soft-capping through
// each level's tanh, and GeGLU) against float64 computations written out here, over odd and
// even row lengths, magnitudes from subnormal to FLT_MAX, ±0, ±inf and NaN. Inputs end at a
// page the process may not touch (a kernel reading past a row faults); outputs carry guard
// values past n. Levels this CPU lacks are listed and skipped.
//
// Measured (every 257th float bit pattern, 16.7M values, through softcap with cap 1, which
// is tanh itself: x / 1 and 1 * t are exact): the AVX2 and AVX-512 tanh within 1.50 ulp of
// float64 std::tanh, glibc's tanhf (the scalar level) within 2.12 ulp. GeGLU's
// x·sigmoid(z), z = 2·sqrt(2/pi)·(x + 0.044715 x³), within 2.05·(2 + |z|) ulp: the float
// rounding of z moves the result by |z| times its relative error, the function's own
// conditioning for negative x. The scalar loop's 0.5·x·(1 + tanh(z/2)) is only within a few
// ulp of |x|, not of its result (1 + tanh cancels for negative x).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/geglu.h"
#include "kernels/kernel_table.h"
#include "support/cpu_levels.h"
#include "support/float_ulps.h"
#include "support/guarded_floats.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

constexpr float kGuard = -12345.5f;  // written past the outputs; must survive
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<int64_t> row_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {63, 64, 65, 1000, 1023, 4096, 9216 + 3}) lengths.push_back(n);
  return lengths;
}

// n inputs of every kind: uniform in [-1, 1] and around the polynomial/exp boundary (0.625),
// up to ±50, magnitudes log-uniform from 1e-40 (subnormal) to FLT_MAX; then the special
// values, spread over the row so that they land in vector bodies and in tails.
std::vector<float> tanh_inputs(std::mt19937& rng, int64_t n) {
  std::vector<float> x = random_floats(rng, n, -1.0f, 1.0f);
  std::uniform_real_distribution<float> log_magnitude(-40.0f, 38.5f);
  std::uniform_int_distribution<int> kind(0, 3);
  for (float& v : x) {
    switch (kind(rng)) {
      case 0: break;
      case 1: v = 0.625f + 0.05f * v; break;
      case 2: v *= 50.0f; break;
      default: v = std::copysign(std::fmin(std::pow(10.0f, log_magnitude(rng)), FLT_MAX), v); break;
    }
  }
  const float specials[] = {0.0f,   -0.0f,   kInf,    -kInf,    kNan,   FLT_MIN, -FLT_MIN,
                            1e-45f, -1e-45f, FLT_MAX, -FLT_MAX, 0.625f, -0.625f, std::nextafter(0.625f, 0.0f),
                            9.0f,   -9.1f,   43.5f,   -44.0f,   1e-4f,  -3e-8f};
  const auto n_specials = static_cast<int64_t>(std::size(specials));
  for (int64_t k = 0; k < n_specials && k < n; ++k) x[static_cast<size_t>((k * 7919) % n)] = specials[k];
  return x;
}

// The largest error a level may show: the SIMD levels' measured 1.5 ulp with a little room,
// glibc's tanhf (documented within 2 ulp) for the scalar level.
double tanh_ulp_bound(Isa isa) { return isa == Isa::Scalar ? 2.5 : 2.0; }

TEST(GegluLevels, TableHoldsEveryLevelsKernels) {
  EXPECT_EQ(kernel_table(Isa::Scalar).geglu, &portable::geglu_row);  // the scalar loops are the scalar level
  EXPECT_EQ(kernel_table(Isa::Scalar).softcap, &portable::softcap_row);
  for (Isa isa : supported_levels()) {
    EXPECT_NE(kernel_table(isa).geglu, nullptr) << isa_name(isa);
    EXPECT_NE(kernel_table(isa).softcap, nullptr) << isa_name(isa);
  }
}

// softcap with cap 1 is tanh itself. Against float64 std::tanh: within the level's bound,
// tanh(±0) = ±0 with its sign, ±inf -> ±1, NaN -> NaN, subnormals -> themselves.
TEST(GegluLevels, TanhMatchesFloat64) {
  std::mt19937 rng(13);
  for (Isa isa : supported_levels()) {
    const SoftcapFn softcap = kernel_table(isa).softcap;
    double worst = 0.0;
    for (int64_t n : row_lengths()) {
      const std::vector<float> values = tanh_inputs(rng, n);
      GuardedFloats x(values);
      std::vector<float> out(static_cast<size_t>(n + 16), kGuard);
      softcap(x.data(), n, 1.0f, out.data());
      const std::string what = fmt::format("{} n {}", isa_name(isa), n);
      for (int64_t i = 0; i < n; ++i) {
        const double error = ulp_error(out[i], std::tanh(static_cast<double>(x[i])));
        worst = std::fmax(worst, error);
        ASSERT_LE(error, tanh_ulp_bound(isa)) << what << " tanh(" << x[i] << ") = " << out[i];
        if (x[i] == 0.0f || std::isinf(x[i])) {
          ASSERT_TRUE(same_bits(out[i], x[i] == 0.0f ? x[i] : std::copysign(1.0f, x[i]))) << what << " at " << x[i];
        }
        if (std::fabs(x[i]) < 1e-30f) {
          ASSERT_TRUE(same_bits(out[i], x[i])) << what << " tiny " << x[i];
        }
      }
      for (int64_t i = n; i < n + 16; ++i) ASSERT_TRUE(same_bits(out[i], kGuard)) << what << " wrote past n at " << i;
    }
    std::cout << "[ measured ] " << isa_name(isa) << " tanh max error " << worst << " ulp\n";
  }
}

// cap·tanh(x / cap) at Gemma 2's caps (50 for scores, 30 for logits) and others, against the
// same formula in float64 from the float inputs: the division's rounding and the final
// product's add at most an ulp to tanh's error. In place gives the same bits.
TEST(GegluLevels, SoftcapMatchesFloat64) {
  std::mt19937 rng(14);
  for (Isa isa : supported_levels()) {
    const SoftcapFn softcap = kernel_table(isa).softcap;
    for (int64_t n : row_lengths())
      for (float cap : {0.5f, 5.0f, 30.0f, 50.0f, 1e4f}) {
        std::vector<float> values = tanh_inputs(rng, n);
        for (float& v : values) v *= cap;  // the interesting range scales with the cap
        GuardedFloats x(values);
        std::vector<float> out(static_cast<size_t>(n + 16), kGuard);
        softcap(x.data(), n, cap, out.data());
        const std::string what = fmt::format("{} n {} cap {}", isa_name(isa), n, cap);
        for (int64_t i = 0; i < n; ++i) {
          const double exact = cap * std::tanh(static_cast<double>(x[i]) / cap);
          ASSERT_LE(ulp_error(out[i], exact), tanh_ulp_bound(isa) + 1.5)
              << what << " softcap(" << x[i] << ") = " << out[i] << ", float64 " << exact;
        }
        for (int64_t i = n; i < n + 16; ++i) ASSERT_TRUE(same_bits(out[i], kGuard)) << what << " wrote past n at " << i;

        GuardedFloats in_place(values);
        softcap(in_place.data(), n, cap, in_place.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(in_place[i], out[i])) << what << " in place at " << i;
      }
  }
}

// gelu(x)·up against float64 x / (1 + exp(-z)) · up, z = 2·sqrt(2/pi)·(x + 0.044715 x³) (the
// tanh form's 0.5·x·(1 + tanh(z/2)), written without the cancellation). SIMD levels: within
// 3 + 2.5·|z| ulp of the result (see the top of the file), and 0 where sigmoid(z) < e^-87;
// the scalar loop: within 4 ulp of |x·up|. Gates over GELU's curved part, its tails, huge and special values; in place
// gives the same bits.
TEST(GegluLevels, GegluMatchesFloat64) {
  std::mt19937 rng(15);
  for (Isa isa : supported_levels()) {
    const GegluFn geglu = kernel_table(isa).geglu;
    for (int64_t n : row_lengths())
      for (float spread : {1.0f, 6.0f, 20.0f}) {
        std::vector<float> gates = tanh_inputs(rng, n);
        for (float& g : gates)
          if (std::fabs(g) <= 1.0f) g *= spread;
        GuardedFloats gate(gates), up(random_floats(rng, n, -2.0f, 2.0f));
        std::vector<float> out(static_cast<size_t>(n + 16), kGuard);
        geglu(gate.data(), up.data(), n, out.data());
        const std::string what = fmt::format("{} n {} spread {}", isa_name(isa), n, spread);
        for (int64_t i = 0; i < n; ++i) {
          const double x = gate[i];
          const double z = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
          const double exact = x / (1.0 + std::exp(-z)) * up[i];
          if (isa == Isa::Scalar) {
            if (std::fabs(exact) <= FLT_MAX) {  // a float result; NaN, infinite or overflowing below
              ASSERT_LE(std::fabs(out[i] - exact), 4.0 * float_ulp(x * up[i]))
                  << what << " geglu(" << x << ", " << up[i] << ") = " << out[i] << ", float64 " << exact;
            } else {
              ASSERT_EQ(ulp_error(out[i], exact), 0.0) << what << " geglu(" << x << ", " << up[i] << ")";
            }
          } else {
            // sigmoid(z) below e^-87 is 0, as SwiGLU's (the vector exp's floor; 1.6e-38 of |x·up|).
            if (z < -87.0 && out[i] == 0.0f) continue;
            // z infinite (|x| past 1e13) or NaN: sigmoid exactly 0 or 1, the result x·up rounded once.
            const double bound = std::isfinite(z) ? 3.0 + 2.5 * std::fabs(z) : 0.5;
            ASSERT_LE(ulp_error(out[i], exact), bound)
                << what << " geglu(" << x << ", " << up[i] << ") = " << out[i] << ", float64 " << exact;
          }
        }
        for (int64_t i = n; i < n + 16; ++i) ASSERT_TRUE(same_bits(out[i], kGuard)) << what << " wrote past n at " << i;

        GuardedFloats in_place(gates);
        geglu(in_place.data(), up.data(), n, in_place.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(in_place[i], out[i])) << what << " in place at " << i;
      }
  }
}

// A row's bits depend only on its values: the same values at any offset in a longer row (other
// lanes of the vectors, a masked tail or not) give the same result, as batch invariance needs.
TEST(GegluLevels, ElementBitsIndependentOfPlacement) {
  std::mt19937 rng(16);
  for (Isa isa : supported_levels()) {
    const KernelTable& table = kernel_table(isa);
    const std::vector<float> gate = random_floats(rng, 37, -6.0f, 6.0f), up = random_floats(rng, 37, -1.0f, 1.0f);
    std::vector<float> alone_geglu(37), alone_cap(37);
    table.geglu(gate.data(), up.data(), 37, alone_geglu.data());
    table.softcap(gate.data(), 37, 5.0f, alone_cap.data());
    for (int64_t offset : {1, 3, 8, 13}) {
      std::vector<float> wide_gate = random_floats(rng, 37 + 2 * offset, -6.0f, 6.0f);
      std::vector<float> wide_up = random_floats(rng, 37 + 2 * offset, -1.0f, 1.0f);
      std::copy(gate.begin(), gate.end(), wide_gate.begin() + offset);
      std::copy(up.begin(), up.end(), wide_up.begin() + offset);
      std::vector<float> wide_out(wide_gate.size()), wide_cap(wide_gate.size());
      table.geglu(wide_gate.data(), wide_up.data(), static_cast<int64_t>(wide_gate.size()), wide_out.data());
      table.softcap(wide_gate.data(), static_cast<int64_t>(wide_gate.size()), 5.0f, wide_cap.data());
      for (int64_t i = 0; i < 37; ++i) {
        ASSERT_TRUE(same_bits(alone_geglu[i], wide_out[offset + i])) << isa_name(isa) << " offset " << offset;
        ASSERT_TRUE(same_bits(alone_cap[i], wide_cap[offset + i])) << isa_name(isa) << " offset " << offset;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
