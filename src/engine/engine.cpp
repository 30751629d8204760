// Engine step loop (see engine.h). Each step: take in new requests and cancellations, plan,
// one forward pass over the planned chunks (each with its block table), then per sampling
// row: sample, detokenize, match stop strings, emit; a decode that carried proposed tokens
// (speculative decoding) keeps the proposals its rows agree with. Only the engine thread
// touches the scheduler, the cache and the sequences; the mutex guards the hand-over queues
// and stats.
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/machine_memory.h"
#include "engine/bad_words.h"
#include "engine/step_description.h"
#include "grammar/mask_worker.h"
#include "kernels/kernel_table.h"
#include "kv/kv_block_message.h"

namespace tandem {

namespace {

// Prompt lookup's proposer; requests that do not use it get a placeholder (their n-gram
// sizes were not checked).
NgramProposer proposer_for(const SpeculationParams& speculation) {
  if (speculation.type == SpeculationType::Ngram) return {speculation.ngram_min, speculation.ngram_max};
  return {1, 1};
}

}  // namespace

struct Engine::Sequence {
  // draft_cost: a draft model's proposal in target decode steps (Engine::draft_cost()).
  Sequence(const Tokenizer& tokenizer, const GenerationParams& params, int64_t vocab_size, double draft_cost)
      : sampler(params.sampling, vocab_size),
        detokenizer(tokenizer, params.detokenize),
        speculation(params.speculation),
        ngram(proposer_for(params.speculation)),
        draft_length(params.speculation.draft_min, params.speculation.draft_max,
                     params.speculation.type == SpeculationType::Draft ? draft_cost : 0.0) {
    if (speculation.enabled()) request.draft.reserve(static_cast<size_t>(speculation.draft_max));
  }

  Request request;
  Sampler sampler;
  StreamingDetokenizer detokenizer;
  std::string held;  // detokenized text not yet released: it could start a stop string
  EventCallback on_event;
  SpeculationParams speculation;
  NgramProposer ngram;
  DraftLength draft_length;
  int64_t drafted_tokens = 0;  // proposed tokens verified so far
  int64_t accepted_tokens = 0;
  std::vector<int32_t> end_tokens;  // EOS (unless ignore_eos) and stop_token_ids: what min_tokens holds back
  bool holding_end = false;         // whether the sampler suppresses end_tokens now
  std::vector<int32_t> suppressed;  // held end tokens and bad-word bans, for the sampler (bad_words only)
  // Stops its grammar's mask computation if one is in flight: nothing will read it.
  ~Sequence() {
    if (grammar && !grammar->done()) grammar->stop();
  }

