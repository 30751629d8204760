// MpiError: a failed MPI call as an exception carrying MPI's own error string. Every
// communicator in dist/ returns errors (MPI_ERRORS_RETURN) instead of aborting the whole job,
// so that a rank can fail the requests a broken peer held and keep serving the rest; each
// call's code goes through check_mpi. Not InputError: a peer that died is not bad input.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tandem {

class MpiError : public std::runtime_error {
 public:
  MpiError(std::string message, int code) : std::runtime_error(std::move(message)), code_(code) {}
  int code() const { return code_; }  // MPI's error code (MPI_ERR_...), or MPI_SUCCESS when not MPI's own

 private:
  int code_;
};

// MPI's text for an error code ("MPI_ERR_RANK: invalid rank").
std::string mpi_error_string(int code);
// Throws MpiError("<call>: <MPI's text>") unless code is MPI_SUCCESS.
void check_mpi(int code, std::string_view call);

}  // namespace tandem
