// Table of element-type traits, indexed by GGUF type id.
#include "base/dtype.h"

#include <array>
#include <cctype>

#include "base/error.h"

namespace tandem {
namespace {

struct Entry {
  DType type;
  DTypeTraits traits;
};

constexpr std::array kEntries = {
    Entry{DType::F32, {"F32", 1, 4, true}},           Entry{DType::F16, {"F16", 1, 2, true}},
    Entry{DType::Q4_0, {"Q4_0", 32, 18, true}},       Entry{DType::Q4_1, {"Q4_1", 32, 20, false}},
    Entry{DType::Q5_0, {"Q5_0", 32, 22, true}},       Entry{DType::Q5_1, {"Q5_1", 32, 24, true}},
    Entry{DType::Q8_0, {"Q8_0", 32, 34, true}},       Entry{DType::Q8_1, {"Q8_1", 32, 36, false}},
    Entry{DType::Q2_K, {"Q2_K", 256, 84, true}},      Entry{DType::Q3_K, {"Q3_K", 256, 110, true}},
    Entry{DType::Q4_K, {"Q4_K", 256, 144, true}},     Entry{DType::Q5_K, {"Q5_K", 256, 176, true}},
    Entry{DType::Q6_K, {"Q6_K", 256, 210, true}},     Entry{DType::Q8_K, {"Q8_K", 256, 292, true}},
    Entry{DType::IQ4_XS, {"IQ4_XS", 256, 136, true}}, Entry{DType::I8, {"I8", 1, 1, false}},
    Entry{DType::I16, {"I16", 1, 2, false}},          Entry{DType::I32, {"I32", 1, 4, false}},
    Entry{DType::I64, {"I64", 1, 8, false}},          Entry{DType::F64, {"F64", 1, 8, false}},
    Entry{DType::BF16, {"BF16", 1, 2, true}},         Entry{DType::IQ4_NL, {"IQ4_NL", 32, 18, true}},
    Entry{DType::MXFP4, {"MXFP4", 32, 17, true}},
};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t type_id) {
  for (const Entry& entry : kEntries)
    if (static_cast<uint32_t>(entry.type) == type_id) return entry.traits;
  return std::nullopt;
}

DTypeTraits dtype_traits(DType type) {
  auto traits = dtype_traits(static_cast<uint32_t>(type));
  TANDEM_ASSERT(traits.has_value());
  return *traits;
}

std::string_view dtype_name(DType type) { return dtype_traits(type).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Entry& entry : kEntries) {
    if (entry.traits.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size(); ++i)
      same &= std::toupper(static_cast<unsigned char>(name[i])) == entry.traits.name[i];
    if (same) return entry.type;
  }
  return std::nullopt;
}

}  // namespace tandem
