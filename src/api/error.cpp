// tandem::api::Error, the one exception type of the public API (error_translation.h turns
// the internals' InputError into it), and version().
#include "tandem/tandem.h"
#include "tandem/tandem_c.h"

namespace tandem::api {

Error::Error(const std::string& message) : std::runtime_error(message) {}
// Out of line, so the vtable and type info live in libtandem and a catch in an embedder's
// code matches what the library throws.
Error::~Error() = default;

const char* version() { return TANDEM_VERSION; }

}  // namespace tandem::api
