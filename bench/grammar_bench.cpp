// tandem_grammar_bench: what a grammar-constrained decode step costs in the mask, per
// vocabulary and grammar. A valid JSON document is tokenized with the vocabulary's own
// tokenizer and fed back token by token, as a model would emit it; each step computes the
// full mask (timed), checks the next token is allowed, and accepts it. "new request" is a
// fresh matcher and masker (empty caches: a request's first walk), "repeated" the same walk
// again (every state's mask cached). GRAMMAR_BENCH_TRACE=1 prints each step. Usage: tandem_grammar_bench [VOCAB.gguf
// ...] (default: the llama-spm and gpt-2 vocabularies in ../shared).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar/token_trie.h"
#include "tokenizer/load_tokenizer.h"

namespace {

using namespace tandem;
using namespace tandem::grammar;
using Clock = std::chrono::steady_clock;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "email": {"type": "string"},
    "address": {"type": "object", "properties": {
      "street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string"}},
      "required": ["street", "city", "zip"], "additionalProperties": false},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "status": {"enum": ["active", "inactive", "pending"]},
    "score": {"type": "number"},
    "verified": {"type": "boolean"}
  },
  "required": ["name", "age", "address", "tags", "status", "score", "verified"],
  "additionalProperties": false
})";

const char* kDocument =
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"}, "tags": ["mathematics", "analytical engine", "poetry"], "status": "active", "score": 97.5, "verified": true})";

struct Result {
  double mean_us = 0, p50_us = 0, p99_us = 0;
};

Result summarise(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Result r;
  for (double v : us) r.mean_us += v;
  r.mean_us /= static_cast<double>(us.size());
  r.p50_us = us[us.size() / 2];
  r.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  return r;
}

// One pass over `ids`: per-step mask times in µs.
std::vector<double> walk(TokenMasker& masker, GrammarMatcher& matcher, const std::vector<int32_t>& ids, int32_t eos,
                         double& apply_us) {
  std::vector<uint32_t> mask(mask_words(masker.trie().vocab_size()));
  std::vector<float> logits(static_cast<size_t>(masker.trie().vocab_size()));
  std::vector<double> times;
  for (size_t i = 0; i <= ids.size(); ++i) {
    const auto t0 = Clock::now();
    masker.fill_mask(matcher, mask);
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (std::getenv("GRAMMAR_BENCH_TRACE") != nullptr) {
      std::printf("    step %zu: %.1f us, states %zu, slow steps %zu, nodes %zu\n", i, times.back(),
                  matcher.pool().n_states(), matcher.pool().n_slow_steps(), matcher.pool().n_nodes());
    }
    // The sampler's side of the step: masking a row of logits.
    std::fill(logits.begin(), logits.end(), 0.0f);
    const auto t1 = Clock::now();
    apply_token_mask(mask, logits);
    apply_us += std::chrono::duration<double, std::micro>(Clock::now() - t1).count();
    const int32_t id = i < ids.size() ? ids[i] : eos;
    TANDEM_CHECK_INPUT(mask_allows(mask, id), "bench: token {} ('{}') at step {} is masked out", id,
                       masker.trie().token_bytes(id), i);
    TANDEM_CHECK_INPUT(masker.accept_token(matcher, id), "bench: token {} not accepted", id);
  }
  return times;
}

void bench_vocab(const std::string& path) {
  const Tokenizer tokenizer = load_tokenizer(path, "", 0);
  const auto t0 = Clock::now();
  auto trie = std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(tokenizer));
  const double trie_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const int32_t eos = tokenizer.vocab().eos_id;
  const std::vector<int32_t> ids = tokenizer.encode(kDocument, false);
  std::printf("%s: vocab %lld, trie %u nodes built in %.1f ms, document %zu bytes -> %zu tokens\n", path.c_str(),
              static_cast<long long>(tokenizer.vocab().size()), trie->n_nodes(), trie_ms, std::string(kDocument).size(),
              ids.size());
  struct Named {
    const char* name;
    std::shared_ptr<const Grammar> grammar;
  };
  const std::vector<Named> grammars = {
      {"json-schema", std::make_shared<const Grammar>(json_schema_grammar(nlohmann::ordered_json::parse(kSchema)))},
      {"any-json", std::make_shared<const Grammar>(any_json_grammar())}};
  for (const Named& g : grammars) {
    // Each rep: a fresh matcher and masker (a new request), then the same walk again with
    // both reset (states recur: every mask is cached). Per step, the fastest of the reps:
    // the machine is shared, and a stall elsewhere is not the mask's cost.
    constexpr int kReps = 5;
    std::vector<double> cold(ids.size() + 1, 1e30), warm(ids.size() + 1, 1e30);
    size_t states = 0, nodes = 0;
    double apply_us = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      TokenMasker masker(trie, {eos});
      GrammarMatcher matcher(g.grammar);
      auto times = walk(masker, matcher, ids, eos, apply_us);
      for (size_t i = 0; i < times.size(); ++i) cold[i] = std::min(cold[i], times[i]);
      states = matcher.pool().n_states();
      nodes = matcher.pool().n_nodes();
      matcher.reset();
      times = walk(masker, matcher, ids, eos, apply_us);
      for (size_t i = 0; i < times.size(); ++i) warm[i] = std::min(warm[i], times[i]);
    }
    const Result c = summarise(cold), w = summarise(warm);
    std::printf(
        "  %-12s mask per step (us), new request: mean %7.1f p50 %7.1f p99 %7.1f | repeated: mean %5.1f p50 %5.1f"
        " | apply to logits: mean %5.1f | %zu states, %zu stack nodes\n",
        g.name, c.mean_us, c.p50_us, c.p99_us, w.mean_us, w.p50_us,
        apply_us / static_cast<double>(2 * kReps * cold.size()), states, nodes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) paths.emplace_back(argv[i]);
  if (paths.empty()) {
    const std::string shared = TANDEM_SHARED_DIR;
    paths = {shared + "/tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf",
             shared + "/tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf"};
  }
  try {
    for (const std::string& path : paths) bench_vocab(path);
  } catch (const tandem::InputError& e) {
    std::fprintf(stderr, "tandem_grammar_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
