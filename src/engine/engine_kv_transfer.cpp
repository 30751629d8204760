// Engine: KV blocks across processes (disaggregated serving; see engine.h, kv_import.h,
// kv_export.h). In: an imported request's blocks are asked for (those this engine's prefix
// cache lacks), checked as they arrive, then written into the pool and published as a cached
// prefix before the request is scheduled like any other. Out: a prefill-only request hands each
// newly computed full block of its prompt to its sink and ends after the prompt.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/engine_sequence.h"
#include "kv/kv_block_message.h"

namespace tandem {

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

void Engine::advance_imports() {
  std::vector<Sequence*> still_importing;
  std::vector<std::pair<Sequence*, std::string>> failed;  // and why
  for (Sequence* sequence : importing_) {
    if (sequence->import_first < 0) ask_for_import(*sequence);
    std::string failure;
    const bool complete = collect_import(*sequence, failure);
    if (!failure.empty()) {
      failed.emplace_back(sequence, std::move(failure));
      continue;
    }
    if (!complete || !install_import(*sequence)) {
      still_importing.push_back(sequence);
      continue;
    }
    scheduler_.add(&sequence->request);
  }
  importing_ = std::move(still_importing);
  for (auto& [sequence, why] : failed) {
    RequestEvent event;
    event.error = std::move(why);
    finish(*sequence, RequestState::Finished, FinishReason::Error, event);
  }
}

void Engine::ask_for_import(Sequence& sequence) {
  // Blocks this engine has cached are not asked for. Nothing is held while the rest travel: a
  // hold would take pool blocks from running sequences for as long as the transfer takes, and
  // holds of several imports could leave too few to admit any of them.
  const int64_t n_blocks = sequence.import->n_blocks();
  sequence.import_first = blocks_.cached_prefix_blocks(sequence.request.prompt, n_blocks);
  sequence.import_messages.resize(static_cast<size_t>(n_blocks));
  sequence.import_asked = RequestClock::now();
  sequence.import->ready(sequence.import_first);
}

bool Engine::collect_import(Sequence& sequence, std::string& failure) {
  const Request& request = sequence.request;
  const int32_t block_size = config_.block_size;
  const int64_t n_blocks = sequence.import->n_blocks();
  KvImport::Arrived arrived = sequence.import->take();
  failure = arrived.failure.value_or("");
  for (std::vector<uint8_t>& message : arrived.messages) {
    if (!failure.empty()) break;
    try {  // checked now, applied once all are here
      const KvBlockInfo info = read_kv_block_info(message, cache_);
      const int64_t b = info.block_index;
      TANDEM_CHECK_INPUT(b >= sequence.import_first && b < n_blocks && info.n_filled() == block_size,
                         "KV import: block {} is not one asked for ({}..{}, full)", b, sequence.import_first,
                         n_blocks - 1);
      TANDEM_CHECK_INPUT(std::equal(info.tokens.begin(), info.tokens.end(),
                                    request.prompt.begin() + static_cast<std::ptrdiff_t>(b * block_size)),
                         "KV import: block {} carries other tokens than the prompt's", b);
      sequence.import_messages[static_cast<size_t>(b)] = std::move(message);
    } catch (const InputError& error) {
      failure = error.what();
    }
  }
  const auto here = [&](int64_t b) { return !sequence.import_messages[static_cast<size_t>(b)].empty(); };
  bool all_here = true;
  for (int64_t b = sequence.import_first; b < n_blocks; ++b) all_here = all_here && here(b);
  if (failure.empty() && arrived.complete && !all_here) failure = "KV import: the prefill side sent too few blocks";
  return arrived.complete;
}

bool Engine::install_import(Sequence& sequence) {
  const Request& request = sequence.request;
  const int32_t block_size = config_.block_size;
  const int64_t n_blocks = sequence.import->n_blocks();
  // Every block is here: write them into blocks of this pool and publish them, so that the
  // request's admission reuses them as any cached prefix. Blocks for the head and the one
  // after it (assign() never reuses the last token's block); -1: the pool is short now.
  SequenceBlocks head;
  const int64_t reused = blocks_.assign(
      head, std::span<const int32_t>(request.prompt.data(), static_cast<size_t>(n_blocks * block_size + 1)));
  if (reused < 0) return false;
  // Cached blocks the transfer skipped may have been evicted since: the K/V after the first
  // such gap cannot be published (it would sit behind a prefix that is not there); the
  // request then computes from the gap itself.
  const int64_t cached_now = reused / block_size;
  const int64_t usable = cached_now >= sequence.import_first ? n_blocks : cached_now;
  for (int64_t b = cached_now; b < usable; ++b) {
    const std::vector<uint8_t>& message = sequence.import_messages[static_cast<size_t>(b)];
    apply_kv_block(message, cache_, head.table[static_cast<size_t>(b)]);
    sequence.kv_transfer_bytes += static_cast<int64_t>(message.size());
  }
  blocks_.publish_computed(head, request.prompt, usable * block_size);
  blocks_.release(head);
  sequence.import_messages.clear();
  sequence.kv_transfer_ms = ms_between(sequence.import_asked, RequestClock::now());
  return true;
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

}  // namespace tandem
