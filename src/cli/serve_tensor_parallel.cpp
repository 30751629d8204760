// serve --tensor-parallel T (see serve_tensor_parallel.h): MPI's start, the shape's check and
// each rank's slice, a rank's life past 0, and rank 0's hand-shake with them. Without MPI, the
// one-line refusal.
#include "cli/serve_tensor_parallel.h"

#include <fmt/format.h>
#include <signal.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/human_units.h"
#include "cli/serve_pipeline.h"
#include "model/tensor_slice.h"

#if TANDEM_WITH_MPI
#include "dist/clock_offset.h"
#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "dist/poll_backoff.h"
#include "dist/tensor_parallel_forward.h"
#include "dist/tensor_parallel_worker.h"
#endif

namespace tandem::cli {

#if TANDEM_WITH_MPI

namespace {

std::string describe_rank(int rank, int64_t n_ranks, const ModelConfig& whole, int64_t weight_bytes, int64_t kv_bytes) {
  const TensorSliceShape s = tensor_slice_shape(whole, {rank, n_ranks});
  return fmt::format(
      "tensor parallel rank {}/{}: query heads [{}, {}), KV heads [{}, {}), FFN columns [{}, {}) of {}/{}/{}, {} of "
      "weights, KV cache {}",
      rank, n_ranks, s.q_head_first, s.q_head_first + s.n_q_heads, s.kv_head_first, s.kv_head_first + s.n_kv_heads,
      s.ffn_first, s.ffn_first + s.d_ff, whole.n_heads, whole.n_kv_heads, whole.d_ff, human_bytes(weight_bytes),
      human_bytes(kv_bytes));
}

}  // namespace

struct ServeTensorParallel::State {
  int64_t n_ranks = 0;
  ModelConfig whole;  // the model's configuration, read without weights
  MpiSession session;
  Communicator comm{session};
  std::unique_ptr<TensorParallelForward> forward;
};

ServeTensorParallel::ServeTensorParallel(int64_t n_ranks, const std::string& model_path,
                                         const std::string& draft_model_path, SpeculationType default_speculation) {
  TANDEM_CHECK_INPUT(n_ranks >= 2, "--tensor-parallel {}: tensor parallelism needs at least 2 ranks", n_ranks);
  TANDEM_CHECK_INPUT(draft_model_path.empty(), "--draft-model is not served tensor-parallel (--tensor-parallel)");
  TANDEM_CHECK_INPUT(default_speculation != SpeculationType::Draft,
                     "--spec draft is not served tensor-parallel (--tensor-parallel)");
  // The split needs the shape only: refused here, on every rank, before any weight is read.
  const ModelConfig whole = read_model_config(model_path);
  tensor_slice_shape(whole, {0, n_ranks});
  state_ = std::make_unique<State>();
  state_->n_ranks = n_ranks;
  state_->whole = whole;
  TANDEM_CHECK_INPUT(state_->comm.size() == n_ranks,
                     "--tensor-parallel {} runs as {} MPI ranks (mpirun -np {} tandem serve ...), not {}", n_ranks,
                     n_ranks, n_ranks, state_->comm.size());
}

ServeTensorParallel::~ServeTensorParallel() = default;

bool ServeTensorParallel::front() const { return state_->comm.rank() == 0; }

ModelLoadOptions ServeTensorParallel::load_options() const {
  return {.tensor_slice = TensorSlice{state_->comm.rank(), state_->n_ranks}};
}

void ServeTensorParallel::serve_rank(const std::string& model_path, int threads, const Log& log) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  const std::shared_ptr<const Model> model = load_model(model_path, load_options());
  ThreadPool pool(threads);
  TensorParallelWorker worker(state_->comm, model, pool);
  const StageReady ready = worker.set_up();
  log(describe_rank(ready.rank, state_->n_ranks, state_->whole, ready.weight_bytes, ready.kv_bytes));
  const int64_t n_run = worker.run();
  const AllReduceTotals totals = worker.totals();
  log(fmt::format("tensor parallel rank {}/{}: stopped after {} steps, {} all-reduces ({:.3f} s, {} sent)", ready.rank,
                  state_->n_ranks, n_run, totals.count, static_cast<double>(totals.nanoseconds) * 1e-9,
                  human_bytes(totals.bytes_sent)));
}

