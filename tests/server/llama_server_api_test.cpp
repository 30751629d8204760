// llama-server's native endpoints as pure functions (llama_server_api.h, slot_file.h,
// slot_table.h): /completion and /infill bodies -> the completions request (prompt shapes,
// llama-server's defaults and names), the result and chunk objects, FIM prompt layouts,
// /embedding bodies and norms, /rerank's refusal, slot file names and files, the slot table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "aidreams_tokenizer.h"
#include "base/error.h"
#include "server/llama_server_api.h"
#include "server/rank_head.h"
#include "server/slot_file.h"
#include "server/slot_table.h"
#include "support/shared_data.h"

namespace tandem::testing {
namespace {

using nlohmann::json;
using server::ApiError;

server::NativeCompletionRequest native(const std::string& body) {
  return server::parse_native_completion(body, aidreams_tokenizer(), 512, {});
}

// The ApiError a body gets, or a failure.
ApiError refusal_of(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return ApiError(0, "", "");
}

void expect_400(const std::string& body, const std::string& reason, const std::string& param = {}) {
  const ApiError e = refusal_of([&] { native(body); });
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << body << ": " << e.what();
  if (!param.empty()) {
    EXPECT_EQ(e.param, param) << body << ": " << e.what();
  }
}

TEST(LlamaServerApi, CompletionPromptShapes) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const Tokenizer& tokenizer = aidreams_tokenizer();
  const auto text = native(R"({"prompt": "I see"})");
  ASSERT_EQ(text.api.prompts.size(), 1u);
  EXPECT_EQ(text.api.prompts[0].text, "I see");  // tokenized by the generation path, as /v1/completions'
  EXPECT_EQ(text.prompt_texts, std::vector<std::string>{"I see"});

  const auto ids = native(R"({"prompt": [5, 6, 7]})");
  EXPECT_EQ(ids.api.prompts[0].ids, (std::vector<int32_t>{5, 6, 7}));  // no BOS added to ids

  // Mixed: one prompt; its strings tokenized here, BOS only before a leading string.
  const auto mixed = native(R"({"prompt": [5, "I see", 6]})");
  ASSERT_EQ(mixed.api.prompts.size(), 1u);
  std::vector<int32_t> expected = {5};
  for (int32_t id : tokenizer.encode("I see", false)) expected.push_back(id);
  expected.push_back(6);
  EXPECT_EQ(mixed.api.prompts[0].ids, expected);
  const auto leading = native(R"({"prompt": ["I see", 6]})");
  ASSERT_EQ(leading.api.prompts.size(), 1u);
  if (tokenizer.vocab().add_bos) {
    EXPECT_EQ(leading.api.prompts[0].ids.front(), tokenizer.vocab().bos_id);
  }
  EXPECT_EQ(leading.api.prompts[0].ids.back(), 6);

  // Several: strings, arrays, mixed arrays.
  const auto several = native(R"({"prompt": ["a", [1, 2], [3, "b"]]})");
  ASSERT_EQ(several.api.prompts.size(), 3u);
  EXPECT_EQ(several.api.prompts[0].text, "a");
  EXPECT_EQ(several.api.prompts[1].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(several.api.prompts[2].ids.front(), 3);

  expect_400(R"({})", "'prompt' is required", "prompt");
  expect_400(R"({"prompt": {}})", "'prompt' must be", "prompt");
  expect_400(R"({"prompt": [1, true]})", "'prompt' may hold token ids and strings", "prompt");
  expect_400(R"({"prompt": ["a", {}]})", "'prompt[1]' must be", "prompt[1]");
  expect_400(R"({"prompt": [-1]})", "token ids must be integers from 0", "prompt");
  expect_400(R"({"prompt": ["a", []]})", "'prompt[1]' must be", "prompt[1]");
  expect_400(R"([1])", "must be a JSON object");
  expect_400(R"({"prompt": "a",)", "");  // malformed JSON: a 400 with the parser's reason
}

TEST(LlamaServerApi, CompletionDefaultsAndFieldNames) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // llama-server's defaults, not OpenAI's; n_predict -1: to the end of the context.
  const auto plain = native(R"({"prompt": "a"})");
  const SamplingParams& s = plain.api.params.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.8f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.top_p, 0.95f);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_EQ(s.repeat_last_n, 64);
  EXPECT_EQ(plain.api.params.max_tokens, 512);
  EXPECT_EQ(plain.api.params.top_logprobs, -1);
  EXPECT_EQ(plain.n_probs, 0);
  EXPECT_EQ(plain.settings["n_predict"], -1);
  EXPECT_EQ(plain.settings["n_ctx"], 512);

