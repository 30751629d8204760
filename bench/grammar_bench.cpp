// tandem_grammar_bench: what a grammar-constrained decode step costs in the mask, per
// vocabulary and grammar. A valid JSON document is tokenized with the vocabulary's own
// tokenizer and fed back token by token, as a model would emit it; each step computes the
// full mask (timed), checks the next token is allowed, and accepts it. "new request" is a
// fresh matcher and masker (empty caches: a request's first walk), "repeated" the same walk
// again (every state's mask cached). GRAMMAR_BENCH_TRACE=1 prints each step. Then the worst
// case (issue 33): grammars built to cost as much per step as the limits of
// grammar_limits.h let them, each run for a few steps from a fresh matcher; the slowest
// single mask is the delay one grammar can add to an engine step. Usage: tandem_grammar_bench
// [VOCAB.gguf ...] (default: the llama-spm and gpt-2 vocabularies in ../shared).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"
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

// Grammars that make each mask as costly as the limits allow: ambiguous repetitions just
// under and over the work budget, splits of a run of letters, a rule at the alternatives
// limit whose choices share long prefixes, nested repetitions at the compile limit.
std::vector<std::pair<std::string, std::string>> worst_case_grammars() {
  std::string choices;
  for (size_t i = 0; i < kMaxRuleAlternatives; ++i)
    choices += fmt::format("{}\"the quick brown fox {}\"", i == 0 ? "" : " | ", i);
  return {
      {"(\"a\"?){0,300}", R"(root ::= ("a"?){0,300} "b")"},
      {"(\"a\"?){0,450}", R"(root ::= ("a"?){0,450} "b")"},
      {"(\"a\"?){0,2000}", R"(root ::= ("a"?){0,2000} "b")"},
      {"(\"\" | [b-z]+){300}", R"(root ::= "a" ("" | [b-z]+){300} ".")"},
      {"([a-z ]{0,60}){0,60}", R"(root ::= ([a-z ]{0,60}){0,60})"},
      {"[^\"]{0,9000} twice", R"(root ::= [^"]{0,9000} [^"]{0,9000})"},
      {"4096 choices", "root ::= " + choices},
      {"nested at the limit", R"(root ::= (([a-z ]{0,63}){0,63}){0,63})"},
  };
}

// The slowest single mask over a few steps of each worst-case grammar (fresh matcher and
// masker: nothing cached), with its work units, and how the run ended.
void bench_worst_case(const std::shared_ptr<const TokenTrie>& trie, int32_t eos) {
  std::printf("  worst case (limits: %llu work units a step, %zu stacks, %zu MiB a sequence):\n",
              static_cast<unsigned long long>(kMaxStepWork), kMaxParseStacks, kMaxMatcherBytes >> 20);
  double worst_ms = 0;
  for (const auto& [name, text] : worst_case_grammars()) {
    std::shared_ptr<const Grammar> grammar;
    const auto t_compile = Clock::now();
    try {
      grammar = std::make_shared<const Grammar>(parse_gbnf(text));
    } catch (const InputError& e) {
      std::printf("    %-22s refused in %.2f ms: %s\n", name.c_str(),
                  std::chrono::duration<double, std::milli>(Clock::now() - t_compile).count(), e.what());
      continue;
    }
    double slowest_ms = 0, slowest_units = 0;
    std::string ended = "8 steps";
    constexpr int kReps = 3;
    for (int rep = 0; rep < kReps; ++rep) {
      double rep_slowest = 0, rep_units = 0;
      try {
        // The matcher's start is the request's first grammar work (on submission).
        const auto t0 = Clock::now();
        std::optional<GrammarMatcher> made;
        try {
          made.emplace(grammar);
        } catch (const InputError&) {
          rep_slowest = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          throw;
        }
        GrammarMatcher& matcher = *made;
        rep_slowest = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        rep_units = static_cast<double>(matcher.pool().work());
        TokenMasker masker(trie, {eos});
        std::vector<uint32_t> mask(mask_words(trie->vocab_size()));
        for (int step = 0; step < 8; ++step) {
          const auto t1 = Clock::now();
          bool any = false;
          try {
            any = masker.fill_mask(matcher, mask);
          } catch (const InputError&) {
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
            if (ms > rep_slowest) rep_slowest = ms, rep_units = static_cast<double>(matcher.pool().work());
            throw;
          }
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
          if (ms > rep_slowest) rep_slowest = ms, rep_units = static_cast<double>(matcher.pool().work());
          if (!any) {
            ended = fmt::format("no token after {} steps", step);
            break;
          }
          // The longest allowed token that is not the end: the most bytes into the grammar.
          int32_t pick = -1;
          for (int32_t id = 0; id < trie->vocab_size(); ++id)
            if (id != eos && mask_allows(mask, id) &&
                (pick < 0 || trie->token_bytes(id).size() > trie->token_bytes(pick).size()))
              pick = id;
          if (pick < 0) {
            ended = fmt::format("only the end after {} steps", step);
            break;
          }
          masker.accept_token(matcher, pick);
        }
      } catch (const InputError& e) {
        ended = e.what();
      }
      if (rep == 0 || rep_slowest < slowest_ms) slowest_ms = rep_slowest, slowest_units = rep_units;
    }
    worst_ms = std::max(worst_ms, slowest_ms);
    std::printf("    %-22s slowest step %7.2f ms (%8.0f units, %5.1f ns a unit) | %s\n", name.c_str(), slowest_ms,
                slowest_units, slowest_units > 0 ? slowest_ms * 1e6 / slowest_units : 0.0, ended.c_str());
  }
  std::printf("  worst single step: %.2f ms\n", worst_ms);
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
  bench_worst_case(trie, eos);
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
