// DraftModel (see draft_model.h): catch-up passes, then one pass per proposal round, each a
// ragged Batch over every proposing sequence through the draft's own Forward and KV pool.
#include "engine/speculation/draft_model.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

struct DraftModel::Sequence {
  Sequence(const SamplingParams& sampling, int64_t vocab_size, int32_t max_draft)
      : sampler(sampling, vocab_size),
        q_ids(static_cast<size_t>(max_draft)),
        q_probs(static_cast<size_t>(max_draft)),
        q_size(static_cast<size_t>(max_draft), 0) {
    // The draft's draws must not be the target's: a stream of its own, from the same seed.
    sampler.reseed(sampling.seed ^ 0x5851f42d4c957f2dull);
  }

  SequenceBlocks blocks;
  int64_t n_computed = 0;  // positions with draft K/V
  Sampler sampler;
  std::vector<int32_t> history;  // tokens + proposals so far (the penalties' window)
  // [max_draft][vocab_size] each proposal's q; a row is allocated the first time a proposal
  // that deep is made (a request asking for 4 never holds 16 vocabulary-sized rows).
  std::vector<std::vector<int32_t>> q_ids;
  std::vector<std::vector<float>> q_probs;  // [max_draft][vocab_size]
  std::vector<size_t> q_size;               // [max_draft]
};

void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  const int64_t n = target.vocab().size();
  TANDEM_CHECK_INPUT(draft.vocab().size() == n, "the draft model's vocabulary has {} tokens but the target's has {}",
                     draft.vocab().size(), n);
  for (int32_t id = 0; id < n; ++id)
    TANDEM_CHECK_INPUT(target.token_bytes(id) == draft.token_bytes(id),
                       "the draft model's vocabulary differs from the target's at token {}", id);
}

namespace {

// The target's K and V types where the draft's shape takes them (see the constructor's comment).
KvTypes draft_kv_types(const KvShape& shape, const KvTypes& target) {
  auto fitting = [&](DType type) {
    for (DType candidate : {type, DType::F16}) {
      try {
        check_kv_types(shape, {candidate, candidate});
        return candidate;
      } catch (const InputError&) {
      }
    }
    return DType::F32;
  };
  return {fitting(target.k), fitting(target.v)};
}

}  // namespace

DraftModel::DraftModel(std::shared_ptr<const Model> model, int64_t context_length, int32_t max_seqs,
                       int64_t max_batch_tokens, int32_t block_size, int32_t max_draft, KvTypes kv_types,
                       ThreadPool& pool)
    : model_(std::move(model)),
      context_length_(std::min(context_length, model_->config.context_length)),
      max_batch_tokens_(std::max<int64_t>(max_batch_tokens, max_seqs)),
      max_draft_(max_draft),
      blocks_(max_seqs * ((context_length_ + block_size - 1) / block_size), block_size),
      cache_(model_->config.kv_shape(), blocks_.n_blocks(), block_size,
             draft_kv_types(model_->config.kv_shape(), kv_types)),
      forward_(model_, max_batch_tokens_, pool, context_length_) {
  rows_.reserve(static_cast<size_t>(max_seqs));
  fed_.reserve(static_cast<size_t>(max_seqs));
}

DraftModel::~DraftModel() = default;

DraftModel::Sequence& DraftModel::sequence_for(const DraftJob& job) {
  auto it = sequences_.find(job.id);
  if (it == sequences_.end())
    it = sequences_.emplace(job.id, std::make_unique<Sequence>(*job.sampling, model_->config.vocab_size, max_draft_))
             .first;
  return *it->second;
}

void DraftModel::record(DraftJob& job, Sequence& sequence, int32_t index, std::span<const float> logits) {
  const TokenDistribution q = sequence.sampler.probabilities(logits, sequence.history);
  const auto i = static_cast<size_t>(index);
  if (sequence.q_ids[i].empty()) {
    sequence.q_ids[i].resize(static_cast<size_t>(model_->config.vocab_size));
    sequence.q_probs[i].resize(static_cast<size_t>(model_->config.vocab_size));
  }
  std::copy(q.ids.begin(), q.ids.end(), sequence.q_ids[i].begin());
  std::copy(q.probs.begin(), q.probs.end(), sequence.q_probs[i].begin());
  sequence.q_size[i] = q.ids.size();
  const int32_t token = Sampler::draw(q, sequence.sampler.next_uniform());
  sequence.history.push_back(token);
  job.draft->push_back(token);
}