  const auto sent = native(
      R"({"prompt": "a", "n_predict": 7, "temperature": 0, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "seed": 42,
          "stop": ["x"], "n_probs": 3, "return_tokens": true, "cache_prompt": true, "id_slot": 1,
          "repeat_penalty": 1.2, "logit_bias": [[5, 1.5], [6, false]], "stream": true})");
  const GenerationParams& p = sent.api.params;
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_EQ(p.sampling.seed, 42u);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.top_logprobs, 3);
  EXPECT_EQ(sent.n_probs, 3);
  EXPECT_TRUE(sent.return_tokens);
  EXPECT_TRUE(sent.api.stream);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(p.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, 1.5f}, {6, -100.0f}}));
  EXPECT_EQ(sent.settings["n_predict"], 7);
  EXPECT_EQ(sent.settings["n_probs"], 3);

  // Grammars as /v1/completions reads them.
  EXPECT_TRUE(native(R"({"prompt": "a", "grammar": "root ::= \"yes\" | \"no\""})").api.params.grammar);
  EXPECT_TRUE(native(R"({"prompt": "a", "json_schema": {"type": "integer"}})").api.params.grammar);
  EXPECT_EQ(native(R"({"prompt": "a", "grammar": "root ::= \"x\""})").settings["grammar"], "(compiled)");

  // Under Mirostat the truncations stay off (they are a 400 with it when sent).
  const auto mirostat = native(R"({"prompt": "a", "mirostat": 2})");
  EXPECT_EQ(mirostat.api.params.sampling.mirostat, 2);
  EXPECT_EQ(mirostat.api.params.sampling.top_k, 0);
  // seed -1 is a random seed, not 2^64 - 1 every time.
  EXPECT_NE(native(R"({"prompt": "a", "seed": -1})").api.params.sampling.seed,
            native(R"({"prompt": "a", "seed": -1})").api.params.sampling.seed);

  expect_400(R"({"prompt": "a", "n_probs": 21})", "'n_probs' must be between 0 and 20", "n_probs");
  expect_400(R"({"prompt": "a", "logprobs": 2})", "'logprobs' is a /v1/completions field", "logprobs");
  expect_400(R"({"prompt": "a", "temperature": "hot"})", "'temperature' must be a number", "temperature");
  expect_400(R"({"prompt": "a", "samplers": ["top_k"]})", "'samplers' is not supported", "samplers");
  expect_400(R"({"prompt": "a", "logit_bias": [["hello", 1]]})", "'logit_bias' entries", "logit_bias");
  expect_400(R"({"prompt": "a", "n_predict": 0})", "'n_predict' 0", "n_predict");
}

