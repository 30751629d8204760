// RoPE scaling: GGUF keys and HF rope_scaling -> RopeScaling -> per-pair frequencies and the
// magnitude. The math, per pair i of d = rope_dims with base frequency f_i = base^(-2i/d) / ff_i
// (ff: Llama 3's or LongRoPE's divisors):
//   linear:   f_i / s.
//   YaRN:     a blend of f_i / s (interpolated) and f_i (extrapolated): weight of f_i is
//             ext_factor x ramp_i, ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1),
//             low = floor(c(beta_fast)), high = ceil(c(beta_slow)) clamped to [0, d - 1] (without
//             floor and ceil when truncate is off: HF's "truncate": false), with
//             c(r) = d ln(L / (2 pi r)) / (2 ln base) the pair that turns r times in L positions;
//             magnitude 0.1 ln s + 1 (YaRN paper, eq. 22; HF's attention_factor, llama.cpp's mscale).
//   LongRoPE: f_i with ff = long factors when the run's context exceeds L, else short ones;
//             magnitude sqrt(1 + ln s / ln L) (Phi-3), stored by the converter as attn_factor.
// Every magnitude is further multiplied by rope.scaling.attn_factor, as llama.cpp does.
#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/quant.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"

namespace tandem {

namespace {

using nlohmann::json;

// The pair that turns `rotations` times over `original_context` positions, fractional.
double yarn_correction_pair(int64_t rope_dims, int64_t original_context, double rotations, double base) {
  return static_cast<double>(rope_dims) *
         std::log(static_cast<double>(original_context) / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

}  // namespace

std::string_view rope_scaling_type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::None: return "none";
    case RopeScalingType::Linear: return "linear";
    case RopeScalingType::Yarn: return "yarn";
    case RopeScalingType::LongRope: return "longrope";
  }
  return "?";
}

RopeScalingType parse_rope_scaling_type(std::string_view name) {
  if (name == "none" || name == "default") return RopeScalingType::None;
  if (name == "linear") return RopeScalingType::Linear;
  if (name == "yarn") return RopeScalingType::Yarn;
  if (name == "longrope" || name == "su") return RopeScalingType::LongRope;
  throw InputError(
      fmt::format("unsupported RoPE scaling type '{}' (Tandem runs none, linear, yarn, longrope, llama3)", name));
}

void RopeScaling::validate(int64_t rope_dims) const {
  TANDEM_CHECK_INPUT(std::isfinite(factor) && factor > 0.0 && factor < 1e6, "RoPE scaling factor {} is out of range",
                     factor);
  TANDEM_CHECK_INPUT(type == RopeScalingType::None || (original_context > 0 && original_context <= (int64_t{1} << 30)),
                     "RoPE scaling original context {} is out of range", original_context);
  TANDEM_CHECK_INPUT(std::isfinite(attn_factor) && attn_factor > 0.0 && attn_factor < 1e3,
                     "RoPE scaling attn_factor {} is out of range", attn_factor);
  if (type == RopeScalingType::Yarn) {
    TANDEM_CHECK_INPUT(std::isfinite(yarn_ext_factor) && yarn_ext_factor >= 0.0 && yarn_ext_factor <= 1.0,
                       "YaRN ext_factor {} is outside 0..1", yarn_ext_factor);
    TANDEM_CHECK_INPUT(std::isfinite(yarn_attn_factor) && yarn_attn_factor >= 0.0 && yarn_attn_factor < 1e3,
                       "YaRN attn_factor {} is out of range", yarn_attn_factor);
    TANDEM_CHECK_INPUT(
        std::isfinite(yarn_beta_fast) && std::isfinite(yarn_beta_slow) && yarn_beta_slow > 0.0 && yarn_beta_fast > 0.0,
        "YaRN beta_fast {} / beta_slow {} are out of range", yarn_beta_fast, yarn_beta_slow);
  }
  const auto pairs = static_cast<size_t>(rope_dims / 2);
  if (type == RopeScalingType::LongRope) {
    TANDEM_CHECK_INPUT(long_factors.size() == pairs && short_factors.size() == pairs,
                       "LongRoPE needs {} long and short factors (one per rotary pair), has {} and {}", pairs,
                       long_factors.size(), short_factors.size());
  } else {
    TANDEM_CHECK_INPUT(long_factors.empty() && short_factors.empty(),
                       "LongRoPE factors in a model whose RoPE scaling is '{}'", rope_scaling_type_name(type));
  }
  for (const std::vector<float>* factors : {&long_factors, &short_factors})
    for (float f : *factors)
      TANDEM_CHECK_INPUT(std::isfinite(f) && f > 0.0f && f < 1e30f, "LongRoPE factor {} is out of range", f);
}

double RopeScaling::magnitude() const {
  if (type != RopeScalingType::Yarn) return attn_factor;
  // llama.cpp: YaRN's own magnitude comes with its ramp (ext_factor != 0), unless given.
  if (yarn_attn_factor > 0.0) return attn_factor * yarn_attn_factor;
  return yarn_ext_factor != 0.0 ? attn_factor * yarn_magnitude(factor) : attn_factor;
}

void RopeRotation::angles(int64_t position, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < frequencies.size(); ++i) {
    const double angle = static_cast<double>(position) * frequencies[i];
    cos_out[i] = static_cast<float>(magnitude * std::cos(angle));
    sin_out[i] = static_cast<float>(magnitude * std::sin(angle));
  }
}

