// RoPE scaling: how a model stretches its rotary frequencies past the context it was trained
// on — linear (position interpolation), YaRN and LongRoPE — as llama.cpp's GGUF keys
// (`<arch>.rope.scaling.*`, rope_factors_long/short.weight) and HF's config.json `rope_scaling`
// name it, and the rotation each implies: one frequency per rotary pair and one magnitude that
// multiplies cos and sin. Llama 3's scaling needs no type of its own here: it is per-pair
// frequency divisors (ModelConfig::rope_freq_factors, GGUF rope_freqs.weight).
// Owns no weights and runs no kernel; the forward pass turns a RopeRotation into its tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem {

class GgufFile;
class GgufWriter;

enum class RopeScalingType { None, Linear, Yarn, LongRope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  // s: how many times the original context the model reaches. Linear and YaRN divide the
  // frequencies by it (YaRN only the long wavelengths). rope.scaling.factor.
  double factor = 1.0;
  // L: the context the rotary frequencies were trained for (rope.scaling.original_context_length;
  // the model's context when the file does not say). YaRN's ramp and LongRoPE's choice use it.
  int64_t original_context = 0;
  // Multiplies cos and sin (so q·k by its square): rope.scaling.attn_factor, LongRoPE's
  // sqrt(1 + ln s / ln L) as llama.cpp's converter writes it. 1 for the others unless the file says.
  double attn_factor = 1.0;
  // YaRN, as llama.cpp defines its parameters (and HF's rope_scaling the same three):
  double yarn_ext_factor = 1.0;   // share of the ramp that extrapolates (0: linear interpolation alone)
  double yarn_attn_factor = 0.0;  // YaRN's magnitude; 0: 0.1 ln s + 1 (the paper's sqrt(1/t))
  double yarn_beta_fast = 32.0;   // pairs turning more than this many times in L keep their frequency
  double yarn_beta_slow = 1.0;    // pairs turning fewer times are interpolated by s
  // The ramp's ends rounded out to whole pairs (floor / ceil), as llama.cpp always does and HF
  // does by default. HF's rope_scaling "truncate": false (gpt-oss's config) keeps them
  // fractional; Tandem writes that as rope.scaling.yarn_truncate = false, a key of its own
  // (llama.cpp ignores it and rounds).
  bool yarn_truncate = true;
  // LongRoPE: per-pair frequency divisors [rope_dims / 2], long past the original context.
  std::vector<float> long_factors, short_factors;

  // What cos and sin are multiplied by: attn_factor, times YaRN's magnitude for YaRN.
  double magnitude() const;
  // Throws InputError naming the first inconsistent value.
  void validate(int64_t rope_dims) const;
};

// "none", "linear", "yarn", "longrope" (llama.cpp's names).
std::string_view rope_scaling_type_name(RopeScalingType type);
// The reverse, with HF's aliases ("default" = none, "su" = longrope); InputError naming any other.
RopeScalingType parse_rope_scaling_type(std::string_view name);

// The rotation at every position: pair i of a head turns by position x frequencies[i]; cos and
// sin are multiplied by `magnitude`.
struct RopeRotation {
  std::vector<double> frequencies;  // [rope_dims / 2] radians per position
  double magnitude = 1.0;

  // cos_out, sin_out: [rope_dims / 2].
  void angles(int64_t position, float* cos_out, float* sin_out) const;
};

// `freq_factors`: Llama 3's per-pair divisors (empty: none). `context_length`: positions one
// sequence may reach in this run (llama.cpp's n_ctx per sequence); LongRoPE takes its long
// factors when it exceeds the original context, as llama.cpp does.
RopeRotation make_rope_rotation(int64_t rope_dims, double freq_base, const std::vector<float>& freq_factors,
                                const RopeScaling& scaling, int64_t context_length);

// YaRN's default magnitude, 0.1 ln s + 1 (1 for s <= 1).
double yarn_magnitude(double factor);
// LongRoPE's default magnitude, sqrt(1 + ln s / ln L) (1 for s <= 1).
double longrope_magnitude(double factor, int64_t original_context);
// Llama 3's scaling as per-pair frequency divisors: wavelengths past original / low_freq_factor
// slowed by `factor`, those under original / high_freq_factor kept, a blend in 1/wavelength between.
std::vector<float> llama3_freq_factors(int64_t rope_dims, double freq_base, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context);

// The `<prefix>rope.scaling.*` keys and rope_factors_long/short.weight of a GGUF file.
// `context_length` is the original context when the file does not name one.
RopeScaling read_gguf_rope_scaling(const GgufFile& file, const std::string& prefix, int64_t rope_dims,
                                   int64_t context_length);

// The same keys into a GGUF being written, as llama.cpp reads them: nothing for None; the type,
// factor, original context, and what differs from the defaults. LongRoPE's factor tensors are
// the caller's to add (rope_factors_long.weight, rope_factors_short.weight, F32).
void write_gguf_rope_scaling(GgufWriter& writer, const std::string& prefix, const RopeScaling& scaling);

// config.json's rope_scaling (or rope_parameters) object, for a model of `rope_dims` rotary
// dimensions and `max_positions` positions. Llama 3's (rope_type "llama3") goes to
// `freq_factors`. InputError for an unknown type or a missing value.
RopeScaling read_hf_rope_scaling(const nlohmann::json& config, int64_t rope_dims, double freq_base,
                                 int64_t max_positions, std::vector<float>& freq_factors);

}  // namespace tandem
