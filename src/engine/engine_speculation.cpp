// Engine: speculative decoding's two ends (see engine.h, speculation/). Before the plan, each
// speculating decode gets its proposal (prompt lookup here, a draft model's in one batched
// pass for the step); after the pass, its rows are verified: proposals kept while the target
// agrees, each kept token and the one after them emitted, the rest rolled back in the
// scheduler and the draft model.
#include <algorithm>
#include <utility>

#include "engine/engine.h"
#include "engine/engine_sequence.h"

namespace tandem {

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
  for (int64_t i = 0; i <= n_draft; ++i) {
    const std::span<const float> logits = rows.subspan(static_cast<size_t>(i) * vocab, vocab);
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
    const auto [token, kept] = verify_row(sequence, i, n_draft, allowed);
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
  if (sequence.speculation.type == SpeculationType::Draft) draft_->rollback(request.id, request.n_computed);
  if (sequence.grammar) launch_mask(sequence);
}

std::pair<int32_t, bool> Engine::verify_row(Sequence& sequence, int64_t i, int64_t n_draft,
                                            std::span<const float> allowed) {
  const Request& request = sequence.request;
  if (sequence.speculation.type != SpeculationType::Draft) {
    const int32_t token = sequence.sampler.sample(allowed, request.tokens);
    return {token, i < n_draft && token == request.draft[static_cast<size_t>(i)]};
  }
  // A draft model's proposal came from its distribution q: the general rule, min(1, p/q)
  // then the residual; after the last proposal a bonus token from p.
  const TokenDistribution p = sequence.sampler.probabilities(allowed, request.tokens);
  if (i == n_draft) return {Sampler::draw(p, sequence.sampler.next_uniform()), false};
  const double u_accept = sequence.sampler.next_uniform(), u_resample = sequence.sampler.next_uniform();
  const SpeculativeVerdict verdict = rejection_.verify(p, draft_->q(request.id, static_cast<int32_t>(i)),
                                                       request.draft[static_cast<size_t>(i)], u_accept, u_resample);
  return {verdict.token, verdict.accepted};
}

}  // namespace tandem
