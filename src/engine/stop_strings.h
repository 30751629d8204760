// Stop strings over a sequence's detokenized output: which text may be released to the
// client now, and where the output stops. Text that could be the start of a stop string is
// held back until the next token settles it. Pure string work; the engine keeps the held text.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem {

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that
// much must be held back, since the next token could complete the stop string.
size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops);

// Earliest position of any stop string in `text`, or npos; *length: the length of the one
// found there (the longest, when several start at it).
size_t find_stop(const std::string& text, const std::vector<std::string>& stops, size_t* length);

struct ReleasedText {
  std::string text;         // what the client gets now
  bool stopped = false;     // a stop string was found: the output ends (the text stops before it)
  std::string stop_string;  // which one, when stopped (llama-server's stopping_word)
};

// Takes what can be released out of `held`: up to a stop string found in it (and the stop
// string itself with include_stop; everything is dropped from `held` then); everything when
// the output is `finishing` for another reason; else all but the tail that could start a stop
// string, which stays in `held`.
ReleasedText release_held_text(std::string& held, const std::vector<std::string>& stops, bool include_stop,
                               bool finishing);

}  // namespace tandem
