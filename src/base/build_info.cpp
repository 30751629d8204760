// version_line (see build_info.h); git_commit() is in the generated git_commit.cpp.
#include "base/build_info.h"

#include "tandem/tandem_c.h"

namespace tandem {

std::string version_line() { return std::string("tandem ") + TANDEM_VERSION + " (commit " + git_commit() + ")"; }

}  // namespace tandem
