// Every CPU level's gpt-oss expert activation (kernel_table(isa).swiglu_oai) against the
// formula in float64 and against the scalar level, over odd and even row lengths, gates and
// ups on both sides of both clamps, far past them, ±0, ±inf and NaN. Inputs end at a page the
// process may not touch (a kernel reading past a row faults); outputs carry guard values past
// n. Levels this CPU lacks are listed and skipped.
//
// The bounds: every level rounds z = alpha·g to float first, as ggml does, and sigmoid(z)
// moves by up to |z| times that rounding's relative error (2^-24) where z is very negative
// (sigmoid ~ e^z): the function's own conditioning, shared by every level, and up to |z| ulp
// of a result (an ulp is 2^-24 to 2^-23 of a float). Against float64 a level is therefore
// within kUlpsFixed + |z| ulp; the SIMD levels against the scalar one, which rounds z the same
// way, within a few ulp whatever z.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/swiglu_oai.h"
#include "support/cpu_levels.h"
#include "support/float_ulps.h"
#include "support/guarded_floats.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

constexpr float kGuard = -12345.5f;  // written past the outputs; must survive
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

// Against float64, apart from z's rounding: the exp (glibc's or the vector one, ~1 ulp), 1 + e,
// the division, u + 1 and the last product, each half an ulp of its own result, which can be
// up to an ulp of the final one (measured at most 2.5 + |z|: see the test's output).
constexpr double kUlpsFixed = 4.0;
// A SIMD level against the scalar level: measured 4 at most, over 2·10^6 random inputs too; the
// scalar side is the C library's expf.
constexpr int64_t kUlpsFromScalar = 5;
// The vector exp's floor (kernels/avx2/vector_exp.h): e^z below e^-87 is 0 in the SIMD levels,
// so sigmoid(z) and the result are 0 there, 1.6e-38 of |g·(u + 1)| from the exact value.
constexpr double kExpFloor = -87.0;

const std::vector<int64_t> kRowLengths = {1, 7, 15, 16, 17, 33, 1000, 4099};

// n values: most in [-12, 12] (both clamps at ±7 inside), some far past them on either side,
// some around the clamp and zero; then the special values, spread over the row so that they
// land in vector bodies and in tails, from element `first` on (gates and ups start at different
// elements, so that a special gate meets an ordinary up and the other way round).
std::vector<float> activation_inputs(std::mt19937& rng, int64_t n, int64_t first = 0) {
  std::vector<float> x = random_floats(rng, n, -12.0f, 12.0f);
  std::uniform_int_distribution<int> kind(0, 5);
  for (float& v : x) {
    switch (kind(rng)) {
      case 0: v *= 10.0f; break;                        // to ±120: sigmoid's far tail, z past -87
      case 1: v = kSwigluOaiLimit + 1e-3f * v; break;   // around the upper clamp
      case 2: v = -kSwigluOaiLimit + 1e-3f * v; break;  // around the lower clamp
      case 3: v *= 1e-6f; break;                        // around zero
      default: break;
    }
  }
  const float specials[] = {0.0f,  -0.0f,  kInf,   -kInf,  kNan,  7.0f,  -7.0f, std::nextafter(7.0f, 8.0f),
                            1e30f, -1e30f, -51.0f, -52.0f, -1.0f, 1e-40f};
  const auto n_specials = static_cast<int64_t>(std::size(specials));
  for (int64_t k = 0; k < n_specials && k < n; ++k) x[static_cast<size_t>((first + k * 7919) % n)] = specials[k];
  return x;
}

// The formula in float64 from the float inputs, the clamps included; z = alpha·g exactly.
double swiglu_oai_float64(float gate, float up) {
  const double limit = kSwigluOaiLimit;
  const double g = std::fmin(static_cast<double>(gate), limit), u = std::clamp(static_cast<double>(up), -limit, limit);
  if (std::isnan(gate) || std::isnan(up)) return NAN;  // fmin would drop a NaN gate
  return g / (1.0 + std::exp(-static_cast<double>(kSwigluOaiAlpha) * g)) * (u + 1.0);
}

double z_of(float gate) { return static_cast<double>(kSwigluOaiAlpha) * std::fmin(gate, kSwigluOaiLimit); }

TEST(SwigluOaiLevels, TableHoldsEveryLevelsKernel) {
  EXPECT_EQ(kernel_table(Isa::Scalar).swiglu_oai, &portable::swiglu_oai_row);  // the scalar loop is the scalar level
  for (Isa isa : supported_levels()) EXPECT_NE(kernel_table(isa).swiglu_oai, nullptr) << isa_name(isa);
}

// Each level against float64 within kUlpsFixed + |z| ulp (see the top of the file): values
// past the clamps act as the clamps, NaN in gives NaN out, a gate of -inf gives NaN (-inf·0,
// as the scalar loop's -inf / inf), nothing is written past n, and in place gives the same bits.
TEST(SwigluOaiLevels, MatchesFloat64) {
  std::mt19937 rng(21);
  for (Isa isa : supported_levels()) {
    const SwigluOaiFn swiglu_oai = kernel_table(isa).swiglu_oai;
    double worst = 0.0, worst_fixed = 0.0;  // the largest error, and the largest error - |z|
    for (int64_t n : kRowLengths)
      for (int repeat = 0; repeat < 4; ++repeat) {
        const std::vector<float> gates = activation_inputs(rng, n);
        GuardedFloats gate(gates), up(activation_inputs(rng, n, 3));
        std::vector<float> out(static_cast<size_t>(n + 16), kGuard);
        swiglu_oai(gate.data(), up.data(), n, out.data());
        const std::string what = fmt::format("{} n {}", isa_name(isa), n);
        for (int64_t i = 0; i < n; ++i) {
          const double exact = swiglu_oai_float64(gate[i], up[i]);
          const double z = z_of(gate[i]);
          if (z < kExpFloor && out[i] == 0.0f) continue;
          const double error = ulp_error(out[i], exact);
          const double bound = kUlpsFixed + std::fabs(z);
          worst = std::fmax(worst, error);
          worst_fixed = std::fmax(worst_fixed, error - std::fabs(z));
          ASSERT_LE(error, bound) << what << " swiglu_oai(" << gate[i] << ", " << up[i] << ") = " << out[i]
                                  << ", float64 " << exact;
        }
        for (int64_t i = n; i < n + 16; ++i) ASSERT_TRUE(same_bits(out[i], kGuard)) << what << " wrote past n at " << i;

        GuardedFloats in_place(gates);
        swiglu_oai(in_place.data(), up.data(), n, in_place.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(in_place[i], out[i])) << what << " in place at " << i;
      }
    std::cout << "[ measured ] " << isa_name(isa) << " max error " << worst << " ulp, at most " << worst_fixed
              << " + |z|\n";
  }
}