TEST(LlamaServerApi, ResultAndChunkObjects) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const auto request = native(R"({"prompt": "I see", "n_probs": 1, "return_tokens": true})");
  server::NativeResult result;
  result.content = "a\nb";
  result.tokens = {7, 8};
  result.finish_reason = FinishReason::StopString;
  result.stop_string = "xy";
  result.prompt_tokens = 5;
  result.cached_tokens = 2;
  result.completion_tokens = 2;
  result.prefill_ms = 3.0;
  result.decode_ms = 4.0;
  TokenLogprob lp;
  lp.chosen = {7, "a", -0.5f};
  lp.top = {{7, "a", -0.5f}};
  result.logprobs = {lp, lp};
  const json out = server::native_result_json(request, result, "m");
  EXPECT_EQ(out["content"], "a\nb");
  EXPECT_EQ(out["tokens"], json({7, 8}));
  EXPECT_EQ(out["stop"], true);
  EXPECT_EQ(out["stop_type"], "word");
  EXPECT_EQ(out["stopped_word"], true);
  EXPECT_EQ(out["stopped_eos"], false);
  EXPECT_EQ(out["stopping_word"], "xy");
  EXPECT_EQ(out["tokens_predicted"], 2);
  EXPECT_EQ(out["tokens_evaluated"], 5);
  EXPECT_EQ(out["tokens_cached"], 2);
  EXPECT_EQ(out["has_new_line"], true);
  EXPECT_EQ(out["model"], "m");
  EXPECT_EQ(out["prompt"], "I see");
  EXPECT_EQ(out["timings"]["prompt_n"], 3);
  EXPECT_DOUBLE_EQ(out["timings"]["predicted_per_second"].get<double>(), 500.0);
  EXPECT_EQ(out["generation_settings"]["n_probs"], 1);
  ASSERT_EQ(out["completion_probabilities"].size(), 2u);
  const json& first = out["completion_probabilities"][0];
  EXPECT_EQ(first["id"], 7);
  EXPECT_EQ(first["token"], "a");
  EXPECT_EQ(first["bytes"], json({97}));
  EXPECT_FLOAT_EQ(first["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(first["top_logprobs"][0]["id"], 7);

  EXPECT_EQ(server::native_stop_type(FinishReason::EndOfSequence), "eos");
  EXPECT_EQ(server::native_stop_type(FinishReason::Length), "limit");
  EXPECT_EQ(server::native_stop_type(FinishReason::ContextLimit), "limit");
  EXPECT_EQ(server::native_stop_type(FinishReason::Cancelled), "none");

  RequestEvent event;
  event.text = "a";
  event.tokens = {7};
  event.prompt_tokens = 5;
  event.logprobs = {lp};
  const json chunk = server::native_chunk_json(request, 0, event, 1);
  EXPECT_EQ(chunk, json::parse(R"({"index": 0, "content": "a", "tokens": [7], "stop": false, "id_slot": -1,
                                   "tokens_predicted": 1, "tokens_evaluated": 5,
                                   "completion_probabilities": [{"id": 7, "token": "a", "bytes": [97],
                                     "logprob": -0.5, "top_logprobs": [{"id": 7, "token": "a", "bytes": [97],
                                     "logprob": -0.5}]}]})"));
}

// A vocabulary with FIM tokens: aidreams' with control pieces appended.
Tokenizer fim_tokenizer(bool repo_level) {
  Vocab vocab = aidreams_tokenizer().vocab();
  std::vector<std::string> extra = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"};
  if (repo_level) extra.insert(extra.end(), {"<|repo_name|>", "<|file_sep|>"});
  for (const std::string& piece : extra) {
    vocab.pieces.push_back(piece);
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(TokenType::Control);
  }
  return Tokenizer(std::move(vocab));
}

TEST(LlamaServerApi, InfillPromptFromFimTokens) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const Tokenizer tokenizer = fim_tokenizer(false);
  const int32_t n = static_cast<int32_t>(aidreams_tokenizer().vocab().size());
  const server::FimTokens fim = server::find_fim_tokens(tokenizer);
  EXPECT_EQ(fim.prefix, n);
  EXPECT_EQ(fim.suffix, n + 1);
  EXPECT_EQ(fim.middle, n + 2);
  EXPECT_EQ(fim.repo, -1);
  const auto enc = [&](const std::string& text) { return tokenizer.encode(text, false); };
  const auto cat = [](std::vector<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
  };
  const std::vector<int32_t> bos =
      tokenizer.vocab().add_bos ? std::vector<int32_t>{tokenizer.vocab().bos_id} : std::vector<int32_t>{};
  // [extra texts] <PRE> prefix <SUF> suffix <MID> prompt
  EXPECT_EQ(server::infill_prompt(tokenizer, fim, "Once", "end", {{"a.txt", "cat"}}, "the"),
            cat({bos, enc("cat"), {n}, enc("Once"), {n + 1}, enc("end"), {n + 2}, enc("the")}));
  // The metadata's ids win over the spellings.
  Vocab with_ids = tokenizer.vocab();
  with_ids.fim_pre_id = 3;
  EXPECT_EQ(server::find_fim_tokens(Tokenizer(with_ids)).prefix, 3);

  // Repository level: <REPO>myproject\n <SEP>name\ntext ... <SEP>filename\n then the rest.
  const Tokenizer repo_tokenizer = fim_tokenizer(true);
  const server::FimTokens repo = server::find_fim_tokens(repo_tokenizer);
  ASSERT_EQ(repo.repo, n + 3);
  ASSERT_EQ(repo.file_sep, n + 4);
  const auto renc = [&](const std::string& text) { return repo_tokenizer.encode(text, false); };
  EXPECT_EQ(server::infill_prompt(repo_tokenizer, repo, "Once", "", {{"a.txt", "cat"}}, ""), cat({bos,
                                                                                                  {n + 3},
                                                                                                  renc("myproject\n"),
                                                                                                  {n + 4},
                                                                                                  renc("a.txt\n"),
                                                                                                  renc("cat"),
                                                                                                  {n + 4},
                                                                                                  renc("filename\n"),
                                                                                                  {n},
                                                                                                  renc("Once"),
                                                                                                  {n + 1},
                                                                                                  {n + 2}}));

  // /infill through parse_infill: the prompt is ids, the rest /completion's.
  const auto infill = server::parse_infill(
      R"({"input_prefix": "Once", "input_suffix": "end", "prompt": "the", "n_predict": 4})", tokenizer, 512, {});
  ASSERT_EQ(infill.api.prompts.size(), 1u);
  EXPECT_EQ(infill.api.prompts[0].ids, server::infill_prompt(tokenizer, fim, "Once", "end", {}, "the"));
  EXPECT_EQ(infill.api.params.max_tokens, 4);

  // A vocabulary without them: a 400 naming each missing token.
  const ApiError missing =
      refusal_of([] { server::parse_infill(R"({"input_prefix": "a"})", aidreams_tokenizer(), 512, {}); });
  EXPECT_EQ(missing.status, 400);
  for (const char* what : {"prefix", "suffix", "middle", "fim_pre_token_id"})
    EXPECT_NE(std::string(missing.what()).find(what), std::string::npos) << missing.what();
  const ApiError shape =
      refusal_of([&] { server::parse_infill(R"({"input_extra": [{"text": 3}]})", tokenizer, 512, {}); });
  EXPECT_EQ(shape.param, "input_extra[0]") << shape.what();
}

