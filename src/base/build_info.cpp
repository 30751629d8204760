// version_line (see build_info.h); git_commit() and release_version() are in the generated git_commit.cpp.
#include "base/build_info.h"

namespace tandem {

std::string version_line() { return std::string("tandem ") + release_version() + " (commit " + git_commit() + ")"; }

}  // namespace tandem
