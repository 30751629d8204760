// `tandem serve --tensor-parallel T` under `mpirun -np T` (issue 36): what a rank does besides, or
// instead of, the single-process server. Rank 0 runs serve_command's server with its slice of
// every layer (model/tensor_slice.h) and this class's step forward
// (dist/tensor_parallel_forward.h); ranks 1..T-1 never reach the HTTP front: serve_rank() is their
// whole life (dist/tensor_parallel_worker.h). MPI is initialised here, only for --tensor-parallel.
// This header needs no MPI: a build without it refuses the flag in one line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/speculation/speculation_params.h"
#include "model/model.h"
#include "profile/profiler.h"

namespace tandem::cli {

class ServeTensorParallel {
 public:
  using Log = std::function<void(const std::string&)>;

  // Refuses (InputError, one line, before MPI starts) what it does not serve: a draft model,
  // draft speculation by default, a model whose shape does not split into T (read from its
  // configuration alone: model/tensor_slice.h); then initialises MPI and checks the job has T
  // ranks. InputError in a build without MPI.
  ServeTensorParallel(int64_t n_ranks, const std::string& model_path, const std::string& draft_model_path,
                      SpeculationType default_speculation);
  ~ServeTensorParallel();
  ServeTensorParallel(const ServeTensorParallel&) = delete;
  ServeTensorParallel& operator=(const ServeTensorParallel&) = delete;

  bool front() const;  // rank 0: the HTTP front, the engine and slice 0
  // How this rank loads the model: its slice only.
  ModelLoadOptions load_options() const;

  // Ranks 1..T-1: loads this rank's slice, mirrors rank 0's KV pool, runs every step rank 0
  // sends until rank 0 stops them. SIGINT/SIGTERM are ignored (mpirun passes them to every
  // rank; rank 0 drains, then stops the others).
  void serve_rank(const std::string& model_path, int threads, const Log& log);
  // Rank 0, with the engine built but not started: sends every rank the KV pool's geometry,
  // waits for each to be ready, logs every rank's heads and bytes, and makes the engine's steps
  // run tensor-parallel (whose per-rank metrics the engine's tensor_ranks() then reports). With
  // a tracing `profiler` (else null), rank 0's all-reduces go into the trace.
  void attach(Engine& engine, const Log& log, Profiler* profiler);
  // Rank 0, after engine.stop(): stops every rank, and logs the steps and all-reduces run.
  void stop(const Log& log);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::cli