TEST(LlamaServerApi, EmbeddingBodiesNormsAndShape) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const Tokenizer& tokenizer = aidreams_tokenizer();
  int32_t norm = 0;
  const auto content = server::parse_native_embedding(R"({"content": "I see"})", tokenizer, 64, 128, 4, "", norm);
  EXPECT_EQ(content.inputs[0], tokenizer.encode("I see", tokenizer.vocab().add_bos));
  EXPECT_EQ(norm, 2);
  server::parse_native_embedding(R"({"input": ["a", "b"], "embd_normalize": -1})", tokenizer, 64, 128, 4, "", norm);
  EXPECT_EQ(norm, -1);
  const ApiError none = refusal_of([&] { server::parse_native_embedding("{}", tokenizer, 64, 128, 4, "", norm); });
  EXPECT_EQ(none.param, "content");
  const ApiError both = refusal_of(
      [&] { server::parse_native_embedding(R"({"content": "a", "input": "b"})", tokenizer, 64, 128, 4, "", norm); });
  EXPECT_EQ(both.status, 400);

  const std::vector<float> v = {3.0f, -4.0f};
  const auto normed = [&](int32_t p) {
    std::vector<float> x = v;
    server::normalize_embedding(x, p);
    return x;
  };
  EXPECT_EQ(normed(-1), v);
  EXPECT_EQ(normed(0), (std::vector<float>{0.75f, -1.0f}));
  EXPECT_EQ(normed(1), (std::vector<float>{3.0f / 7, -4.0f / 7}));
  EXPECT_EQ(normed(2), (std::vector<float>{0.6f, -0.8f}));
  const std::vector<float> p3 = normed(3);
  EXPECT_NEAR(std::pow(std::fabs(p3[0]), 3) + std::pow(std::fabs(p3[1]), 3), 1.0, 1e-6);
  EXPECT_EQ(server::native_embedding_json({{1.0f, 2.0f}}), json::parse(R"([{"index": 0, "embedding": [[1.0, 2.0]]}])"));
  // --pooling none: every token's row.
  EXPECT_EQ(server::native_embedding_json({{1.0f, 2.0f, 3.0f, 4.0f}}, 2),
            json::parse(R"([{"index": 0, "embedding": [[1.0, 2.0], [3.0, 4.0]]}])"));
}

