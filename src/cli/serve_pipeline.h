// `tandem serve --pipeline S` under `mpirun -np S` (issue 16): what a rank does besides, or
// instead of, the single-process server. Rank 0 runs serve_command's server with stage 0's
// layers and this class's step forward (dist/pipeline_forward.h); ranks 1..S-1 never reach the
// HTTP front: serve_stage() is their whole life (dist/stage_worker.h). MPI is initialised here,
// only for --pipeline. This header needs no MPI: a build without it refuses the flag in one line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dist/pipeline_messages.h"
#include "engine/engine.h"
#include "engine/speculation/speculation_params.h"
#include "model/model.h"
#include "profile/profiler.h"

namespace tandem::cli {

// What a rank that mirrors rank 0's engine needs of it (a pipeline stage, a tensor-parallel
// rank): the KV pool's blocks, block size and types, the batch budget and the context length.
StageSetup stage_setup_of(const Engine& engine);

class ServePipeline {
 public:
  using Log = std::function<void(const std::string&)>;

  // Refuses (InputError, one line, before MPI starts) what a pipeline does not serve: a draft
  // model, draft speculation by default; then initialises MPI and checks the job has n_stages
  // ranks. InputError in a build without MPI.
  ServePipeline(int64_t n_stages, const std::string& draft_model_path, SpeculationType default_speculation);
  ~ServePipeline();
  ServePipeline(const ServePipeline&) = delete;
  ServePipeline& operator=(const ServePipeline&) = delete;

  bool front() const;  // rank 0: the HTTP front, the engine and stage 0
  // How this rank loads the model at `model_path`: its stage's layers only.
  ModelLoadOptions load_options(const std::string& model_path) const;

  // Ranks 1..S-1: loads this rank's layers, mirrors rank 0's KV pool, runs micro-batches until
  // rank 0 stops the pipeline. SIGINT/SIGTERM are ignored (mpirun passes them to every rank;
  // rank 0 drains, then stops the stages).
  void serve_stage(const std::string& model_path, int threads, const Log& log);
  // Rank 0, with the engine built but not started: sends every stage the KV pool's geometry,
  // waits for each to be ready, measures each one's clock offset, logs every rank's layers and
  // bytes, and makes the engine's steps run through the pipeline (whose stage metrics the
  // engine's stages() then reports). With a tracing `profiler` (else null), every stage's
  // micro-batches go into the trace.
  void attach(Engine& engine, const Log& log, Profiler* profiler);
  // Rank 0, after engine.stop(): ends every stage, and logs the steps and micro-batches run.
  void stop(const Log& log);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::cli