  // Constrained decoding (params.grammar): where the output stands in the grammar (advanced
  // only by emitted tokens, so rejected proposals never touch it) and the masker with its
  // cache of masks by grammar state, in a job whose next mask is computed on the mask worker
  // while the forward pass runs (Engine::launch_mask); scratch for the masked logits; the
  // logits of a sample waiting for its mask (Request::awaiting_sample).
  std::shared_ptr<grammar::MaskJob> grammar;
  std::vector<float> masked_logits;
  std::vector<float> awaiting_logits;
  std::string grammar_error;  // why the grammar ended it (a matching limit, no token allowed)
  // Embedding requests (params.pooling): the running sum (mean) or the last row (last) of
  // final-normed hidden states, in double, added in position order so that chunking and
  // batching never change it; positions [0, pooled_positions) are in it.
  std::vector<double> pooled;
  int64_t pooled_positions = 0;
  std::vector<float> normed_row;  // [d_model] scratch
  // Imported (submit_imported): the hand-over, the first block asked for (-1: not asked yet),
  // the arrived block messages by block index (applied once all are here), and the
  // transfer's bytes and start.
  std::shared_ptr<KvImport> import;
  int64_t import_first = -1;
  std::vector<std::vector<uint8_t>> import_messages;
  int64_t kv_transfer_bytes = 0;
  RequestClock::time_point import_asked;
  double kv_transfer_ms = 0.0;
  int64_t exported_blocks = 0;  // prefill-only: blocks handed to the sink so far
};

namespace {

double ms_between(RequestClock::time_point from, RequestClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that
// much must be held back, since the next token could complete the stop string.
size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(text.size(), stop.size() - 1); n > longest; --n) {
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

// Earliest position of any stop string in `text`, or npos; *length: the length of the one
// found there (the longest, when several start at it).
size_t find_stop(const std::string& text, const std::vector<std::string>& stops, size_t* length) {
  size_t first = std::string::npos;
  for (const std::string& stop : stops) {
    const size_t at = text.find(stop);
    if (at < first || (at == first && at != std::string::npos && stop.size() > *length)) {
      first = at;
      *length = stop.size();
    }
  }
  return first;
}

}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, const Tokenizer& tokenizer, EngineConfig config, ThreadPool& pool)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      config_([&] {
        const int64_t model_context = model_->config.context_length;
        if (config.context_length <= 0 || config.context_length > model_context) config.context_length = model_context;
        TANDEM_CHECK_INPUT(config.max_seqs >= 1, "--parallel must be at least 1");
        TANDEM_CHECK_INPUT(config.block_size >= 1 && config.block_size <= 4096, "--kv-block must be in 1..4096");
        config.max_batch_tokens = std::max<int64_t>(config.max_batch_tokens, config.max_seqs);
        return config;
      }()),
      kv_pool_([&] {
        // A pipeline stage's model caches its own layers only (Model::kv_shape): --kv-memory buys
        // more blocks of fewer layers.
        check_kv_types(model_->kv_shape(), config_.kv_types);
        const KvPoolPlan plan = plan_kv_pool(model_->kv_shape(), config_.kv_types, config_.block_size,
                                             config_.context_length, config_.kv_memory_bytes, config_.max_seqs,
                                             model_->config.kv_window(), config_.max_batch_tokens);
        // One sequence at full context must always fit, or a lone request could never finish.
        TANDEM_CHECK_INPUT(plan.full_contexts >= 1,
                           "the KV pool holds {} blocks of {} tokens but one {}-token context needs {} "
                           "(raise --kv-memory or lower --ctx)",
                           plan.n_blocks, config_.block_size, config_.context_length, plan.blocks_per_context);
        // A host pool larger than the machine cannot be allocated, or would swap: refused here,
        // saying what asked for it, instead of failing later as a bare "out of memory".
        const int64_t pool_bytes = plan.n_blocks * plan.bytes_per_block, physical = physical_memory_bytes();
        TANDEM_CHECK_INPUT(config_.device_forward || physical == 0 || pool_bytes <= physical,
                           "the KV pool of {} ({} blocks of {} tokens, {} bytes a token) is more than this "
                           "machine's memory ({}): lower --kv-memory, or --ctx and --parallel",
                           binary_size(pool_bytes), plan.n_blocks, config_.block_size, plan.bytes_per_token,
                           binary_size(physical));
        return plan;
      }()),
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
      logprob_work_(static_cast<size_t>(model_->config.vocab_size)),
      logprob_ids_(static_cast<size_t>(model_->config.vocab_size)) {
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

void check_generation_request(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                              int64_t context_length) {
  TANDEM_CHECK_INPUT(!prompt.empty(), "the prompt is empty");
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= context_length,
                     "the prompt has {} tokens but the context is {} tokens", prompt.size(), context_length);
  for (int32_t id : prompt) TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "token id {} is outside the vocabulary", id);
  TANDEM_CHECK_INPUT(params.top_logprobs <= 20, "top_logprobs must be at most 20");
  for (int32_t id : params.stop_token_ids)
    TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "stop token id {} is outside the vocabulary", id);
  TANDEM_CHECK_INPUT(params.min_tokens >= 0 && params.min_tokens <= params.max_tokens,
                     "min_tokens must be between 0 and max_tokens ({}), not {}", params.max_tokens, params.min_tokens);
  for (const std::string& stop : params.stop) TANDEM_CHECK_INPUT(!stop.empty(), "a stop string is empty");
  for (const std::vector<int32_t>& word : params.bad_words) {
    TANDEM_CHECK_INPUT(!word.empty(), "a bad word has no tokens");
    for (int32_t id : word)
      TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "bad word token {} is outside the vocabulary", id);
  }
}

void check_submission(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                      int64_t context_length, bool has_draft_model) {
  TANDEM_CHECK_INPUT(params.max_tokens >= 1, "max_tokens must be at least 1");
  check_generation_request(prompt, params, vocab, context_length);
  check_speculation(params.speculation);
  TANDEM_CHECK_INPUT(params.speculation.type != SpeculationType::Draft || has_draft_model,
                     "speculative decoding with a draft model: no draft model is loaded (--draft-model)");
  TANDEM_CHECK_INPUT(params.pooling == Pooling::None || (!params.grammar && !params.speculation.enabled()),
                     "an embedding request neither samples nor speculates: no grammar, no speculation");
}

void Engine::check_request(std::span<const int32_t> prompt, const GenerationParams& params) const {
  check_generation_request(prompt, params, model_->config.vocab_size, config_.context_length);
}

const ModelConfig& Engine::model_config() const { return model_->config; }

uint64_t Engine::submit(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event) {
  return enqueue(make_sequence(std::move(prompt), std::move(params), std::move(on_event)));
}

uint64_t Engine::submit_imported(std::vector<int32_t> prompt, GenerationParams params, EventCallback on_event,
                                 std::shared_ptr<KvImport> kv_import) {
  TANDEM_CHECK_INPUT(kv_import != nullptr, "an imported request needs its import");
  TANDEM_CHECK_INPUT(!on_device(), "KV import: not into a device's KV pool (the blocks are written on the host)");
  TANDEM_CHECK_INPUT(model_->config.kv_window() == 0, "KV import: a sliding-window model drops blocks; not supported");
  TANDEM_CHECK_INPUT(params.pooling == Pooling::None && !params.kv_export,
                     "an imported request generates: no pooling, no export");
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  // The positions from n_blocks * block_size on (at least the last one) are computed here.
  TANDEM_CHECK_INPUT(kv_import->n_blocks() >= 0 && kv_import->n_blocks() * config_.block_size < n_prompt,
                     "KV import of {} blocks of {} tokens for a {}-token prompt: the last position must be computed "
                     "here",
                     kv_import->n_blocks(), config_.block_size, n_prompt);
  std::unique_ptr<Sequence> sequence = make_sequence(std::move(prompt), std::move(params), std::move(on_event));
  // Each arriving block wakes the engine's loop, which applies what is complete.
  kv_import->set_wake([this] { wake_for_import(); });
  sequence->import = std::move(kv_import);
  return enqueue(std::move(sequence));
}