void DraftModel::propose(std::span<DraftJob> jobs) {
  prepare(jobs);
  catch_up(jobs);
  propose_rounds(jobs);
}

void DraftModel::prepare(std::span<DraftJob> jobs) {
  for (DraftJob& job : jobs) {
    job.draft->clear();
    const auto n_tokens = static_cast<int64_t>(job.tokens.size());
    // Fed positions run up to n_tokens - 2 + n_draft (the last proposal is never fed).
    job.n_draft = static_cast<int32_t>(std::clamp<int64_t>(job.n_draft, 0, context_length_ - n_tokens + 1));
    job.n_draft = std::min(job.n_draft, max_draft_);
    if (job.n_draft == 0) continue;
    Sequence& sequence = sequence_for(job);
    sequence.n_computed = std::min(sequence.n_computed, n_tokens - 1);
    // Room for every position this step feeds; without it (a full pool) no proposal.
    if (!blocks_.grow(sequence.blocks, n_tokens - 1 + job.n_draft)) {
      blocks_.truncate(sequence.blocks, sequence.n_computed);
      job.n_draft = 0;
      continue;
    }
    sequence.history.assign(job.tokens.begin(), job.tokens.end());
  }
}

void DraftModel::catch_up(std::span<DraftJob> jobs) {
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  rows_.assign(jobs.size(), -1);
  fed_.assign(jobs.size(), 0);
  for (;;) {
    batch_.clear();
    int64_t budget = max_batch_tokens_, n_rows = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      DraftJob& job = jobs[j];
      rows_[j] = -1;
      fed_[j] = 0;
      if (job.n_draft == 0 || !job.draft->empty() || budget == 0) continue;
      Sequence& sequence = *sequences_.at(job.id);
      const auto n_tokens = static_cast<int64_t>(job.tokens.size());
      const int64_t n = std::min(n_tokens - sequence.n_computed, budget);
      const int32_t seq = batch_.add_sequence(sequence.blocks.table);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t position = sequence.n_computed + i;
        batch_.add(job.tokens[static_cast<size_t>(position)], static_cast<int32_t>(position), seq,
                   position == n_tokens - 1);
      }
      fed_[j] = n;
      if (sequence.n_computed + n == n_tokens) rows_[j] = n_rows++;
      budget -= n;
    }
    if (batch_.n_tokens() == 0) break;
    const std::span<const float> logits = forward_.run(batch_, cache_);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (fed_[j] == 0) continue;
      Sequence& sequence = *sequences_.at(jobs[j].id);
      sequence.n_computed += fed_[j];
      if (rows_[j] >= 0) record(jobs[j], sequence, 0, logits.subspan(static_cast<size_t>(rows_[j]) * vocab, vocab));
    }
  }
}

void DraftModel::propose_rounds(std::span<DraftJob> jobs) {
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  for (int32_t round = 1; round < max_draft_; ++round) {
    batch_.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
      DraftJob& job = jobs[j];
      rows_[j] = -1;
      if (job.n_draft <= round || static_cast<int32_t>(job.draft->size()) != round) continue;
      Sequence& sequence = *sequences_.at(job.id);
      const int32_t seq = batch_.add_sequence(sequence.blocks.table);
      batch_.add(job.draft->back(), static_cast<int32_t>(sequence.n_computed), seq, true);
      rows_[j] = batch_.n_tokens() - 1;
    }
    if (batch_.n_tokens() == 0) break;
    const std::span<const float> logits = forward_.run(batch_, cache_);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (rows_[j] < 0) continue;
      Sequence& sequence = *sequences_.at(jobs[j].id);
      ++sequence.n_computed;
      record(jobs[j], sequence, round, logits.subspan(static_cast<size_t>(rows_[j]) * vocab, vocab));
    }
  }
}

TokenDistribution DraftModel::q(uint64_t id, int32_t i) const {
  const Sequence& sequence = *sequences_.at(id);
  const auto index = static_cast<size_t>(i);
  const size_t n = sequence.q_size[index];
  return {std::span<const int32_t>(sequence.q_ids[index]).first(n),
          std::span<const float>(sequence.q_probs[index]).first(n)};
}

void DraftModel::rollback(uint64_t id, int64_t n_kept) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  Sequence& sequence = *it->second;
  sequence.n_computed = std::min(sequence.n_computed, n_kept);
  blocks_.truncate(sequence.blocks, sequence.n_computed);
}

void DraftModel::remove(uint64_t id) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  blocks_.release(it->second->blocks);
  sequences_.erase(it);
}

}  // namespace tandem
