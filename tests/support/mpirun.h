// How the tests start a job under mpirun (TANDEM_MPIEXEC, defined where the build has MPI):
// as cmake/mpi_tests.cmake runs the two-rank test — any number of ranks on few cores, as root
// in CI, shared memory only (pml ob1, btl self,vader), vader's single-copy mechanism off (CMA
// needs ptrace rights containers often withhold).
#pragma once

#include <string>
#include <vector>

namespace tandem::test_support {

#ifdef TANDEM_MPIEXEC
// mpirun and its flags for `ranks` ranks; the program and its arguments follow.
inline std::vector<std::string> mpirun_command(int ranks) {
  return {TANDEM_MPIEXEC,
          "-np",
          std::to_string(ranks),
          "--oversubscribe",
          "--allow-run-as-root",
          "--mca",
          "pml",
          "ob1",
          "--mca",
          "btl",
          "self,vader",
          "--mca",
          "btl_vader_single_copy_mechanism",
          "none"};
}
#endif

}  // namespace tandem::test_support