void Engine::wake_for_import() {
  std::lock_guard lock(mutex_);
  import_news_ = true;
  wake_.notify_one();
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
  if (params.pooling != Pooling::None) {
    const size_t rows = params.pooling == Pooling::Tokens ? prompt.size() : 1;  // [rows, d_model]
    sequence->pooled.assign(rows * static_cast<size_t>(model_->config.d_model), 0.0);
    sequence->normed_row.resize(static_cast<size_t>(model_->config.d_model));
  }
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

void Engine::advance_imports() {
  const int32_t block_size = config_.block_size;
  std::vector<Sequence*> still_importing;
  std::vector<std::pair<Sequence*, std::string>> failed;  // and why
  for (Sequence* sequence : importing_) {
    Request& request = sequence->request;
    KvImport& import = *sequence->import;
    const int64_t n_blocks = import.n_blocks();
    if (sequence->import_first < 0) {
      // Blocks this engine has cached are not asked for. Nothing is held while the rest
      // travel: a hold would take pool blocks from running sequences for as long as the
      // transfer takes, and holds of several imports could leave too few to admit any of them.
      sequence->import_first = blocks_.cached_prefix_blocks(request.prompt, n_blocks);
      sequence->import_messages.resize(static_cast<size_t>(n_blocks));
      sequence->import_asked = RequestClock::now();
      import.ready(sequence->import_first);
    }
    KvImport::Arrived arrived = import.take();
    std::string failure = arrived.failure.value_or("");
    for (std::vector<uint8_t>& message : arrived.messages) {
      if (!failure.empty()) break;
      try {  // checked now, applied once all are here
        const KvBlockInfo info = read_kv_block_info(message, cache_);
        const int64_t b = info.block_index;
        TANDEM_CHECK_INPUT(b >= sequence->import_first && b < n_blocks && info.n_filled() == block_size,
                           "KV import: block {} is not one asked for ({}..{}, full)", b, sequence->import_first,
                           n_blocks - 1);
        TANDEM_CHECK_INPUT(std::equal(info.tokens.begin(), info.tokens.end(),
                                      request.prompt.begin() + static_cast<std::ptrdiff_t>(b * block_size)),
                           "KV import: block {} carries other tokens than the prompt's", b);
        sequence->import_messages[static_cast<size_t>(b)] = std::move(message);
      } catch (const InputError& error) {
        failure = error.what();
      }
    }
    const auto here = [&](int64_t b) { return !sequence->import_messages[static_cast<size_t>(b)].empty(); };
    bool all_here = true;
    for (int64_t b = sequence->import_first; b < n_blocks; ++b) all_here = all_here && here(b);
    if (failure.empty() && arrived.complete && !all_here) failure = "KV import: the prefill side sent too few blocks";
    if (!failure.empty()) {
      failed.emplace_back(sequence, std::move(failure));
      continue;
    }
    if (!arrived.complete) {
      still_importing.push_back(sequence);
      continue;
    }
    // Every block is here: write them into blocks of this pool and publish them, so that the
    // request's admission reuses them as any cached prefix. Blocks for the head and the one
    // after it (assign() never reuses the last token's block); -1: the pool is short now.
    SequenceBlocks head;
    const int64_t reused = blocks_.assign(
        head, std::span<const int32_t>(request.prompt.data(), static_cast<size_t>(n_blocks * block_size + 1)));
    if (reused < 0) {
      still_importing.push_back(sequence);
      continue;
    }
    // Cached blocks the transfer skipped may have been evicted since: the K/V after the first
    // such gap cannot be published (it would sit behind a prefix that is not there); the
    // request then computes from the gap itself.
    const int64_t cached_now = reused / block_size;
    const int64_t usable = cached_now >= sequence->import_first ? n_blocks : cached_now;
    for (int64_t b = cached_now; b < usable; ++b) {
      const std::vector<uint8_t>& message = sequence->import_messages[static_cast<size_t>(b)];
      apply_kv_block(message, cache_, head.table[static_cast<size_t>(b)]);
      sequence->kv_transfer_bytes += static_cast<int64_t>(message.size());
    }
    blocks_.publish_computed(head, request.prompt, usable * block_size);
    blocks_.release(head);
    sequence->import_messages.clear();
    sequence->kv_transfer_ms = ms_between(sequence->import_asked, RequestClock::now());
    scheduler_.add(&request);
  }
  importing_ = std::move(still_importing);
  for (auto& [sequence, why] : failed) {
    RequestEvent event;
    event.error = std::move(why);
    finish(*sequence, RequestState::Finished, FinishReason::Error, event);
  }
}

int64_t Engine::cached_tokens_of(const Sequence& sequence) const {
  const int64_t reused = std::max<int64_t>(0, sequence.request.cached_prompt_tokens);
  if (!sequence.import || sequence.import_first < 0) return reused;
  // The blocks another process computed for this request are reused as if cached, but they
  // were not in this engine's cache: only those it had before the import count.
  const int64_t imported = (sequence.import->n_blocks() - sequence.import_first) * config_.block_size;
  return std::max<int64_t>(0, reused - imported);
}

void Engine::export_blocks(Sequence& sequence) {
  const Request& request = sequence.request;
  KvBlockSink& sink = *request.params.kv_export;
  const int32_t block_size = config_.block_size;
  const int64_t n_full = std::min(request.n_computed, static_cast<int64_t>(request.prompt.size())) / block_size;
  sequence.exported_blocks = std::max(sequence.exported_blocks, request.params.kv_export_first_block);
  for (int64_t b = sequence.exported_blocks; b < n_full; ++b) {
    const uint64_t parent = b == 0 ? BlockAllocator::kRootHash : request.blocks.hashes[static_cast<size_t>(b - 1)];
    sink.block_computed(cache_, request.blocks.table[static_cast<size_t>(b)], b, parent,
                        std::span<const int32_t>(request.prompt)
                            .subspan(static_cast<size_t>(b * block_size), static_cast<size_t>(block_size)));
  }
  sequence.exported_blocks = std::max(sequence.exported_blocks, n_full);
}

void Engine::finish_prefill_only(Sequence& sequence) {
  export_blocks(sequence);
  RequestEvent event;
  sequence.request.times.first_token = sequence.request.times.last_token = RequestClock::now();
  finish(sequence, RequestState::Finished, FinishReason::Length, event);
}

void Engine::propose_drafts() {
  draft_jobs_.clear();
  for (Request* request : scheduler_.running()) {
    if (request->state != RequestState::Decoding) continue;
    Sequence& sequence = *sequences_.at(request->id);
    if (!sequence.speculation.enabled() || request->awaiting_sample) continue;
    // Verifying proposals needs this step's mask at once: none while it is being computed.
    if (sequence.grammar && !sequence.grammar->done()) {
      request->draft.clear();
      continue;
    }
    // Every kept proposal is an output token, and the step adds one more after them: never
    // propose past max_tokens or past the context (the last proposal's position).
    const auto n_tokens = static_cast<int64_t>(request->tokens.size());
    const int64_t room = std::min(request->params.max_tokens - static_cast<int64_t>(request->generated.size()) - 1,
                                  config_.context_length - n_tokens);
    const auto length = static_cast<int32_t>(std::min<int64_t>(sequence.draft_length.next(), room));
    if (sequence.speculation.type == SpeculationType::Ngram) {
      sequence.ngram.propose(request->tokens, length, request->draft);
    } else if (length > 0) {
      draft_jobs_.push_back({request->id, request->tokens, &request->params.sampling, length, &request->draft});
    } else {
      request->draft.clear();
    }
  }
  // Every draft-model proposal of the step in one batched pass per proposed token.
  if (!draft_jobs_.empty()) draft_->propose(draft_jobs_);
  draft_jobs_.clear();
}

bool Engine::step() {
  intake();
  sample_awaiting();
  propose_drafts();
  const StepPlan plan = scheduler_.schedule();
  if (plan.empty()) {
    update_stats();
    return false;
  }
  if (step_logger_)
    if (const std::string line = describe_step(plan, steps_); !line.empty()) step_logger_(line);

  batch_.clear();
  chunk_first_rows_.clear();
  bool decode_only = true;  // every chunk one known token (plus proposals): a decode step for the profile
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& request = *chunk.request;
    // The scheduler grew the block table to cover the chunk; the forward pass reads it.
    const int32_t seq = batch_.add_sequence(request.blocks.table);
    chunk_first_rows_.push_back(batch_.n_tokens());
    const int64_t n_known = chunk.n_tokens - chunk.n_draft;
    decode_only = decode_only && n_known == 1;
    for (int64_t i = 0; i < n_known; ++i) {
      const int64_t position = chunk.start + i;
      batch_.add(request.tokens[static_cast<size_t>(position)], static_cast<int32_t>(position), seq,
                 (chunk.samples && i == n_known - 1) || chunk.n_draft > 0);
    }
    if (chunk.n_draft == 0) continue;
    // Proposed tokens go where the sequence's own next tokens would: blocks no other
    // sequence or the prefix cache can see, so a rejected proposal harms nothing.
    TANDEM_ASSERT(blocks_.writable_from(request.blocks, chunk.start + n_known));
    for (int64_t i = 0; i < chunk.n_draft; ++i)
      batch_.add(request.draft[static_cast<size_t>(i)], static_cast<int32_t>(chunk.start + n_known + i), seq, true);
  }
  ProfileStep profile_step(profiler_, decode_only ? Phase::Decode : Phase::Prefill, batch_.n_tokens());
  const std::span<const float> logits =
      step_forward_ != nullptr ? step_forward_->run(forward_, batch_, cache_) : forward_.run(batch_, cache_);
  // Before sampling, which may finish (and free) a request.
  if (profiler_ != nullptr && profiler_->tracing()) trace_requests(plan, profiler_->step_start_ns());
  scheduler_.complete(plan);
  for (const ScheduledChunk& chunk : plan.chunks)
    if (chunk.request->params.kv_export && !chunk.samples) export_blocks(*sequences_.at(chunk.request->id));
  if (draft_)
    for (const Request* request : plan.preempted) draft_->remove(request->id);  // recomputed when it returns

  // Embedding requests pool their rows of the pass; the one whose prompt is complete ends.
  const int64_t d_model = model_->config.d_model;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const ScheduledChunk& chunk = plan.chunks[c];
    if (chunk.request->params.pooling == Pooling::None) continue;
    Sequence& sequence = *sequences_.at(chunk.request->id);
    pool_rows(sequence, chunk.start,
              forward_.final_residual().subspan(static_cast<size_t>(chunk_first_rows_[c] * d_model),
                                                static_cast<size_t>(chunk.n_tokens * d_model)));
  }
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.samples) continue;
    if (chunk.request->params.pooling != Pooling::None) {
      finish_embedding(*sequences_.at(chunk.request->id));  // its logits row is not used
      row += 1;
      continue;
    }
    if (chunk.request->params.kv_export) {
      finish_prefill_only(*sequences_.at(chunk.request->id));  // nor is a prefill-only request's
      row += 1;
      continue;
    }
    ProfileOp sampling_op(profiler_, OpRole::Sampling, -1, [&] {
      return elementwise_cost(static_cast<int64_t>(vocab) * (1 + chunk.n_draft), 0,
                              2 * static_cast<int64_t>(vocab) * (1 + chunk.n_draft));
    });
    Sequence& sequence = *sequences_.at(chunk.request->id);
    if (chunk.n_draft == 0) {
      process_sample(sequence, logits.subspan(row * vocab, vocab));
    } else {
      verify_draft(sequence, chunk.n_draft,
                   logits.subspan(row * vocab, static_cast<size_t>(1 + chunk.n_draft) * vocab));
    }
    row += static_cast<size_t>(1 + chunk.n_draft);
  }
  profile_step.end();
  ++steps_;
  {
    std::lock_guard lock(mutex_);
    stats_.preemptions += static_cast<int64_t>(plan.preempted.size());
  }
  update_stats();
  return true;
}

