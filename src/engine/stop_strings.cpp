// Stop-string matching and release (see stop_strings.h).
#include "engine/stop_strings.h"

#include <algorithm>

namespace tandem {

size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(text.size(), stop.size() - 1); n > longest; --n) {
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

size_t find_stop(const std::string& text, const std::vector<std::string>& stops, size_t* length) {
  size_t first = std::string::npos;
  for (const std::string& stop : stops) {
    const size_t at = text.find(stop);
    if (at < first || (at == first && at != std::string::npos && stop.size() > *length)) {
      first = at;
      *length = stop.size();
    }
  }
  return first;
}

ReleasedText release_held_text(std::string& held, const std::vector<std::string>& stops, bool include_stop,
                               bool finishing) {
  ReleasedText released;
  size_t stop_length = 0;
  const size_t stop_at = find_stop(held, stops, &stop_length);
  if (stop_at != std::string::npos) {
    released.text = held.substr(0, stop_at + (include_stop ? stop_length : 0));
    released.stopped = true;
    released.stop_string = held.substr(stop_at, stop_length);
    held.clear();
  } else if (finishing) {
    released.text = std::move(held);
    held.clear();
  } else {
    const size_t keep = stop_prefix_suffix(held, stops);
    released.text = held.substr(0, held.size() - keep);
    held.erase(0, held.size() - keep);
  }
  return released;
}

}  // namespace tandem
