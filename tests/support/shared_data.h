// Paths into ../shared (the models, vocabularies and chat templates tests compare against)
// and the skip when a file there is missing: no test needs ../shared to pass; a test that
// uses it calls TANDEM_REQUIRE_SHARED first and is labelled `model` (tests/labels.cmake).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace tandem::testing {

// The demo model most end-to-end tests run: a 260K-parameter Llama with a 512-token vocabulary.
inline constexpr const char* kAidreamsGguf = "models/aidreams260K/model.gguf";

// The folder: CMake's TANDEM_SHARED_DIR (default ../shared beside the checkout), unless the
// environment variable of that name overrides it (point it at a missing folder to see which
// tests skip without ../shared).
inline std::string shared_dir() {
  const char* from_env = std::getenv("TANDEM_SHARED_DIR");
  return from_env != nullptr && *from_env != '\0' ? from_env : TANDEM_SHARED_DIR;
}

inline std::string shared_path(std::string_view relative) { return shared_dir() + "/" + std::string(relative); }

inline bool shared_exists(std::string_view relative) { return std::filesystem::exists(shared_path(relative)); }

// A whole file as bytes; empty when it cannot be read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace tandem::testing

// Skips the current test, naming the file, when `relative` (a path under ../shared) is missing.
#define TANDEM_REQUIRE_SHARED(relative)                                          \
  do {                                                                           \
    if (!::tandem::testing::shared_exists(relative))                             \
      GTEST_SKIP() << "../shared/" << (relative) << " is not present; skipping"; \
  } while (0)
