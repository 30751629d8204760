// Input checks and names of SpeculationParams (see speculation_params.h).
#include "engine/speculation/speculation_params.h"

#include "base/error.h"

namespace tandem {

namespace {
constexpr int32_t kMaxNgram = 16;
}  // namespace

void check_speculation(const SpeculationParams& params) {
  if (params.type == SpeculationType::None) return;  // the other fields are unused then
  TANDEM_CHECK_INPUT(params.draft_max >= 0 && params.draft_max <= kMaxDraftTokens, "draft max must be in 0..{}, got {}",
                     kMaxDraftTokens, params.draft_max);
  TANDEM_CHECK_INPUT(params.draft_min >= 0 && params.draft_min <= params.draft_max,
                     "draft min must be in 0..draft max ({}), got {}", params.draft_max, params.draft_min);
  if (params.type != SpeculationType::Ngram) return;
  TANDEM_CHECK_INPUT(params.ngram_min >= 1 && params.ngram_min <= params.ngram_max && params.ngram_max <= kMaxNgram,
                     "n-gram sizes must satisfy 1 <= min <= max <= {}, got {}..{}", kMaxNgram, params.ngram_min,
                     params.ngram_max);
}

SpeculationType speculation_type_from_name(std::string_view name) {
  if (name == "none") return SpeculationType::None;
  if (name == "ngram") return SpeculationType::Ngram;
  if (name == "draft") return SpeculationType::Draft;
  throw InputError(fmt::format("unknown speculation type '{}' (expected none, ngram or draft)", name));
}

const char* speculation_type_name(SpeculationType type) {
  switch (type) {
    case SpeculationType::None: return "none";
    case SpeculationType::Ngram: return "ngram";
    case SpeculationType::Draft: return "draft";
  }
  return "none";
}

}  // namespace tandem