void Engine::pool_rows(Sequence& sequence, int64_t first_position, std::span<const float> residual_rows) {
  const ModelConfig& c = model_->config;
  const int64_t d = c.d_model;
  const auto n_rows = static_cast<int64_t>(residual_rows.size()) / d;
  const int64_t n_prompt = static_cast<int64_t>(sequence.request.prompt.size());
  const RmsnormFn rmsnorm = kernel_table().rmsnorm;  // the forward pass's own final norm
  const bool last_only = sequence.request.params.pooling == Pooling::Last;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t position = first_position + r;
    // Recomputed after a preemption (already in the sum), or not a prompt position.
    if (position < sequence.pooled_positions || position >= n_prompt) continue;
    // Last pooling normalises only the position it keeps.
    if (last_only && position != n_prompt - 1) continue;
    // A Mean request never reuses cached rows (Scheduler::admit), so it sees every position;
    // a Last request may start past a cached prefix.
    TANDEM_ASSERT(position == sequence.pooled_positions || last_only);
    rmsnorm(residual_rows.data() + r * d, model_->weights.output_norm.f32(), d, c.rms_norm_eps,
            sequence.normed_row.data());
    if (sequence.request.params.pooling == Pooling::Mean) {
      for (int64_t i = 0; i < d; ++i)
        sequence.pooled[static_cast<size_t>(i)] += sequence.normed_row[static_cast<size_t>(i)];
    } else if (sequence.request.params.pooling == Pooling::Tokens) {
      std::copy(sequence.normed_row.begin(), sequence.normed_row.end(),
                sequence.pooled.begin() + static_cast<std::ptrdiff_t>(position * d));
    } else {
      std::copy(sequence.normed_row.begin(), sequence.normed_row.end(), sequence.pooled.begin());
    }
    sequence.pooled_positions = position + 1;
  }
}