void ServeTensorParallel::attach(Engine& engine, const Log& log, Profiler* profiler) {
  const Model& model = engine.model();
  const EngineStats stats = engine.stats();
  std::vector<uint8_t> bytes;
  pack_stage_setup(stage_setup_of(engine), bytes);
  for (int r = 1; r < state_->comm.size(); ++r) state_->comm.send(r, kTagStageSetup, bytes);
  std::vector<TensorRankStatus> ranks(static_cast<size_t>(state_->n_ranks));
  ranks[0] = {
      .rank = 0, .weight_bytes = model.weight_bytes_total(), .kv_bytes = stats.blocks.total * stats.bytes_per_block};
  log(describe_rank(0, state_->n_ranks, state_->whole, ranks[0].weight_bytes, ranks[0].kv_bytes));
  // The other ranks load their slices meanwhile; the server is ready when all of them are.
  PollBackoff backoff;
  for (int64_t n_ready = 1; n_ready < state_->n_ranks;) {
    if (!state_->comm.try_receive_any_size(kAnySource, kTagStageReady, bytes)) {
      backoff.pause();
      continue;
    }
    const StageReady ready = unpack_stage_ready(bytes);
    TANDEM_CHECK_INPUT(ready.rank >= 1 && ready.rank < state_->n_ranks, "a rank's ready message names rank {} of {}",
                       ready.rank, state_->n_ranks);
    ranks[static_cast<size_t>(ready.rank)] = {
        .rank = ready.rank, .weight_bytes = ready.weight_bytes, .kv_bytes = ready.kv_bytes};
    ++n_ready;
  }
  // Every rank now answers clock pings (TensorParallelWorker::set_up), in rank order.
  std::vector<int64_t> clock_offsets(static_cast<size_t>(state_->n_ranks), 0);
  for (int r = 1; r < state_->n_ranks; ++r) {
    const ClockOffset offset = measure_clock_offset(state_->comm, r);
    clock_offsets[static_cast<size_t>(r)] = offset.offset_ns;
    log(fmt::format("tensor parallel rank {}/{}: clock {:+.3f} ms from rank 0's (round trip {:.3f} ms)", r,
                    state_->n_ranks, static_cast<double>(offset.offset_ns) * 1e-6,
                    static_cast<double>(offset.round_trip_ns) * 1e-6));
  }
  state_->forward = std::make_unique<TensorParallelForward>(state_->comm);
  state_->forward->describe_ranks(std::move(ranks), std::move(clock_offsets));
  state_->forward->set_profiler(profiler);
  engine.set_step_forward(state_->forward.get());
}

void ServeTensorParallel::stop(const Log& log) {
  std::vector<uint8_t> bytes;
  pack_stop(bytes);
  for (int r = 1; r < state_->comm.size(); ++r) state_->comm.send(r, kTagActivations, bytes);
  if (state_->forward) {
    const AllReduceTotals totals = state_->forward->totals();
    log(fmt::format("tensor parallel: {} steps, {} all-reduces on rank 0 ({:.3f} s, {} sent); ranks told to stop",
                    state_->forward->steps(), totals.count, static_cast<double>(totals.nanoseconds) * 1e-9,
                    human_bytes(totals.bytes_sent)));
  }
}

#else  // !TANDEM_WITH_MPI

struct ServeTensorParallel::State {};

ServeTensorParallel::ServeTensorParallel(int64_t, const std::string&, const std::string&, SpeculationType) {
  throw InputError(
      "--tensor-parallel needs a build with MPI (apt install libopenmpi-dev openmpi-bin, then configure with "
      "TANDEM_MPI=ON)");
}
ServeTensorParallel::~ServeTensorParallel() = default;
bool ServeTensorParallel::front() const { return true; }
ModelLoadOptions ServeTensorParallel::load_options() const { return {}; }
void ServeTensorParallel::serve_rank(const std::string&, int, const Log&) {}
void ServeTensorParallel::attach(Engine&, const Log&, Profiler*) {}
void ServeTensorParallel::stop(const Log&) {}

#endif

}  // namespace tandem::cli
