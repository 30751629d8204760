// Which build this is: the release version (TANDEM_VERSION, include/tandem/tandem_c.h) and
// the git commit it was built from (written at build time by cmake/git_commit.cmake into a
// generated file of its own, so a new commit recompiles one file). For `tandem --version`,
// /props and the server's start-up line.
#pragma once

#include <string>

namespace tandem {

// Short commit hash, "-dirty" appended when the tree had uncommitted changes; "unknown"
// when built outside a git checkout.
const char* git_commit();

// "tandem 0.1.0 (commit 1a2b3c4d5e6f)".
std::string version_line();

}  // namespace tandem