double yarn_magnitude(double factor) { return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0; }

double longrope_magnitude(double factor, int64_t original_context) {
  if (factor <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original_context)));
}

RopeRotation make_rope_rotation(int64_t rope_dims, double freq_base, const std::vector<float>& freq_factors,
                                const RopeScaling& scaling, int64_t context_length) {
  const int64_t pairs = rope_dims / 2;
  const std::vector<float>* divisors = freq_factors.empty() ? nullptr : &freq_factors;
  if (scaling.type == RopeScalingType::LongRope)
    divisors = context_length > scaling.original_context ? &scaling.long_factors : &scaling.short_factors;
  RopeRotation rotation;
  rotation.frequencies.resize(static_cast<size_t>(pairs));
  rotation.magnitude = scaling.magnitude();
  // YaRN's band of pairs between extrapolation (below low) and interpolation (above high).
  double low = 0.0, high = 0.0;
  if (scaling.type == RopeScalingType::Yarn) {
    low = yarn_correction_pair(rope_dims, scaling.original_context, scaling.yarn_beta_fast, freq_base);
    high = yarn_correction_pair(rope_dims, scaling.original_context, scaling.yarn_beta_slow, freq_base);
    if (scaling.yarn_truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(0.0, low);
    high = std::min(static_cast<double>(rope_dims - 1), high);
  }
  for (int64_t i = 0; i < pairs; ++i) {
    double frequency = std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    if (divisors != nullptr) frequency /= (*divisors)[static_cast<size_t>(i)];
    if (scaling.type == RopeScalingType::Linear) {
      frequency /= scaling.factor;
    } else if (scaling.type == RopeScalingType::Yarn) {
      const double ramp = 1.0 - std::clamp((static_cast<double>(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double extrapolated = ramp * scaling.yarn_ext_factor;
      frequency = frequency / scaling.factor * (1.0 - extrapolated) + frequency * extrapolated;
    }
    rotation.frequencies[static_cast<size_t>(i)] = frequency;
  }
  return rotation;
}

std::vector<float> llama3_freq_factors(int64_t rope_dims, double freq_base, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context) {
  TANDEM_CHECK_INPUT(factor >= 1.0 && factor < 1e6 && low_freq_factor > 0.0 && high_freq_factor > low_freq_factor &&
                         original_context >= 1.0 && original_context < 1e9,
                     "rope_scaling values are out of range (factor {}, low_freq_factor {}, high_freq_factor {})",
                     factor, low_freq_factor, high_freq_factor);
  const double low_freq_wavelength = original_context / low_freq_factor;
  const double high_freq_wavelength = original_context / high_freq_factor;
  std::vector<float> factors(static_cast<size_t>(rope_dims / 2));
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    const double frequency = std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    const double wavelength = 2.0 * std::numbers::pi / frequency;
    double scaled = frequency;
    if (wavelength > low_freq_wavelength) {
      scaled = frequency / factor;
    } else if (wavelength >= high_freq_wavelength) {
      const double smooth = (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
      scaled = (1.0 - smooth) * frequency / factor + smooth * frequency;
    }
    factors[static_cast<size_t>(i)] = static_cast<float>(frequency / scaled);
  }
  return factors;
}

RopeScaling read_gguf_rope_scaling(const GgufFile& file, const std::string& prefix, int64_t rope_dims,
                                   int64_t context_length) {
  const std::string p = prefix + "rope.scaling.";
  RopeScaling s;
  // llama.cpp: the type defaults to linear, which with no factor (1) is no scaling at all.
  const std::optional<std::string> type = file.get_string(p + "type");
  s.type = type ? parse_rope_scaling_type(*type) : RopeScalingType::Linear;
  // llama.cpp's older name for the factor.
  s.factor = file.get_float(p + "factor").value_or(file.get_float(prefix + "rope.scale_linear").value_or(0.0));
  if (s.factor == 0.0) s.factor = 1.0;
  s.original_context = file.get_int(p + "original_context_length").value_or(context_length);
  s.attn_factor = file.get_float(p + "attn_factor").value_or(1.0);
  s.yarn_ext_factor = file.get_float(p + "yarn_ext_factor").value_or(1.0);
  s.yarn_attn_factor = file.get_float(p + "yarn_attn_factor").value_or(0.0);
  s.yarn_beta_fast = file.get_float(p + "yarn_beta_fast").value_or(32.0);
  s.yarn_beta_slow = file.get_float(p + "yarn_beta_slow").value_or(1.0);
  if (const GgufValue* truncate = file.find(p + "yarn_truncate")) {
    const std::optional<bool> value = truncate->as_bool();
    TANDEM_CHECK_INPUT(value.has_value(), "{}yarn_truncate must be a boolean", p);
    s.yarn_truncate = *value;
  }
  // LongRoPE's factors are what make it LongRoPE: llama.cpp's phi3 converter writes them (and
  // attn_factor) without a type key.
  auto factors = [&](const char* name) {
    const GgufTensorInfo* info = file.find_tensor(name);
    if (info == nullptr) return std::vector<float>{};
    TANDEM_CHECK_INPUT(info->view.n_elements() == rope_dims / 2 && info->view.row_length() == rope_dims / 2,
                       "tensor '{}' has shape {}, expected [{}]", name, info->view.shape_string(), rope_dims / 2);
    TANDEM_CHECK_INPUT(
        info->view.dtype == DType::F32 || info->view.dtype == DType::F16 || info->view.dtype == DType::BF16,
        "tensor '{}' has type {}; expected F32", name, dtype_name(info->view.dtype));
    std::vector<float> values(static_cast<size_t>(rope_dims / 2));
    dequantize_row(info->view.dtype, info->view.data, values.data(), rope_dims / 2);
    return values;
  };
  s.long_factors = factors("rope_factors_long.weight");
  s.short_factors = factors("rope_factors_short.weight");
  if (!s.long_factors.empty() || !s.short_factors.empty()) {
    TANDEM_CHECK_INPUT(!type || s.type == RopeScalingType::LongRope,
                       "rope_factors_long/short.weight in a model whose RoPE scaling is '{}'", *type);
    s.type = RopeScalingType::LongRope;
  }
  if (s.type == RopeScalingType::Linear && s.factor == 1.0) s.type = RopeScalingType::None;
  // llama.cpp's phi3 converter writes no factor for LongRoPE: it is the ratio of the contexts.
  if (s.type == RopeScalingType::LongRope && file.find(p + "factor") == nullptr)
    s.factor = static_cast<double>(context_length) / static_cast<double>(std::max<int64_t>(1, s.original_context));
  TANDEM_CHECK_INPUT(s.type != RopeScalingType::LongRope || !s.long_factors.empty(),
                     "RoPE scaling 'longrope' without rope_factors_long.weight / rope_factors_short.weight");
  s.validate(rope_dims);
  return s;
}

void write_gguf_rope_scaling(GgufWriter& writer, const std::string& prefix, const RopeScaling& s) {
  if (s.type == RopeScalingType::None) return;
  const std::string p = prefix + "rope.scaling.";
  auto f32 = [](double value) { return GgufValue::f32(static_cast<float>(value)); };
  writer.set(p + "type", GgufValue::string(std::string(rope_scaling_type_name(s.type))));
  // LongRoPE's factor is the ratio of the contexts, which llama.cpp's converter leaves out.
  if (s.type != RopeScalingType::LongRope) writer.set(p + "factor", f32(s.factor));
  writer.set(p + "original_context_length", GgufValue::u32(static_cast<uint32_t>(s.original_context)));
  if (s.attn_factor != 1.0) writer.set(p + "attn_factor", f32(s.attn_factor));
  if (s.type != RopeScalingType::Yarn) return;
  if (s.yarn_ext_factor != 1.0) writer.set(p + "yarn_ext_factor", f32(s.yarn_ext_factor));
  if (s.yarn_attn_factor != 0.0) writer.set(p + "yarn_attn_factor", f32(s.yarn_attn_factor));
  if (s.yarn_beta_fast != 32.0) writer.set(p + "yarn_beta_fast", f32(s.yarn_beta_fast));
  if (s.yarn_beta_slow != 1.0) writer.set(p + "yarn_beta_slow", f32(s.yarn_beta_slow));
  if (!s.yarn_truncate) writer.set(p + "yarn_truncate", GgufValue::boolean(false));
}

RopeScaling read_hf_rope_scaling(const json& config, int64_t rope_dims, double freq_base, int64_t max_positions,
                                 std::vector<float>& freq_factors) {
  RopeScaling s;
  s.original_context = max_positions;
  const json* scaling = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const auto it = config.find(key);
    if (it != config.end() && !it->is_null()) {
      TANDEM_CHECK_INPUT(it->is_object(), "config.json {} is not an object", key);
      scaling = &*it;
      break;
    }
  }
  if (scaling == nullptr) return s;
  auto find = [&](const char* key) -> const json* {
    const auto it = scaling->find(key);
    return it == scaling->end() || it->is_null() ? nullptr : &*it;
  };
  auto number = [&](const char* key) -> std::optional<double> {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    TANDEM_CHECK_INPUT(value->is_number(), "rope_scaling '{}' is not a number", key);
    return value->get<double>();
  };
  auto required = [&](const char* key) {
    const std::optional<double> value = number(key);
    TANDEM_CHECK_INPUT(value.has_value(), "rope_scaling needs a number '{}'", key);
    return *value;
  };
  // The context before scaling: rope_scaling's own, else Phi-3's top-level field.
  auto original_context = [&]() -> std::optional<int64_t> {
    if (const std::optional<double> value = number("original_max_position_embeddings"))
      return static_cast<int64_t>(*value);
    const auto top = config.find("original_max_position_embeddings");
    if (top != config.end() && top->is_number_integer()) return top->get<int64_t>();
    return std::nullopt;
  };
  const json* type_value = find("rope_type") != nullptr ? find("rope_type") : find("type");
  const std::string type =
      type_value != nullptr && type_value->is_string() ? type_value->get<std::string>() : "default";
  if (type == "llama3") {
    freq_factors = llama3_freq_factors(rope_dims, freq_base, required("factor"), required("low_freq_factor"),
                                       required("high_freq_factor"), required("original_max_position_embeddings"));
    return s;
  }
  s.type = parse_rope_scaling_type(type);
  switch (s.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear: s.factor = required("factor"); break;
    case RopeScalingType::Yarn: {
      s.original_context = original_context().value_or(max_positions);
      // HF: the explicit factor, else the ratio of the two contexts.
      s.factor = number("factor").value_or(static_cast<double>(max_positions) /
                                           static_cast<double>(std::max<int64_t>(1, s.original_context)));
      if (const std::optional<double> attention = number("attention_factor")) {
        s.yarn_attn_factor = *attention;
      } else if (number("mscale") && number("mscale_all_dim") && *number("mscale") != 0.0 &&
                 *number("mscale_all_dim") != 0.0) {
        // DeepSeek's pair: 0.1 m ln s + 1 with m = mscale over the same with m = mscale_all_dim.
        const double log_s = s.factor <= 1.0 ? 0.0 : std::log(s.factor);
        s.yarn_attn_factor = (0.1 * *number("mscale") * log_s + 1.0) / (0.1 * *number("mscale_all_dim") * log_s + 1.0);
      }
      s.yarn_beta_fast = number("beta_fast").value_or(32.0);
      s.yarn_beta_slow = number("beta_slow").value_or(1.0);
      s.yarn_ext_factor = number("extrapolation_factor").value_or(1.0);
      if (const json* truncate = find("truncate")) {
        TANDEM_CHECK_INPUT(truncate->is_boolean(), "rope_scaling truncate must be true or false, not {}",
                           truncate->dump().substr(0, 32));
        s.yarn_truncate = truncate->get<bool>();
      }
      break;
    }
    case RopeScalingType::LongRope: {
      const std::optional<int64_t> original = original_context();
      TANDEM_CHECK_INPUT(original.has_value(), "LongRoPE rope_scaling needs original_max_position_embeddings");
      s.original_context = *original;
      for (auto [key, out] : {std::pair{"long_factor", &s.long_factors}, std::pair{"short_factor", &s.short_factors}}) {
        const json* values = find(key);
        TANDEM_CHECK_INPUT(values != nullptr && values->is_array(), "LongRoPE rope_scaling needs a list '{}'", key);
        for (const json& value : *values) {
          TANDEM_CHECK_INPUT(value.is_number(), "rope_scaling '{}' holds a non-number", key);
          out->push_back(value.get<float>());
        }
      }
      // As llama.cpp's converter and HF (Phi-3): s from the two contexts, the magnitude from
      // rope_scaling's attention_factor when it names one.
      s.factor = static_cast<double>(max_positions) / static_cast<double>(std::max<int64_t>(1, s.original_context));
      s.attn_factor = number("attention_factor").value_or(longrope_magnitude(s.factor, s.original_context));
      break;
    }
  }
  // As a GGUF stores them (f32), so a folder and its conversion compute the same rotation.
  for (double* value :
       {&s.factor, &s.attn_factor, &s.yarn_ext_factor, &s.yarn_attn_factor, &s.yarn_beta_fast, &s.yarn_beta_slow})
    *value = static_cast<float>(*value);
  s.validate(rope_dims);
  return s;
}

}  // namespace tandem
