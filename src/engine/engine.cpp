// Engine: requests in, the loop (see engine.h). Construction sizes the KV pool and checks the
// configuration; submit() checks a request and builds its Sequence on the caller's thread;
// intake() hands new requests to the scheduler (or to the KV import) and ends cancelled ones on
// the engine thread, which alone touches the scheduler, the cache and the sequences; the mutex
// guards the hand-over queues and stats. What one step does is engine_step.cpp.
#include "engine/engine.h"

#include <algorithm>

#include "base/error.h"
#include "base/machine_memory.h"
#include "engine/engine_sequence.h"
#include "grammar/mask_worker.h"

namespace tandem {

namespace {

// Prompt lookup's proposer; requests that do not use it get a placeholder (their n-gram
// sizes were not checked).
NgramProposer proposer_for(const SpeculationParams& speculation) {
  if (speculation.type == SpeculationType::Ngram) return {speculation.ngram_min, speculation.ngram_max};
  return {1, 1};
}

// The configuration with the model's context as the default and limit, and room for one
// token of every sequence in a step.
EngineConfig checked_config(EngineConfig config, const ModelConfig& model) {
  const int64_t model_context = model.context_length;
  if (config.context_length <= 0 || config.context_length > model_context) config.context_length = model_context;
  TANDEM_CHECK_INPUT(config.max_seqs >= 1, "--parallel must be at least 1");
  TANDEM_CHECK_INPUT(config.block_size >= 1 && config.block_size <= 4096, "--kv-block must be in 1..4096");
  config.max_batch_tokens = std::max<int64_t>(config.max_batch_tokens, config.max_seqs);
  return config;
}

KvPoolPlan checked_kv_pool(const Model& model, const EngineConfig& config) {
  // A pipeline stage's model caches its own layers only (Model::kv_shape): --kv-memory buys
  // more blocks of fewer layers.
  check_kv_types(model.kv_shape(), config.kv_types);
  const KvPoolPlan plan =
      plan_kv_pool(model.kv_shape(), config.kv_types, config.block_size, config.context_length, config.kv_memory_bytes,
                   config.max_seqs, model.config.kv_window(), config.max_batch_tokens);
  // One sequence at full context must always fit, or a lone request could never finish.
  TANDEM_CHECK_INPUT(plan.full_contexts >= 1,
                     "the KV pool holds {} blocks of {} tokens but one {}-token context needs {} "
                     "(raise --kv-memory or lower --ctx)",
                     plan.n_blocks, config.block_size, config.context_length, plan.blocks_per_context);
  // A host pool larger than the machine cannot be allocated, or would swap: refused here,
  // saying what asked for it, instead of failing later as a bare "out of memory".
  const int64_t pool_bytes = plan.n_blocks * plan.bytes_per_block, physical = physical_memory_bytes();
  TANDEM_CHECK_INPUT(config.device_forward || physical == 0 || pool_bytes <= physical,
                     "the KV pool of {} ({} blocks of {} tokens, {} bytes a token) is more than this "
                     "machine's memory ({}): lower --kv-memory, or --ctx and --parallel",
                     binary_size(pool_bytes), plan.n_blocks, config.block_size, plan.bytes_per_token,
                     binary_size(physical));
  return plan;
}

}  // namespace

Engine::Sequence::Sequence(const Tokenizer& tokenizer, const GenerationParams& params, int64_t vocab_size,
                           double draft_cost)
    : sampler(params.sampling, vocab_size),
      detokenizer(tokenizer, params.detokenize),
      speculation(params.speculation),
      ngram(proposer_for(params.speculation)),
      draft_length(params.speculation.draft_min, params.speculation.draft_max,
                   params.speculation.type == SpeculationType::Draft ? draft_cost : 0.0) {
  if (speculation.enabled()) request.draft.reserve(static_cast<size_t>(speculation.draft_max));
}

Engine::Sequence::~Sequence() {
  if (grammar && !grammar->done()) grammar->stop();
}

Engine::Engine(std::shared_ptr<const Model> model, const Tokenizer& tokenizer, EngineConfig config, ThreadPool& pool)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      config_(checked_config(std::move(config), model_->config)),
      kv_pool_(checked_kv_pool(*model_, config_)),
      // A model whose every layer has a sliding window lets sequences give back the blocks
      // behind it as they advance.
      blocks_(kv_pool_.n_blocks, config_.block_size, model_->config.kv_window()),
      device_forward_(config_.device_forward ? config_.device_forward(model_, config_, kv_pool_.n_blocks) : nullptr),
      // On a device the K/V bytes live in its pool: the host cache only maps slots.
      cache_(model_->kv_shape(), blocks_.n_blocks(), config_.block_size, config_.kv_types,
             device_forward_ ? KvStorage::None : KvStorage::Host),
      // With a device forward pass the engine's own runs no step (embeddings and KV imports,
      // which would, are refused there): scratch for one token, not max_batch_tokens.
      forward_(model_, device_forward_ ? 1 : config_.max_batch_tokens, pool, config_.context_length),
      scheduler_(SchedulerConfig{config_.max_seqs, config_.max_batch_tokens,
                                 model_->config.attention_depth_equivalent(), config_.priority_scheduling},
                 blocks_),
      rejection_(model_->config.vocab_size),
      logprobs_(tokenizer_, model_->config.vocab_size) {
  if (config_.draft_model) {
    TANDEM_CHECK_INPUT(config_.draft_model->config.vocab_size == model_->config.vocab_size,
                       "the draft model's vocabulary has {} tokens but the target's has {}",
                       config_.draft_model->config.vocab_size, model_->config.vocab_size);
    if (config_.draft_tokenizer) check_same_vocabulary(tokenizer_, *config_.draft_tokenizer);
    config_.draft_tokenizer = nullptr;  // compared once; the engine does not keep it
    draft_ = std::make_unique<DraftModel>(config_.draft_model, config_.context_length, config_.max_seqs,
                                          config_.max_batch_tokens, config_.block_size, kMaxDraftTokens,
                                          config_.kv_types, pool);
    draft_jobs_.reserve(static_cast<size_t>(config_.max_seqs));
    // Decode reads every weight once per token, so the ratio of the bytes read is the ratio of
    // the step times (what DraftLength weighs a proposal by).
    draft_cost_ = static_cast<double>(config_.draft_model->weight_bytes_per_token()) /
                  static_cast<double>(std::max<int64_t>(1, model_->weight_bytes_per_token()));
  }
  step_forward_ = device_forward_.get();
  update_stats();
}

Engine::~Engine() { stop(); }

void Engine::check_request(std::span<const int32_t> prompt, const GenerationParams& params) const {
  check_generation_request(prompt, params, model_->config.vocab_size, config_.context_length);
}

const ModelConfig& Engine::model_config() const { return model_->config; }

uint64_t Engine::submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) {
  return enqueue(make_sequence(std::move(prompt), std::move(params), std::move(on_event)));
}

