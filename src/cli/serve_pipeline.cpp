// serve --pipeline S (see serve_pipeline.h): MPI's start, the layer split per rank, a stage
// rank's life, and rank 0's hand-shake with the stages. Without MPI, the one-line refusal.
#include "cli/serve_pipeline.h"

#include <fmt/format.h>
#include <signal.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/human_units.h"
#include "model/pipeline_stage.h"

#if TANDEM_WITH_MPI
#include "dist/clock_offset.h"
#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "dist/pipeline_forward.h"
#include "dist/poll_backoff.h"
#include "dist/stage_worker.h"
#endif

namespace tandem::cli {

StageSetup stage_setup_of(const Engine& engine) {
  const EngineStats stats = engine.stats();
  return {.n_blocks = stats.blocks.total,
          .block_size = static_cast<int32_t>(stats.block_size),
          .kv_types = engine.config().kv_types,
          .max_batch_tokens = engine.config().max_batch_tokens,
          .context_length = engine.context_length()};
}

#if TANDEM_WITH_MPI

namespace {

// Micro-batches per step: enough for every stage to have one in flight.
int32_t micro_batches_for(int64_t n_stages) { return static_cast<int32_t>(std::max<int64_t>(2, n_stages)); }

std::string describe_stage(int rank, int64_t n_stages, const LayerRange& layers, int64_t n_layers, int64_t weight_bytes,
                           int64_t kv_bytes) {
  return fmt::format("pipeline stage {}/{} (rank {}): layers [{}, {}) of {}, {} of weights, KV cache {}", rank + 1,
                     n_stages, rank, layers.first, layers.end, n_layers, human_bytes(weight_bytes),
                     human_bytes(kv_bytes));
}

}  // namespace

struct ServePipeline::State {
  int64_t n_stages = 0;
  MpiSession session;
  Communicator comm{session};
  std::unique_ptr<PipelineForward> forward;
};

ServePipeline::ServePipeline(int64_t n_stages, const std::string& draft_model_path,
                             SpeculationType default_speculation) {
  TANDEM_CHECK_INPUT(n_stages >= 2, "--pipeline {}: a pipeline has at least 2 stages", n_stages);
  TANDEM_CHECK_INPUT(draft_model_path.empty(), "--draft-model is not served by a pipeline (--pipeline)");
  TANDEM_CHECK_INPUT(default_speculation != SpeculationType::Draft,
                     "--spec draft is not served by a pipeline (--pipeline)");
  state_ = std::make_unique<State>();
  state_->n_stages = n_stages;
  TANDEM_CHECK_INPUT(state_->comm.size() == n_stages,
                     "--pipeline {} runs as {} MPI ranks (mpirun -np {} tandem serve ...), not {}", n_stages, n_stages,
                     n_stages, state_->comm.size());
}

ServePipeline::~ServePipeline() = default;

bool ServePipeline::front() const { return state_->comm.rank() == 0; }

ModelLoadOptions ServePipeline::load_options(const std::string& model_path) const {
  // The split needs the layer count: the configuration's, read without any weight.
  const int64_t n_layers = read_model_config(model_path).n_layers;
  const std::vector<LayerRange> ranges = split_layers(n_layers, state_->n_stages);
  return {.layers = ranges[static_cast<size_t>(state_->comm.rank())]};
}

void ServePipeline::serve_stage(const std::string& model_path, int threads, const Log& log) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  const std::shared_ptr<const Model> model = load_model(model_path, load_options(model_path));
  ThreadPool pool(threads);
  StageWorker worker(state_->comm, model, pool);
  const StageReady ready = worker.set_up();
  log(describe_stage(ready.rank, state_->n_stages, model->held_layers(), model->config.n_layers, ready.weight_bytes,
                     ready.kv_bytes));
  const int64_t n_run = worker.run();
  log(fmt::format("pipeline stage {}/{} (rank {}): stopped after {} micro-batches", ready.rank + 1, state_->n_stages,
                  ready.rank, n_run));
}

