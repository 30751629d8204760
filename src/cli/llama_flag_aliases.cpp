// rewrite_llama_flags (see llama_flag_aliases.h).
#include "cli/llama_flag_aliases.h"

#include <array>
#include <cctype>
#include <string_view>
#include <utility>

namespace tandem::cli {
namespace {

constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}, {"-np", "--parallel"},
    {"-sys", "--system"},       {"-ngl", "--n-gpu-layers"}, {"-ub", "--ubatch-size"},
    {"-cb", "--cont-batching"}, {"-fa", "--flash-attn"},    {"-tp", "--tensor-parallel-size"},  // vLLM's
};

// The values llama.cpp's --flash-attn takes (newer releases; older ones take none).
bool is_flash_attn_value(std::string_view arg) {
  static constexpr std::array<std::string_view, 9> kValues = {"on",   "off",   "auto",    "1",       "0",
                                                              "true", "false", "enabled", "disabled"};
  for (std::string_view value : kValues)
    if (arg == value) return true;
  return false;
}

}  // namespace

bool is_multi_letter_single_dash(const std::string& arg) {
  if (arg.size() < 3 || arg[0] != '-' || !std::isalpha(static_cast<unsigned char>(arg[1]))) return false;
  for (size_t i = 2; i < arg.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(arg[i]);
    if (c == '=') return true;  // -ctk=q8_0
    if (!std::isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

RewrittenArgs rewrite_llama_flags(int argc, const char* const* argv) {
  RewrittenArgs out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const std::string typed = arg;
    if (i > 0) {
      for (const auto& [llama, ours] : kAliases) {
        if (arg == llama) {
          arg = ours;
        } else if (arg.starts_with(llama) && arg.size() > llama.size() && arg[llama.size()] == '=') {
          arg = std::string(ours) + arg.substr(llama.size());
        }
      }
      if (arg == "--flash-attn") {
        // Its value, when one follows, goes with it: never taken for a positional argument.
        if (i + 1 < argc && is_flash_attn_value(argv[i + 1])) {
          arg += "=" + std::string(argv[++i]);
        } else {
          arg += "=on";
        }
      }
    }
    out.args.push_back(std::move(arg));
    out.typed.push_back(typed);
  }
  return out;
}

}  // namespace tandem::cli
