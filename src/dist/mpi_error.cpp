// MPI error codes to MpiError (see mpi_error.h).
#include "dist/mpi_error.h"

#include <fmt/format.h>
#include <mpi.h>

namespace tandem {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error code {}", code);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, std::string_view call) {
  if (code != MPI_SUCCESS) throw MpiError(fmt::format("{}: {}", call, mpi_error_string(code)), code);
}

}  // namespace tandem