void ServePipeline::attach(Engine& engine, const Log& log, Profiler* profiler) {
  const Model& model = engine.model();
  const EngineStats stats = engine.stats();
  std::vector<uint8_t> bytes;
  pack_stage_setup(stage_setup_of(engine), bytes);
  for (int r = 1; r < state_->comm.size(); ++r) state_->comm.send(r, kTagStageSetup, bytes);
  log(describe_stage(0, state_->n_stages, model.held_layers(), model.config.n_layers, model.weight_bytes_total(),
                     stats.blocks.total * stats.bytes_per_block));
  // The stages load their layers meanwhile; the server is ready when all of them are.
  PollBackoff backoff;
  std::vector<StageReady> ready;
  while (static_cast<int64_t>(ready.size()) < state_->n_stages - 1) {
    if (state_->comm.try_receive_any_size(kAnySource, kTagStageReady, bytes)) {
      ready.push_back(unpack_stage_ready(bytes));
    } else {
      backoff.pause();
    }
  }
  // Every stage is now answering clock pings (StageWorker::set_up).
  const std::vector<LayerRange> layers = split_layers(model.config.n_layers, state_->n_stages);
  std::vector<StageStatus> stages(static_cast<size_t>(state_->n_stages));
  std::vector<int64_t> clock_offsets(static_cast<size_t>(state_->n_stages), 0);
  for (int r = 0; r < state_->n_stages; ++r) {
    StageStatus& stage = stages[static_cast<size_t>(r)];
    stage.stage = stage.rank = r;
    stage.layer_first = layers[static_cast<size_t>(r)].first;
    stage.layer_end = layers[static_cast<size_t>(r)].end;
  }
  stages[0].weight_bytes = model.weight_bytes_total();
  stages[0].kv_bytes = stats.blocks.total * stats.bytes_per_block;
  for (const StageReady& stage : ready) {
    TANDEM_CHECK_INPUT(stage.rank >= 1 && stage.rank < state_->n_stages, "a stage ready message names rank {} of {}",
                       stage.rank, state_->n_stages);
    stages[static_cast<size_t>(stage.rank)].weight_bytes = stage.weight_bytes;
    stages[static_cast<size_t>(stage.rank)].kv_bytes = stage.kv_bytes;
    const ClockOffset offset = measure_clock_offset(state_->comm, stage.rank);
    clock_offsets[static_cast<size_t>(stage.rank)] = offset.offset_ns;
    log(fmt::format("pipeline stage {}/{} (rank {}): clock {:+.3f} ms from rank 0's (round trip {:.3f} ms)",
                    stage.rank + 1, state_->n_stages, stage.rank, static_cast<double>(offset.offset_ns) * 1e-6,
                    static_cast<double>(offset.round_trip_ns) * 1e-6));
  }
  state_->forward = std::make_unique<PipelineForward>(state_->comm, model.config.d_model, model.config.vocab_size,
                                                      micro_batches_for(state_->n_stages));
  state_->forward->describe_stages(std::move(stages), std::move(clock_offsets));
  state_->forward->set_profiler(profiler);
  engine.set_step_forward(state_->forward.get());
}

void ServePipeline::stop(const Log& log) {
  std::vector<uint8_t> bytes;
  pack_stop(bytes);
  state_->comm.send(1, kTagActivations, bytes);
  if (state_->forward)
    log(fmt::format("pipeline: {} steps in {} micro-batches; stages told to stop", state_->forward->steps(),
                    state_->forward->micro_batches()));
}

#else  // !TANDEM_WITH_MPI

struct ServePipeline::State {};

ServePipeline::ServePipeline(int64_t, const std::string&, SpeculationType) {
  throw InputError(
      "--pipeline needs a build with MPI (apt install libopenmpi-dev openmpi-bin, then configure with TANDEM_MPI=ON)");
}
ServePipeline::~ServePipeline() = default;
bool ServePipeline::front() const { return true; }
ModelLoadOptions ServePipeline::load_options(const std::string&) const { return {}; }
void ServePipeline::serve_stage(const std::string&, int, const Log&) {}
void ServePipeline::attach(Engine&, const Log&, Profiler*) {}
void ServePipeline::stop(const Log&) {}

#endif

}  // namespace tandem::cli
