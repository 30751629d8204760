// DRY penalties (see dry_penalty.h). The optimized path finds every earlier occurrence of the
// window's suffix with one Z-array over the reversed window; the reference compares each
// earlier position directly. Both share the breaker scan, which is a plain backwards walk.
#include "engine/dry_penalty.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

// The window the penalty searches: the last penalty_last_n tokens (-1: all).
std::span<const int32_t> dry_window(const DryParams& params, std::span<const int32_t> history) {
  if (params.penalty_last_n > 0 && history.size() > static_cast<size_t>(params.penalty_last_n))
    return history.last(static_cast<size_t>(params.penalty_last_n));
  return history;
}

// How many of the window's last tokens a repeat may cover: those after the newest breaker's
// last token (the whole window when there is none).
int64_t repeat_limit(const DryParams& params, std::span<const int32_t> window) {
  const auto length = static_cast<int64_t>(window.size());
  const auto by_head = [](const std::vector<int32_t>& sequence, int32_t head) { return sequence.front() < head; };
  for (int64_t p = length - 1; p >= 0; --p) {
    int64_t longest = -1;
    for (auto it = std::lower_bound(params.breakers.begin(), params.breakers.end(), window[p], by_head);
         it != params.breakers.end() && it->front() == window[p]; ++it) {
      const auto tail = static_cast<int64_t>(it->size()) - 1;
      if (tail <= longest || p + tail > length - 1) continue;
      if (std::equal(it->begin() + 1, it->end(), window.begin() + p + 1)) longest = tail;
    }
    if (longest >= 0) return length - 1 - (p + longest);
  }
  return length;
}

// multiplier * base^(n - allowed_length), the exponent capped so that the power stays finite
// (as llama.cpp caps it).
float dry_penalty(const DryParams& params, int32_t n) {
  int32_t exponent = n - params.allowed_length;
  if (params.base > 1.000001f) {
    const auto max_exponent = static_cast<int32_t>(88.7228391f / std::log(params.base));
    exponent = std::min(exponent, max_exponent);
  }
  return params.multiplier * std::pow(params.base, static_cast<float>(exponent));
}

}  // namespace

std::vector<std::string> default_dry_breakers() { return {"\n", ":", "\"", "*"}; }

std::vector<std::vector<int32_t>> dry_breaker_sequences(const Tokenizer& tokenizer,
                                                        std::span<const std::string> breakers) {
  for (const std::string& breaker : breakers) {
    TANDEM_CHECK_INPUT(!breaker.empty(), "a DRY sequence breaker is empty");
    TANDEM_CHECK_INPUT(breaker.size() <= kMaxDryBreakerBytes, "a DRY sequence breaker has {} bytes; at most {}",
                       breaker.size(), kMaxDryBreakerBytes);
  }
  std::vector<std::vector<int32_t>> sequences;
  // Tails by (breaker, prefix length): many heads share one.
  std::map<std::pair<size_t, size_t>, std::vector<int32_t>> tails;
  const int64_t vocab_size = tokenizer.vocab().size();
  for (int64_t id = 0; id < vocab_size; ++id) {
    const std::string text = tokenizer.token_bytes(static_cast<int32_t>(id));
    if (text.empty()) continue;
    for (size_t b = 0; b < breakers.size(); ++b) {
      const std::string& breaker = breakers[b];
      if (text.find(breaker) != std::string::npos) {
        sequences.push_back({static_cast<int32_t>(id)});
        continue;
      }
      for (size_t k = std::min(breaker.size() - 1, text.size()); k >= 1; --k) {
        if (text.compare(text.size() - k, k, breaker, 0, k) != 0) continue;
        auto [it, added] = tails.try_emplace({b, k});
        if (added) {
          it->second = tokenizer.encode(std::string_view(breaker).substr(k), /*add_bos=*/false);
          if (it->second.size() > kMaxDryTail) it->second.resize(kMaxDryTail);
        }
        std::vector<int32_t> sequence{static_cast<int32_t>(id)};
        sequence.insert(sequence.end(), it->second.begin(), it->second.end());
        sequences.push_back(std::move(sequence));
      }
    }
  }
  std::sort(sequences.begin(), sequences.end());
  sequences.erase(std::unique(sequences.begin(), sequences.end()), sequences.end());
  return sequences;
}

void apply_dry(const DryParams& params, std::span<const int32_t> history, std::span<float> logits,
               DryScratch& scratch) {
  if (!params.enabled()) return;
  const std::span<const int32_t> window = dry_window(params, history);
  const auto length = static_cast<int64_t>(window.size());
  if (length < 2) return;
  const int64_t limit = repeat_limit(params, window);
  if (limit < params.allowed_length) return;

  // z[i]: how many tokens the suffix ending i tokens before the newest shares with the
  // window's own suffix (the Z-array of the reversed window).
  std::vector<int32_t>& r = scratch.reversed;
  std::vector<int32_t>& z = scratch.z;
  r.assign(window.rbegin(), window.rend());
  z.assign(static_cast<size_t>(length), 0);
  z[0] = static_cast<int32_t>(length);
  for (int64_t i = 1, left = 0, right = 0; i < length; ++i) {
    int64_t k = i < right ? std::min<int64_t>(right - i, z[i - left]) : 0;
    while (i + k < length && r[k] == r[i + k]) ++k;
    z[i] = static_cast<int32_t>(k);
    if (i + k > right) {
      left = i;
      right = i + k;
    }
  }
  if (scratch.longest.size() < logits.size()) scratch.longest.assign(logits.size(), 0);
  for (int64_t i = 1; i < length; ++i) {
    const auto n = static_cast<int32_t>(std::min<int64_t>(z[i], limit));
    if (n < params.allowed_length || n == 0) continue;
    const int32_t next = r[i - 1];  // what followed that earlier occurrence
    int32_t& longest = scratch.longest[next];
    if (longest == 0) scratch.touched.push_back(next);
    longest = std::max(longest, n);
  }
  for (int32_t token : scratch.touched) {
    logits[token] -= dry_penalty(params, scratch.longest[token]);
    scratch.longest[token] = 0;
  }
  scratch.touched.clear();
}

void apply_dry_reference(const DryParams& params, std::span<const int32_t> history, std::span<float> logits) {
  if (!params.enabled()) return;
  const std::span<const int32_t> window = dry_window(params, history);
  const auto length = static_cast<int64_t>(window.size());
  const int64_t limit = repeat_limit(params, window);
  std::map<int32_t, int32_t> longest;
  for (int64_t end = 0; end + 1 < length; ++end) {
    int64_t n = 0;
    while (n <= end && window[end - n] == window[length - 1 - n]) ++n;
    n = std::min(n, limit);
    if (n >= 1 && n >= params.allowed_length) {
      int32_t& best = longest[window[end + 1]];
      best = std::max(best, static_cast<int32_t>(n));
    }
  }
  for (const auto& [token, n] : longest) logits[token] -= dry_penalty(params, n);
}

}  // namespace tandem