TEST(LlamaServerApi, RerankBodiesInputsAndRanking) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const Tokenizer& tokenizer = aidreams_tokenizer();
  const auto rerank = [&](const std::string& body, bool can_rank = true) {
    return refusal_of([&] { server::parse_rerank(body, tokenizer, 128, 4, can_rank); });
  };
  EXPECT_EQ(rerank(R"({"documents": ["a"]})").param, "query");
  EXPECT_EQ(rerank(R"({"query": "q"})").param, "documents");
  EXPECT_EQ(rerank(R"({"query": "q", "documents": ["a", 3]})").param, "documents[1]");
  EXPECT_EQ(rerank(R"({"query": "q", "documents": ["a"], "top_n": 0})").param, "top_n");
  EXPECT_EQ(rerank(R"({"query": "q", "documents": ["a", "b", "c", "d", "e"]})").param, "documents");
  // A model without a head: the body is checked first, then the 400 that says why.
  const ApiError refused = rerank(R"({"query": "q", "documents": ["a", "b"], "top_n": 1})", false);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(std::string(refused.what()).find("cls.output.weight"), std::string::npos) << refused.what();

  // [BOS] query [EOS] document [EOS], one sequence per document.
  const auto request = server::parse_rerank(R"({"query": "I see", "documents": ["a cat", "the sun"], "top_n": 1,
                                                "return_documents": true, "model": "m"})",
                                            tokenizer, 128, 4, true);
  ASSERT_EQ(request.inputs.size(), 2u);
  const Vocab& vocab = tokenizer.vocab();
  std::vector<int32_t> expected;
  if (vocab.add_bos) expected.push_back(vocab.bos_id);
  for (int32_t id : tokenizer.encode("I see", false)) expected.push_back(id);
  expected.push_back(vocab.eos_id);
  for (int32_t id : tokenizer.encode("the sun", false)) expected.push_back(id);
  expected.push_back(vocab.eos_id);
  EXPECT_EQ(request.inputs[1], expected);
  EXPECT_EQ(request.model, "m");

  // Most relevant first, top_n of them, with the document's text when asked.
  const json ranked = server::rerank_response_json(request, {0.25f, 0.75f}, "m", 9);
  EXPECT_EQ(ranked["results"],
            json::parse(R"([{"index": 1, "relevance_score": 0.75, "document": {"text": "the sun"}}])"));
  EXPECT_EQ(ranked["usage"]["prompt_tokens"], 9);
  server::RerankRequest all = request;
  all.top_n = 0;
  all.return_documents = false;
  EXPECT_EQ(server::rerank_response_json(all, {0.5f, -1.0f}, "m", 9)["results"],
            json::parse(R"([{"index": 0, "relevance_score": 0.5}, {"index": 1, "relevance_score": -1.0}])"));
}

