// DraftModel: a second, smaller model with the target's vocabulary that proposes tokens for
// speculative decoding. It owns its KV pool, BlockManager and per-sequence block tables; a
// sequence's draft K/V mirrors the target's positions. Before proposing it computes every
// token of the sequence it has not seen (the prompt, the first time), then runs one batched
// forward pass per proposed token over all proposing sequences. It samples with the request's
// own sampling parameters (its own RNG stream) and keeps each proposal's distribution q for
// the acceptance rule. After verification the engine rolls its K/V back to the kept positions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/sampler.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "kv/kv_types.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

// One sequence's request for proposals this step.
struct DraftJob {
  uint64_t id = 0;                           // the engine's request id: the draft state's key
  std::span<const int32_t> tokens;           // the sequence so far; the last has no K/V yet
  const SamplingParams* sampling = nullptr;  // the request's: proposals sample as it does
  int32_t n_draft = 0;                       // proposals wanted
  std::vector<int32_t>* draft = nullptr;     // out: the proposals (fewer when the pool is full)
};

// Throws InputError naming the first difference when the two vocabularies differ (size or
// any token's bytes): a draft's token id must mean what the target's does.
void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

class DraftModel {
 public:
  // Room for max_seqs sequences of `context_length` positions (capped by the draft model's).
  // Its K/V is stored as the target's (`kv_types`) where the draft's head size allows that type,
  // F16 otherwise (F32 past F16's head limit).
  DraftModel(std::shared_ptr<const Model> model, int64_t context_length, int32_t max_seqs, int64_t max_batch_tokens,
             int32_t block_size, int32_t max_draft, KvTypes kv_types, ThreadPool& pool);
  ~DraftModel();

  // Fills every job's draft (up to its n_draft; proposals never run past the context).
  void propose(std::span<DraftJob> jobs);
  // The draft's distribution for proposal i of sequence `id` (valid until the next propose()).
  TokenDistribution q(uint64_t id, int32_t i) const;
  // Keeps the K/V of positions [0, n_kept) of `id` (the target kept that many), drops the rest.
  void rollback(uint64_t id, int64_t n_kept);
  // Forgets `id` (finished or preempted), returning its blocks.
  void remove(uint64_t id);
  int64_t blocks_in_use() const { return blocks_.stats().used; }

 private:
  struct Sequence;
  Sequence& sequence_for(const DraftJob& job);
  // propose()'s three parts. Clamps each job's length to the context and max_draft_ and grows
  // its blocks for the positions this step feeds (a full pool: n_draft 0, no proposal).
  void prepare(std::span<DraftJob> jobs);
  // Catch-up: each sequence's unseen tokens through the pending one, in passes of at most
  // max_batch_tokens; the pass that reaches the pending token gives its first proposal.
  void catch_up(std::span<DraftJob> jobs);
  // Rounds: feed proposal r at its position, read proposal r + 1; all sequences in one pass.
  void propose_rounds(std::span<DraftJob> jobs);
  // Proposal `index` of `job` from its logits row: keeps q, draws the token.
  void record(DraftJob& job, Sequence& sequence, int32_t index, std::span<const float> logits);

  std::shared_ptr<const Model> model_;
  int64_t context_length_;
  int64_t max_batch_tokens_;
  int32_t max_draft_;
  BlockManager blocks_;
  KvCache cache_;
  Forward forward_;
  Batch batch_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<int64_t> rows_;  // [jobs] each job's logits row in this pass, or -1
  std::vector<int64_t> fed_;   // [jobs] tokens each job fed in this catch-up pass
};

}  // namespace tandem