// The clamps exactly: a gate past the limit gives the limit's result bit for bit, an up past
// ±limit the ±limit's; both infinities included.
TEST(SwigluOaiLevels, ValuesPastTheClampsActAsTheClamps) {
  const float limit = kSwigluOaiLimit;
  const std::vector<float> past_gate = {20.0f, kInf, std::nextafter(limit, kInf), 1e30f, 3.0f, -2.0f, 3.0f, -2.0f};
  const std::vector<float> past_up = {0.5f, -1.5f, 2.0f, 0.25f, 50.0f, kInf, -9.0f, -kInf};
  const std::vector<float> at_gate = {limit, limit, limit, limit, 3.0f, -2.0f, 3.0f, -2.0f};
  const std::vector<float> at_up = {0.5f, -1.5f, 2.0f, 0.25f, limit, limit, -limit, -limit};
  for (Isa isa : supported_levels()) {
    const SwigluOaiFn swiglu_oai = kernel_table(isa).swiglu_oai;
    const auto n = static_cast<int64_t>(past_gate.size());
    std::vector<float> past(past_gate.size()), at(past_gate.size());
    swiglu_oai(past_gate.data(), past_up.data(), n, past.data());
    swiglu_oai(at_gate.data(), at_up.data(), n, at.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(same_bits(past[i], at[i])) << isa_name(isa) << " at " << i << ": " << past[i] << " vs " << at[i];
      EXPECT_TRUE(std::isfinite(past[i])) << isa_name(isa) << " at " << i;
    }
  }
}

// The SIMD levels against the scalar loop: within kUlpsFromScalar ulp, NaN where it is NaN,
// and 0 only where sigmoid(z) is below the vector exp's floor (the scalar loop still has e^z
// there, down to z = -88.7).
TEST(SwigluOaiLevels, SimdLevelsMatchTheScalarLevel) {
  std::mt19937 rng(22);
  const SwigluOaiFn scalar = kernel_table(Isa::Scalar).swiglu_oai;
  for (Isa isa : supported_levels()) {
    if (isa == Isa::Scalar) continue;
    const SwigluOaiFn swiglu_oai = kernel_table(isa).swiglu_oai;
    int64_t worst = 0;
    for (int64_t n : kRowLengths)
      for (int repeat = 0; repeat < 4; ++repeat) {
        const std::vector<float> gate = activation_inputs(rng, n), up = activation_inputs(rng, n, 3);
        std::vector<float> expected(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        scalar(gate.data(), up.data(), n, expected.data());
        swiglu_oai(gate.data(), up.data(), n, got.data());
        for (int64_t i = 0; i < n; ++i) {
          if (z_of(gate[i]) < kExpFloor && got[i] == 0.0f) continue;
          const int64_t distance = ulp_distance(got[i], expected[i]);
          worst = std::max(worst, distance);
          ASSERT_LE(distance, kUlpsFromScalar) << isa_name(isa) << " n " << n << " swiglu_oai(" << gate[i] << ", "
                                               << up[i] << ") = " << got[i] << ", scalar " << expected[i];
        }
      }
    std::cout << "[ measured ] " << isa_name(isa) << " at most " << worst << " ulp from the scalar level\n";
  }
}

// A row's bits depend only on its values: the same values at any offset in a longer row (other
// lanes of the vectors, a masked tail or not) give the same result, as batch invariance needs.
TEST(SwigluOaiLevels, ElementBitsIndependentOfPlacement) {
  std::mt19937 rng(23);
  for (Isa isa : supported_levels()) {
    const SwigluOaiFn swiglu_oai = kernel_table(isa).swiglu_oai;
    const std::vector<float> gate = activation_inputs(rng, 37), up = activation_inputs(rng, 37, 3);
    std::vector<float> alone(37);
    swiglu_oai(gate.data(), up.data(), 37, alone.data());
    for (int64_t offset : {1, 3, 8, 13}) {
      std::vector<float> wide_gate = activation_inputs(rng, 37 + 2 * offset);
      std::vector<float> wide_up = activation_inputs(rng, 37 + 2 * offset);
      std::copy(gate.begin(), gate.end(), wide_gate.begin() + offset);
      std::copy(up.begin(), up.end(), wide_up.begin() + offset);
      std::vector<float> wide_out(wide_gate.size());
      swiglu_oai(wide_gate.data(), wide_up.data(), static_cast<int64_t>(wide_gate.size()), wide_out.data());
      for (int64_t i = 0; i < 37; ++i)
        ASSERT_TRUE(same_bits(alone[i], wide_out[offset + i])) << isa_name(isa) << " offset " << offset << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tandem