void Engine::finish_embedding(Sequence& sequence) {
  Request& request = sequence.request;
  const auto n_prompt = static_cast<int64_t>(request.prompt.size());
  TANDEM_ASSERT(sequence.pooled_positions == n_prompt);
  const double scale = request.params.pooling == Pooling::Mean ? 1.0 / static_cast<double>(n_prompt) : 1.0;
  RequestEvent event;
  event.embedding.resize(sequence.pooled.size());
  for (size_t i = 0; i < sequence.pooled.size(); ++i)
    event.embedding[i] = static_cast<float>(sequence.pooled[i] * scale);
  request.times.first_token = request.times.last_token = RequestClock::now();
  finish(sequence, RequestState::Finished, FinishReason::EndOfSequence, event);
}

void Engine::hold_end_tokens(Sequence& sequence) {
  const Request& request = sequence.request;
  const bool hold = static_cast<int64_t>(request.generated.size()) < request.params.min_tokens;
  if (!request.params.bad_words.empty()) {  // what is banned changes with every token
    sequence.suppressed.clear();
    if (hold) sequence.suppressed = sequence.end_tokens;
    append_bad_word_bans(request.params.bad_words, request.generated, sequence.suppressed);
    sequence.sampler.set_suppressed(sequence.suppressed);
    sequence.holding_end = hold;
    return;
  }
  if (hold == sequence.holding_end) return;
  sequence.sampler.set_suppressed(hold ? std::span<const int32_t>(sequence.end_tokens) : std::span<const int32_t>());
  sequence.holding_end = hold;
}