std::unique_ptr<Engine::Sequence> Engine::make_sequence(std::vector<int32_t> prompt, GenerationParams params,
                                                        EventCallback on_event) {
  const int64_t vocab = model_->config.vocab_size;
  check_submission(prompt, params, vocab, config_.context_length, draft_ != nullptr);
  // Pooling reads the final residual and the final norm, which only the last pipeline stage has.
  TANDEM_CHECK_INPUT(params.pooling == Pooling::None || model_->holds_head(),
                     "embeddings are not served by a pipeline (--pipeline): the final hidden states stay on "
                     "the last stage");
  // The device forward pass returns logits only, and its K/V bytes stay on the device.
  TANDEM_CHECK_INPUT(params.pooling == Pooling::None || !on_device(),
                     "embeddings are not computed on the GPU yet (its forward pass returns logits, not hidden "
                     "states): serve with --device cpu for /v1/embeddings");
  TANDEM_CHECK_INPUT(!params.kv_export || !on_device(), "KV export: not from a device's KV pool");
  auto sequence = std::make_unique<Sequence>(tokenizer_, params, vocab, draft_cost_);  // validates sampling
  if (params.pooling != Pooling::None)
    sequence->pool = EmbeddingPool(params.pooling, model_->config.d_model, static_cast<int64_t>(prompt.size()));
  // The prompt gives the detokenizer its context (the leading-space rule); its text is not emitted.
  for (int32_t id : prompt) sequence->detokenizer.push(id);
  if (tokenizer_.vocab().eos_id >= 0 && !params.ignore_eos) sequence->end_tokens.push_back(tokenizer_.vocab().eos_id);
  sequence->end_tokens.insert(sequence->end_tokens.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  if (params.grammar) {
    std::call_once(trie_once_, [this] {
      token_trie_ = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(tokenizer_));
    });
    sequence->grammar = std::make_shared<grammar::MaskJob>(grammar::GrammarMatcher(params.grammar),
                                                           grammar::TokenMasker(token_trie_, sequence->end_tokens));
    sequence->masked_logits.resize(static_cast<size_t>(vocab));
    launch_mask(*sequence);  // the first mask is made while the prompt is computed
  }
  TANDEM_CHECK_INPUT(!params.kv_export || (params.pooling == Pooling::None && model_->config.kv_window() == 0),
                     "KV export: not with pooling, nor for a sliding-window model (it drops blocks)");
  sequence->request.prompt = std::move(prompt);
  sequence->request.params = std::move(params);
  sequence->request.times.arrival = RequestClock::now();
  sequence->on_event = std::move(on_event);
  return sequence;
}

