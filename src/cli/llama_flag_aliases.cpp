// rewrite_llama_flags (see llama_flag_aliases.h).
#include "cli/llama_flag_aliases.h"

#include <string_view>
#include <utility>

namespace tandem::cli {

std::vector<std::string> rewrite_llama_flags(int argc, const char* const* argv) {
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}, {"-np", "--parallel"}, {"-sys", "--system"}};
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    for (const auto& [llama, ours] : kAliases) {
      if (arg == llama) {
        arg = ours;
      } else if (arg.starts_with(llama) && arg.size() > llama.size() && arg[llama.size()] == '=') {
        arg = std::string(ours) + arg.substr(llama.size());
      }
    }
  }
  return args;
}

}  // namespace tandem::cli
