// MpiSession: MPI's lifetime in this process — MPI_Init_thread when constructed,
// MPI_Finalize when destroyed. One per process, constructed before and destroyed after every
// Communicator (MPI allows one initialisation per process, and no MPI call after finalising).
#pragma once

namespace tandem {

class MpiSession {
 public:
  // Initialises MPI asking for MPI_THREAD_SERIALIZED: the engine's step loop, which will make
  // the MPI calls of a serving rank, runs on a thread of its own, not the main one (so
  // MPI_THREAD_FUNNELED is too little), but one thread at a time drives a Communicator, so
  // MPI_THREAD_MULTIPLE (and the locking it costs inside MPI) is not needed. Throws MpiError
  // when MPI provides less. argc/argv are handed to MPI_Init_thread, as MPI allows.
  MpiSession(int* argc, char*** argv);
  MpiSession() : MpiSession(nullptr, nullptr) {}
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int thread_level() const { return thread_level_; }  // what MPI provided: MPI_THREAD_SERIALIZED or more

  // The destructor will not call MPI_Finalize: for a job one of whose ranks has died.
  // OpenMPI's MPI_Finalize waits in a fence for every process of the job; when the runtime has
  // missed a rank's death (OpenMPI 4.1.4 with orte_enable_recovery, after "PMIX ERROR:
  // BAD-PARAM ... pmix_event_notification.c"; about one kill in three on a loaded machine here)
  // it waits for the dead one forever. A process that exits unfinalised is reported by mpirun,
  // which still ends the job.
  void leave_without_finalizing() { finalize_ = false; }

 private:
  int thread_level_ = 0;
  bool finalize_ = true;
};

}  // namespace tandem
