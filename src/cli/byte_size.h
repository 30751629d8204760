// Sizes on the command line with units, as llama.cpp and vLLM users type them: "1G", "512M",
// "64KiB", "1.5GB" or plain bytes. Binary multiples (K = 1024): these flags size memory.
// Parsing only; printing sizes is human_units.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace tandem::cli {

// Bytes for `text`; InputError for anything else (negative, unknown unit, overflow).
int64_t parse_byte_size(std::string_view text);

// An option taking a size with units into *bytes (whatever its integer type). The default is
// shown as bytes.
template <typename Integer>
CLI::Option* add_byte_size_option(CLI::App* command, const std::string& names, Integer* bytes,
                                  const std::string& description) {
  return command
      ->add_option_function<std::string>(
          names, [bytes](const std::string& text) { *bytes = static_cast<Integer>(parse_byte_size(text)); },
          description + " (bytes, or with a unit: 512K, 64M, 1G, 1GiB)")
      ->type_name("SIZE");
}

}  // namespace tandem::cli
