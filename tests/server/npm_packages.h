// npm packages for the tests that drive `tandem serve` from Node.js with real clients,
// installed once per package set into ~/.cache/tandem/<name> (outside the repository).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem::testing {

inline std::string npm_cache_dir(const std::string& name) {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/tandem/" + name;
}

// Installs `packages` (npm specs, e.g. "openai@4") into npm_cache_dir(name) unless each is
// there already; false with `why` when node/npm/the registry is missing.
inline bool ensure_npm_packages(const std::string& name, const std::vector<std::string>& packages, std::string& why) {
  const std::string dir = npm_cache_dir(name);
  const auto package_dir = [&](const std::string& spec) {
    return dir + "/node_modules/" + spec.substr(0, spec.find('@', 1)) + "/package.json";
  };
  bool present = true;
  for (const std::string& spec : packages) present = present && std::filesystem::exists(package_dir(spec));
  if (present) return true;
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    why = "node is not installed";
    return false;
  }
  std::filesystem::create_directories(dir);
  std::string specs, checks;
  for (const std::string& spec : packages) {
    specs += " " + spec;
    checks += (checks.empty() ? "" : " && ") + std::string("[ -f \"") + package_dir(spec) + "\" ]";
  }
  // ctest -j runs several of these tests at once: two npm installs into one prefix hung
  // (for half an hour, past `timeout`, whose SIGTERM npm ignored), so they take turns under
  // a lock, re-check, and are killed 10 s after the time-out.
  const std::string command = "flock '" + dir + ".lock' sh -c '(" + checks +
                              ") || timeout -k 10 120 npm install --silent --no-audit --no-fund --prefix \"" + dir +
                              "\"" + specs + "' > /dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    why = "npm could not install" + specs + " into " + dir;
    return false;
  }
  return true;
}

}  // namespace tandem::testing
