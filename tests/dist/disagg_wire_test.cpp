// The disaggregated job's messages (dist/disagg_wire.h) survive the wire exactly: every
// generation parameter (a constrained request's grammar included, which must accept and
// refuse the same strings after the trip), token events with text that is not valid UTF-8 on
// its own, logprobs and embeddings bit for bit; KV block frames keep their id; malformed bytes
// are one-line errors. Only in a build with MPI (the job's code is tandem_dist's).
#include <gtest/gtest.h>

#ifdef TANDEM_WITH_MPI

#include <cstring>
#include <limits>

#include "base/error.h"
#include "dist/disagg_wire.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar.h"

namespace tandem::dist {
namespace {

TEST(DisaggWire, GenerationParamsRoundTrip) {
  GenerationParams p;
  p.sampling = {0.73f, 17, 0.91f, 0.02f, 1.1f, -1, 0.25f, 0.5f, 0xfedcba9876543210ull, {{5, -100.0f}, {9, 2.5f}}};
  p.max_tokens = 123;
  p.stop = {"\n\n", std::string("\xff\xfe", 2), "END"};
  p.top_logprobs = 5;
  p.ignore_eos = true;
  p.stop_token_ids = {2, 7};
  p.min_tokens = 3;
  p.speculation = {SpeculationType::Ngram, 6, 1, 2, 5};
  p.pooling = Pooling::None;
  p.grammar = std::make_shared<const grammar::Grammar>(
      grammar::parse_gbnf(R"(root ::= "yes" | "no" | [a-c]+ "!" | item ("," item)*
item ::= [0-9] | "\xC3\xA9")"));
  const GenerationParams q = params_from_json(from_bytes(to_bytes(params_to_json(p))));
  EXPECT_EQ(q.sampling.temperature, p.sampling.temperature);
  EXPECT_EQ(q.sampling.top_k, p.sampling.top_k);
  EXPECT_EQ(q.sampling.top_p, p.sampling.top_p);
  EXPECT_EQ(q.sampling.min_p, p.sampling.min_p);
  EXPECT_EQ(q.sampling.repetition_penalty, p.sampling.repetition_penalty);
  EXPECT_EQ(q.sampling.repeat_last_n, p.sampling.repeat_last_n);
  EXPECT_EQ(q.sampling.presence_penalty, p.sampling.presence_penalty);
  EXPECT_EQ(q.sampling.frequency_penalty, p.sampling.frequency_penalty);
  EXPECT_EQ(q.sampling.seed, p.sampling.seed);
  EXPECT_EQ(q.sampling.logit_bias, p.sampling.logit_bias);
  EXPECT_EQ(q.max_tokens, p.max_tokens);
  EXPECT_EQ(q.stop, p.stop);
  EXPECT_EQ(q.top_logprobs, p.top_logprobs);
  EXPECT_EQ(q.ignore_eos, p.ignore_eos);
  EXPECT_EQ(q.stop_token_ids, p.stop_token_ids);
  EXPECT_EQ(q.min_tokens, p.min_tokens);
  EXPECT_EQ(q.speculation.type, p.speculation.type);
  EXPECT_EQ(q.speculation.draft_max, p.speculation.draft_max);
  EXPECT_EQ(q.speculation.draft_min, p.speculation.draft_min);
  EXPECT_EQ(q.speculation.ngram_min, p.speculation.ngram_min);
  EXPECT_EQ(q.speculation.ngram_max, p.speculation.ngram_max);
  ASSERT_TRUE(q.grammar);
  // The same rules, in the same order, with the same root: the lowered text is identical.
  EXPECT_EQ(q.grammar->to_string(), p.grammar->to_string());
  EXPECT_EQ(q.grammar->rule_name(q.grammar->root()), "root");
  EXPECT_FALSE(params_from_json(from_bytes(to_bytes(params_to_json(GenerationParams{})))).grammar);
}

TEST(DisaggWire, EventsRoundTripBitForBit) {
  RequestEvent e;
  e.request_id = 42;
  e.text = std::string("caf\xc3", 4);  // half of a two-byte character
  e.tokens = {11, 12};
  e.logprobs = {{{11, std::string("\xc3", 1), -0.1234567f}, {{11, "a", -0.1234567f}, {3, "b", -7.5e-8f}}},
                {{12, "x", -std::numeric_limits<float>::infinity()}, {}}};
  e.finished = true;
  e.finish_reason = FinishReason::Error;
  e.admitted = true;
  e.prompt_tokens = 100, e.cached_tokens = 64, e.completion_tokens = 2, e.kv_bytes = 123456, e.preemptions = 1;
  e.drafted_tokens = 5, e.accepted_tokens = 3, e.kv_transfer_bytes = 987654;
  e.queue_ms = 1.25, e.ttft_ms = 3.5, e.prefill_ms = 2.0, e.decode_ms = 10.0, e.e2e_ms = 14.75, e.kv_transfer_ms = 0.8;
  e.itl_ms = {4.5, 5.25};
  e.embedding = {0.1f, -3.0e-20f, 1.0e30f};
  e.error = "decode worker rank 3 is down";
  const RequestEvent f = event_from_json(from_bytes(to_bytes(event_to_json(e))));
  EXPECT_EQ(f.request_id, e.request_id);
  EXPECT_EQ(f.text, e.text);
  EXPECT_EQ(f.tokens, e.tokens);
  ASSERT_EQ(f.logprobs.size(), 2u);
  EXPECT_EQ(f.logprobs[0].chosen.text, e.logprobs[0].chosen.text);
  EXPECT_EQ(f.logprobs[0].chosen.logprob, e.logprobs[0].chosen.logprob);
  ASSERT_EQ(f.logprobs[0].top.size(), 2u);
  EXPECT_EQ(f.logprobs[0].top[1].token, 3);
  EXPECT_EQ(f.logprobs[0].top[1].logprob, -7.5e-8f);
  EXPECT_EQ(f.logprobs[1].chosen.logprob, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(f.finished);
  EXPECT_EQ(f.finish_reason, FinishReason::Error);
  EXPECT_TRUE(f.admitted);
  EXPECT_EQ(f.prompt_tokens, 100);
  EXPECT_EQ(f.cached_tokens, 64);
  EXPECT_EQ(f.kv_bytes, 123456);
  EXPECT_EQ(f.preemptions, 1);
  EXPECT_EQ(f.accepted_tokens, 3);
  EXPECT_EQ(f.kv_transfer_bytes, 987654);
  EXPECT_EQ(f.e2e_ms, 14.75);
  EXPECT_EQ(f.kv_transfer_ms, 0.8);
  EXPECT_EQ(f.itl_ms, e.itl_ms);
  EXPECT_EQ(f.embedding, e.embedding);
  EXPECT_EQ(f.error, e.error);
}

TEST(DisaggWire, KvBlockFramesKeepTheirId) {
  const std::vector<uint8_t> block = {1, 2, 3, 4, 5};
  const std::vector<uint8_t> frame = kv_block_frame(0x0123456789abcdefull, block);
  EXPECT_EQ(kv_block_frame_id(frame), 0x0123456789abcdefull);
  const std::span<const uint8_t> message = kv_block_frame_message(frame);
  EXPECT_EQ(std::vector<uint8_t>(message.begin(), message.end()), block);
  EXPECT_THROW(kv_block_frame_id(std::vector<uint8_t>(7, 0)), InputError);
}

TEST(DisaggWire, MalformedMessagesAreOneLineErrors) {
  EXPECT_THROW(from_bytes(std::vector<uint8_t>{0xff, 0x00, 0x13}), InputError);
  nlohmann::json params = params_to_json(GenerationParams{});
  params["pooling"] = 9;
  EXPECT_THROW(params_from_json(params), InputError);
  nlohmann::json event = event_to_json(RequestEvent{});
  event["reason"] = -1;
  EXPECT_THROW(event_from_json(event), InputError);
  // A grammar whose rule refers past the rule list.
  GenerationParams p;
  p.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "a")"));
  nlohmann::json bad = params_to_json(p);
  bad["grammar"]["rules"][0]["alternatives"][0][0] = {1, 0, 0, 7};
  EXPECT_THROW(params_from_json(bad), InputError);
}

}  // namespace
}  // namespace tandem::dist

#else
TEST(DisaggWire, NeedsMpi) { GTEST_SKIP() << "built without MPI: the disaggregated job's code is not built"; }
#endif