uint64_t Engine::enqueue(std::unique_ptr<Sequence> sequence) {
  std::lock_guard lock(mutex_);
  TANDEM_CHECK_INPUT(!stopping_, "the engine is shutting down");
  const uint64_t id = next_id_++;
  sequence->request.id = id;
  incoming_.push_back(std::move(sequence));
  ++stats_.waiting;
  wake_.notify_one();
  return id;
}

void Engine::cancel(uint64_t request_id) {
  std::lock_guard lock(mutex_);
  cancels_.insert(request_id);
  wake_.notify_one();
}

void Engine::cancel_all() {
  std::lock_guard lock(mutex_);
  cancel_everything_ = true;
  wake_.notify_one();
}

void Engine::cancel_waiting() {
  std::lock_guard lock(mutex_);
  cancel_unadmitted_ = true;
  wake_.notify_one();
}

void Engine::intake() {
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::unordered_set<uint64_t> cancels;
  bool everything = false, unadmitted = false;
  {
    std::lock_guard lock(mutex_);
    incoming.swap(incoming_);
    cancels.swap(cancels_);
    everything = cancel_everything_;
    cancel_everything_ = false;
    unadmitted = cancel_unadmitted_;
    cancel_unadmitted_ = false;
    import_news_ = false;
  }
  for (std::unique_ptr<Sequence>& sequence : incoming) {
    Request* request = &sequence->request;
    if (sequence->import) {
      importing_.push_back(sequence.get());
    } else {
      scheduler_.add(request);
    }
    sequences_.emplace(request->id, std::move(sequence));
  }
  if (everything || unadmitted)  // a walk over every sequence only when asked, not on each step
    for (const auto& [id, sequence] : sequences_)
      if (everything || sequence->request.cached_prompt_tokens < 0) cancels.insert(id);
  for (uint64_t id : cancels) {
    const auto it = sequences_.find(id);
    if (it == sequences_.end()) continue;
    RequestEvent event;
    finish(*it->second, RequestState::Cancelled, FinishReason::Cancelled, event);
  }
  advance_imports();
}

void Engine::update_stats() {
  const BlockStats blocks = blocks_.stats();
  std::lock_guard lock(mutex_);
  stats_.running = static_cast<int64_t>(scheduler_.running().size());
  stats_.waiting = static_cast<int64_t>(scheduler_.waiting().size() + incoming_.size() + importing_.size());
  stats_.blocks = blocks;
  stats_.block_size = config_.block_size;
  stats_.bytes_per_block = cache_.bytes_per_block();
  stats_.steps = steps_;
  stats_.context_length = config_.context_length;
  stats_.kv_pool = kv_pool_;
  stats_.drafted_tokens = drafted_tokens_;
  stats_.accepted_tokens = accepted_tokens_;
  stats_.grammar_samples_awaited = samples_awaited_;
}

void Engine::set_profiler(Profiler* profiler) {
  profiler_ = profiler;
  forward_.set_profiler(profiler);
}

EngineStats Engine::stats() const {
  EngineStats stats;
  {
    std::lock_guard lock(mutex_);
    stats = stats_;
  }
  // Read here, not copied per step: a stop lands on the worker after its request has ended.
  stats.grammar_masks_off_thread = static_cast<int64_t>(mask_worker_.n_started());
  stats.grammar_masks_stopped = static_cast<int64_t>(mask_worker_.n_stopped());
  return stats;
}

void Engine::run_until_idle() {
  for (;;) {
    const bool ran = step();
    if (!ran && scheduler_.idle()) {
      std::lock_guard lock(mutex_);
      if (incoming_.empty() && cancels_.empty() && !cancel_everything_ && !cancel_unadmitted_) return;
    }
    if (!ran) std::this_thread::yield();  // what runs is waiting for a grammar mask
  }
}

void Engine::loop() {
  bool busy = false;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (!busy)
        wake_.wait(lock, [&] {
          return stopping_ || !incoming_.empty() || !cancels_.empty() || cancel_everything_ || cancel_unadmitted_ ||
                 import_news_;
        });
      if (stopping_) {
        cancel_everything_ = true;
        break;
      }
    }
    const bool ran = step();
    busy = !scheduler_.idle();
    // Work waits but nothing could run: the running sequences wait for their grammar masks
    // (the worker wakes the loop when one is done), or, which cannot happen with a pool that
    // fits one context, for blocks. Never spin on it.
    if (busy && !ran) {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(1), [&] {
        return mask_news_ || stopping_ || !incoming_.empty() || !cancels_.empty() || cancel_everything_ ||
               cancel_unadmitted_ || import_news_;
      });
      mask_news_ = false;
    }
  }
  intake();  // finishes every request left with a Cancelled event
}

void Engine::start() {
  TANDEM_ASSERT(!thread_.joinable());
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace tandem
