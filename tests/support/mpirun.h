// How the tests start a job under mpirun (TANDEM_MPIEXEC, defined where the build has MPI):
// as cmake/mpi_tests.cmake runs the two-rank test — any number of ranks on few cores, as root
// in CI, shared memory only (pml ob1, btl self,vader), vader's single-copy mechanism off (CMA
// needs ptrace rights containers often withhold). And how they find a rank's process
// (rank_pid: rank 0 to signal as a user would, another to kill).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/shared_data.h"

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

// "pid (comm) state ppid ...": the parent of process `pid`, or -1.
inline pid_t parent_of(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

// Rank r of the job mpirun `launcher` started: a descendant of it (on this host its child; on
// another host a child of that host's daemon, which the launch agent started) whose
// environment names the rank. -1 when none.
inline pid_t rank_pid(pid_t launcher, int rank) {
  const std::string marker = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0';
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (testing::read_file(entry.path() / "environ").find(marker) == std::string::npos) continue;
    for (pid_t p = parent_of(name); p > 1; p = parent_of(std::to_string(p)))
      if (p == launcher) return std::stoi(name);
  }
  return -1;
}

}  // namespace tandem::test_support
