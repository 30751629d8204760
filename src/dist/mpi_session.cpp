// MPI initialisation and finalisation (see mpi_session.h).
#include "dist/mpi_session.h"

#include <fmt/format.h>
#include <mpi.h>

#include "dist/mpi_error.h"

namespace tandem {

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw MpiError("MPI is already initialised in this process (one MpiSession per process)", 0);
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &thread_level_), "MPI_Init_thread");
  if (thread_level_ < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw MpiError(fmt::format("MPI provides thread level {}; Tandem needs MPI_THREAD_SERIALIZED ({})", thread_level_,
                               MPI_THREAD_SERIALIZED),
                   0);
  }
}

MpiSession::~MpiSession() {
  if (finalize_) MPI_Finalize();
}

}  // namespace tandem