bool Engine::process_sample(Sequence& sequence, std::span<const float> logits) {
  if (sequence.grammar && !sequence.grammar->done()) {
    // Its mask is still being computed: the sample waits (these logits kept), the step and
    // the other sequences do not. The same logits and mask later give the same token.
    Request& request = sequence.request;
    sequence.awaiting_logits.assign(logits.begin(), logits.end());
    request.awaiting_sample = true;
    if (std::find(awaiting_.begin(), awaiting_.end(), request.id) == awaiting_.end()) awaiting_.push_back(request.id);
    ++samples_awaited_;
    return false;
  }
  hold_end_tokens(sequence);
  const std::span<const float> allowed = constrain(sequence, logits);
  if (allowed.empty()) {
    end_unconstrainable(sequence);
    return true;
  }
  const int32_t token = sequence.sampler.sample(allowed, sequence.request.tokens);
  if (emit_token(sequence, token, logits)) return true;
  if (sequence.grammar) launch_mask(sequence);
  return false;
}

void Engine::sample_awaiting() {
  std::erase_if(awaiting_, [&](uint64_t id) {
    const auto it = sequences_.find(id);
    if (it == sequences_.end()) return true;  // ended (cancelled) while it waited
    Sequence& sequence = *it->second;
    if (!sequence.request.awaiting_sample) {
      sequence.awaiting_logits.clear();  // preempted: its recompute samples afresh
      return true;
    }
    if (!sequence.grammar->done()) return false;
    sequence.request.awaiting_sample = false;
    const std::vector<float> logits = std::move(sequence.awaiting_logits);
    process_sample(sequence, logits);  // may end (and destroy) the sequence
    return true;
  });
}

void Engine::launch_mask(Sequence& sequence) {
  grammar::MaskJob& job = *sequence.grammar;
  // A mask in the masker's cache is a copy: made here, without the hand-over's latency.
  if (job.masker.cached(job.matcher)) {
    job.run();
    return;
  }
  mask_worker_.submit(sequence.grammar);
}

std::span<const float> Engine::constrain(Sequence& sequence, std::span<const float> logits) {
  if (!sequence.grammar) return logits;
  // The mask for the current grammar state is done (computed on the mask worker, or here for
  // a speculative chunk's later rows); past a matching limit this request ends, others go on.
  const grammar::MaskJob& job = *sequence.grammar;
  TANDEM_ASSERT(job.done());
  switch (job.outcome()) {
    case grammar::MaskJob::Outcome::Allowed: break;
    case grammar::MaskJob::Outcome::Error: sequence.grammar_error = job.error(); return {};
    case grammar::MaskJob::Outcome::NothingAllowed:
    case grammar::MaskJob::Outcome::Stopped:  // only a destroyed sequence's job is stopped
      sequence.grammar_error =
          "grammar: no token can continue the output here (the vocabulary cannot spell what the grammar needs next)";
      return {};
  }
  std::copy(logits.begin(), logits.end(), sequence.masked_logits.begin());
  grammar::apply_token_mask(job.mask, sequence.masked_logits);
  return sequence.masked_logits;
}

void Engine::end_unconstrainable(Sequence& sequence) {
  RequestEvent event;
  event.text = std::move(sequence.held) + sequence.detokenizer.finish();
  sequence.held.clear();
  event.error = std::move(sequence.grammar_error);
  event.error_from_request = true;
  finish(sequence, RequestState::Finished, FinishReason::Error, event);
}