TEST(LlamaServerApi, RankHeadScores) {
  server::RankHead head;
  head.d_model = 2;
  head.n_out = 1;
  head.out = {2.0f, -1.0f};
  head.out_bias = {0.5f};
  EXPECT_EQ(head.scores(std::vector<float>{1.0f, 3.0f}), std::vector<float>{-0.5f});
  // With the dense layer: tanh(W h + b) first.
  head.dense = {1.0f, 0.0f, 0.0f, 1.0f};
  head.dense_bias = {0.0f, 0.0f};
  EXPECT_FLOAT_EQ(head.scores(std::vector<float>{1.0f, 3.0f})[0],
                  static_cast<float>(2 * std::tanh(1.0) - std::tanh(3.0) + 0.5));
}

TEST(LlamaServerApi, SlotFileNamesAndRoundTrip) {
  const ApiError no_dir = refusal_of([] { server::slot_file_path("", "a.bin"); });
  EXPECT_NE(std::string(no_dir.what()).find("--slot-save-path"), std::string::npos) << no_dir.what();
  for (const char* name : {"", "../a", "a/b", "..", "a\\b", "a\nb"}) {
    const ApiError bad = refusal_of([&] { server::slot_file_path("/tmp", name); });
    EXPECT_EQ(bad.param, "filename") << name;
  }
  EXPECT_EQ(server::slot_file_path("/tmp/d", "slot0.bin"), "/tmp/d/slot0.bin");

  const std::string path =
      (std::filesystem::temp_directory_path() / ("tandem-slot-" + std::to_string(::getpid()) + ".bin")).string();
  server::SlotFile file;
  file.block_size = 2;
  file.tokens = {1, 2, 3, 4, 5};
  file.blocks = {{1, 2, 3}, {4, 5}};
  int64_t read = 0;
  const int64_t written = server::write_slot_file(path, file);
  const server::SlotFile back = server::read_slot_file(path, &read);
  EXPECT_EQ(read, written);
  EXPECT_EQ(back.block_size, 2);
  EXPECT_EQ(back.tokens, file.tokens);
  EXPECT_EQ(back.blocks, file.blocks);
  // Cut short, or not a slot file: refused with the file's name.
  std::filesystem::resize_file(path, static_cast<uintmax_t>(written - 1));
  EXPECT_THROW(server::read_slot_file(path), InputError);
  std::filesystem::remove(path);
  EXPECT_THROW(server::read_slot_file(path), InputError);
}

TEST(LlamaServerApi, SlotTableTakesTheLowestIdleSlot) {
  server::SlotTable slots;
  slots.resize(2);
  EXPECT_EQ(slots.acquire(7, {1, 2}, 4, json::object()), 0);
  EXPECT_EQ(slots.acquire(8, {3}, 4, json::object()), 1);
  EXPECT_EQ(slots.acquire(9, {3}, 4, json::object()), -1);  // waits in the engine's queue
  slots.advance(0, {5}, false);
  EXPECT_TRUE(slots.at(0).processing);
  slots.advance(0, {6}, true);
  EXPECT_FALSE(slots.at(0).processing);
  EXPECT_EQ(slots.at(0).tokens, (std::vector<int32_t>{1, 2, 5, 6}));
  EXPECT_EQ(slots.at(0).n_decoded, 2);
  EXPECT_EQ(slots.acquire(10, {4}, 4, json::object()), 0);  // 1 is still busy
  slots.advance(0, {}, true);
  EXPECT_EQ(slots.erase(0), 1);
  EXPECT_TRUE(slots.at(0).tokens.empty());
}

}  // namespace
}  // namespace tandem::testing
