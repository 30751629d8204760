// Which build this is: the release version (TANDEM_VERSION of include/tandem/tandem_c.h, which
// CMake reads) and the git commit it was built from, both written at build time by
// cmake/git_commit.cmake into a generated file of its own (a new commit recompiles one file).
// The public headers sit on top of the library: nothing below api/ includes them. For `tandem --version`,
// /props and the server's start-up line.
#pragma once

#include <string>

namespace tandem {

// Short commit hash, "-dirty" appended when the tree had uncommitted changes; "unknown"
// when built outside a git checkout.
const char* git_commit();

// The release version, "0.1.0": the same string as the public header's TANDEM_VERSION
// (tests/api/c_api_test.cpp checks it).
const char* release_version();

// "tandem 0.1.0 (commit 1a2b3c4d5e6f)".
std::string version_line();

}  // namespace tandem