void Engine::verify_draft(Sequence& sequence, int64_t n_draft, std::span<const float> rows) {
  // Row i holds the target's logits after the pending token and the first i proposals.
  // Sampling row i as plain decoding would and keeping proposal i when the draw equals it
  // is the speculative acceptance rule for a deterministic proposer (q a point mass on the
  // proposal): kept with probability p(x), and on rejection the draw is p without x,
  // renormalised. Each output token takes the same draw from the same seeded stream, on
  // logits equal bit for bit to a one-token step's (batch invariance), so the output is
  // token-identical to plain decoding, greedy or sampled.
  Request& request = sequence.request;
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  sequence.drafted_tokens += n_draft;
  drafted_tokens_ += n_draft;
  int64_t n_accepted = 0;
  const bool from_model = sequence.speculation.type == SpeculationType::Draft;
  for (int64_t i = 0; i <= n_draft; ++i) {
    const std::span<const float> logits = rows.subspan(static_cast<size_t>(i) * vocab, vocab);
    int32_t token = 0;
    bool kept = false;
    hold_end_tokens(sequence);  // row i follows i kept proposals, each already emitted
    // The grammar's state follows the emitted tokens only: a proposal it forbids has p = 0
    // under the mask and is rejected like any other the target disagrees with. Row 0's mask
    // was made on the mask worker (proposals wait for it: propose_drafts); a later row's
    // grammar state is known only now, so its mask is made here, within kMaxStepWork.
    if (i > 0 && sequence.grammar) sequence.grammar->run();
    const std::span<const float> allowed = constrain(sequence, logits);
    if (allowed.empty()) {
      end_unconstrainable(sequence);
      return;
    }
    if (!from_model) {
      token = sequence.sampler.sample(allowed, request.tokens);
      kept = i < n_draft && token == request.draft[static_cast<size_t>(i)];
    } else {
      // A draft model's proposal came from its distribution q: the general rule, min(1, p/q)
      // then the residual; after the last proposal a bonus token from p.
      const TokenDistribution p = sequence.sampler.probabilities(allowed, request.tokens);
      if (i < n_draft) {
        const double u_accept = sequence.sampler.next_uniform(), u_resample = sequence.sampler.next_uniform();
        const SpeculativeVerdict verdict =
            rejection_.verify(p, draft_->q(request.id, static_cast<int32_t>(i)), request.draft[static_cast<size_t>(i)],
                              u_accept, u_resample);
        token = verdict.token;
        kept = verdict.accepted;
      } else {
        token = Sampler::draw(p, sequence.sampler.next_uniform());
      }
    }
    if (kept) {
      ++sequence.accepted_tokens;
      ++accepted_tokens_;
    }
    if (emit_token(sequence, token, logits)) return;  // finished: its blocks are already released
    if (!kept) break;
    ++n_accepted;
  }
  sequence.draft_length.record(static_cast<int32_t>(n_draft), static_cast<int32_t>(n_accepted));
  scheduler_.settle_draft(&request, n_accepted);
  if (from_model) draft_->rollback(request.id, request.n_computed);
  if (sequence.grammar) launch_mask(sequence);
}

bool Engine::emit_token(Sequence& sequence, int32_t token, std::span<const float> logits) {
  Request& request = sequence.request;
  const GenerationParams& params = request.params;
  RequestEvent event;
  if (params.top_logprobs >= 0) event.logprobs.push_back(logprobs_of(logits, token, params.top_logprobs));

  const RequestClock::time_point now = RequestClock::now();
  if (request.generated.empty()) {
    request.times.first_token = now;
  } else {
    request.times.itl_ms.push_back(ms_between(request.times.last_token, now));
  }
  request.times.last_token = now;
  request.append_token(token);
  event.tokens.push_back(token);

  FinishReason reason = FinishReason::None;
  if (std::find(sequence.end_tokens.begin(), sequence.end_tokens.end(), token) != sequence.end_tokens.end()) {
    reason = FinishReason::EndOfSequence;
    if (params.include_stop_str_in_output) sequence.held += sequence.detokenizer.push(token);
  } else {
    sequence.held += sequence.detokenizer.push(token);
    if (sequence.grammar) {
      // Sampled under the mask, so the grammar takes it; a complete grammar ends the request
      // here rather than spend a step on the only token left (EOS, or none under ignore_eos).
      // The caller launches the next mask (launch_mask) once the token is emitted.
      grammar::MaskJob& job = *sequence.grammar;
      bool taken = false;
      try {
        taken = job.masker.accept_token(job.matcher, token);
        if (!taken) event.error = "grammar: the sampled token was refused";
      } catch (const InputError& error) {
        event.error = error.what();
      }
      if (!taken) {
        reason = FinishReason::Error;
        event.error_from_request = true;
      } else if (job.matcher.must_end()) {
        reason = FinishReason::EndOfSequence;
      }
    }
  }
  if (reason == FinishReason::None && static_cast<int64_t>(request.generated.size()) >= params.max_tokens)
    reason = FinishReason::Length;
  // The newest token would sit at position tokens.size() - 1; past the context it cannot be fed.
  if (reason == FinishReason::None && static_cast<int64_t>(request.tokens.size()) > config_.context_length)
    reason = FinishReason::ContextLimit;
  if (reason != FinishReason::None) sequence.held += sequence.detokenizer.finish();

  // Stop strings count from min_tokens on (vLLM's rule): before that the text is released.
  const std::vector<std::string> no_stops;
  const std::vector<std::string>& stops =
      static_cast<int64_t>(request.generated.size()) < params.min_tokens ? no_stops : params.stop;
  size_t stop_length = 0;
  const size_t stop_at = find_stop(sequence.held, stops, &stop_length);
  if (stop_at != std::string::npos) {
    event.text = sequence.held.substr(0, stop_at + (params.include_stop_str_in_output ? stop_length : 0));
    event.stop_string = sequence.held.substr(stop_at, stop_length);
    sequence.held.clear();
    reason = FinishReason::StopString;
  } else if (reason != FinishReason::None) {
    event.text = std::move(sequence.held);
    sequence.held.clear();
  } else {
    const size_t keep = stop_prefix_suffix(sequence.held, stops);
    event.text = sequence.held.substr(0, sequence.held.size() - keep);
    sequence.held.erase(0, sequence.held.size() - keep);
  }

  if (reason != FinishReason::None) {
    finish(sequence, RequestState::Finished, reason, event);  // emits and destroys `sequence`
    return true;
  }
  event.request_id = request.id;
  event.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  event.cached_tokens = cached_tokens_of(sequence);
  event.completion_tokens = static_cast<int64_t>(request.generated.size());
  event.drafted_tokens = sequence.drafted_tokens;
  event.accepted_tokens = sequence.accepted_tokens;
  if (sequence.on_event) sequence.on_event(std::move(event));
  return false;
}

void Engine::finish(Sequence& sequence, RequestState state, FinishReason reason, RequestEvent& event) {
  Request& request = sequence.request;
  event.kv_bytes = request.blocks.n_held() * cache_.bytes_per_block();
  scheduler_.remove(&request, state);
  if (sequence.import) {  // out of the import list
    sequence.import->set_wake(nullptr);
    std::erase(importing_, &sequence);
    event.kv_transfer_bytes = sequence.kv_transfer_bytes;
    event.kv_transfer_ms = sequence.kv_transfer_ms;
  }
  if (draft_) draft_->remove(request.id);
  request.finish_reason = reason;
  request.times.finished = RequestClock::now();
  const RequestTimes& times = request.times;
  event.request_id = request.id;
  event.finished = true;
  event.finish_reason = reason;
  event.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  event.cached_tokens = cached_tokens_of(sequence);
  event.completion_tokens = static_cast<int64_t>(request.generated.size());
  const bool was_admitted = request.cached_prompt_tokens >= 0;
  event.admitted = was_admitted;
  event.queue_ms = ms_between(times.arrival, was_admitted ? times.admitted : times.finished);
  event.ttft_ms = request.generated.empty() ? 0.0 : ms_between(times.arrival, times.first_token);
  if (was_admitted && !request.generated.empty()) {
    event.prefill_ms = ms_between(times.admitted, times.first_token);
    event.decode_ms = ms_between(times.first_token, times.last_token);
  }
  event.preemptions = request.n_preemptions;
  event.e2e_ms = ms_between(times.arrival, times.finished);
  event.itl_ms = times.itl_ms;
  event.drafted_tokens = sequence.drafted_tokens;
  event.accepted_tokens = sequence.accepted_tokens;
  EventCallback on_event = std::move(sequence.on_event);
  sequences_.erase(request.id);  // `sequence` is gone from here on
  if (on_event) on_event(std::move(event));
}

TokenLogprob Engine::logprobs_of(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  // Log-softmax of the model's own logits (before temperature and truncation), as OpenAI reports.
  const auto vocab = static_cast<int32_t>(logits.size());
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    if (!std::isnan(x)) max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) {
    const float x = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    logprob_work_[static_cast<size_t>(i)] = x;
    sum += std::exp(static_cast<double>(x - max_logit));
  }
  const auto log_z = static_cast<float>(static_cast<double>(max_logit) + std::log(sum));
  const auto entry = [&](int32_t id) {
    return TopLogprob{id, tokenizer_.token_bytes(id), logprob_work_[static_cast<size_t>(id)] - log_z};
  };
  TokenLogprob result;
  result.chosen = entry(chosen);
  const int32_t n = std::min(top_n, vocab);
  for (int32_t i = 0; i < vocab; ++i) logprob_ids_[static_cast<size_t>(i)] = i;
  std::partial_sort(logprob_ids_.begin(), logprob_ids_.begin() + n, logprob_ids_.end(), [&](int32_t a, int32_t b) {
    const float la = logprob_work_[static_cast<size_t>(a)], lb = logprob_work_[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  for (int32_t i = 0; i < n; ++i) result.top.push_back(entry(logprob_ids_[static_cast<size_t>(i)]));
  return result;
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

void Engine::trace_requests(const StepPlan& plan, int64_t step_start_ns) {
  const int64_t now = Profiler::now_ns();
  auto ns_of = [](RequestClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& request = *chunk.request;
    const bool prefill = chunk.start < static_cast<int64_t>(request.prompt.size());
    // The first chunk after its first admission: the queue wait ends where this step began.
    if (prefill && request.n_preemptions == 0 && chunk.start == std::max<int64_t>(0, request.cached_prompt_tokens))
      profiler_->trace_request({request.id, RequestSpan::Queue, ns_of(request.times.arrival), step_start_ns, 0});
    profiler_->trace_request(
        {request.id, prefill ? RequestSpan::Prefill : RequestSpan::Decode, step_start_ns, now, chunk.n_tokens});
  }
  for (const Request* request : plan.preempted)
    profiler_->trace_request({request->id, RequestSpan::Preempted, step_start_ns, step_start_ns, 0});
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
