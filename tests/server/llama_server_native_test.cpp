// llama-server's native endpoints on the real `tandem serve` over 127.0.0.1 (aidreams260K:
// greedy text is deterministic, so /completion is checked against /v1/completions): /completion
// and /completions whole and streamed (its chunks, the final result, stop types, n_probs), the
// server's limits and API key on every native path, /infill's 400 for a model without FIM
// tokens, /embedding's shape against /v1/embeddings, /rerank's 400, GET /slots, and slot save,
// erase and restore under --slot-save-path (a restored slot's blocks serve a later prompt from
// the prefix cache of a fresh server).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generated_tiny_model.h"
#include "json_replies.h"
#include "raw_http.h"
#include "server/llama_server_api.h"
#include "server/rank_head.h"
#include "server_process.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

httplib::Result post(httplib::Client& client, const std::string& path, const json& body) {
  return post_json(client, path, body);
}

// Greedy, to the limit: the same text on every server and endpoint.
json greedy(const std::string& prompt, int n) {
  return {{"prompt", prompt}, {"n_predict", n}, {"temperature", 0}, {"ignore_eos", true}};
}

TEST(NativeServer, CompletionWholeStreamedAndAsV1Completions) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"})) << server.log();
  httplib::Client client = server.client();

  json body = greedy("Once upon a time", 6);
  body["n_probs"] = 2;
  body["return_tokens"] = true;
  const json whole = ok_json(post(client, "/completion", body), "/completion");
  ASSERT_TRUE(whole.is_object()) << whole;
  EXPECT_EQ(whole["stop"], true);
  EXPECT_EQ(whole["stop_type"], "limit");
  EXPECT_EQ(whole["stopped_limit"], true);
  EXPECT_EQ(whole["tokens_predicted"], 6);
  EXPECT_EQ(whole["tokens"].size(), 6u);
  EXPECT_GT(whole["tokens_evaluated"].get<int>(), 1);
  EXPECT_EQ(whole["prompt"], "Once upon a time");
  EXPECT_EQ(whole["generation_settings"]["n_predict"], 6);
  EXPECT_EQ(whole["generation_settings"]["n_probs"], 2);
  EXPECT_TRUE(whole["timings"].contains("predicted_per_second")) << whole;
  ASSERT_EQ(whole["completion_probabilities"].size(), 6u) << whole;
  for (size_t i = 0; i < 6; ++i) {
    const json& p = whole["completion_probabilities"][i];
    EXPECT_EQ(p["id"], whole["tokens"][i]);
    EXPECT_EQ(p["top_logprobs"].size(), 2u);
    EXPECT_LE(p["logprob"].get<double>(), 0.0);
  }
  const std::string text = whole["content"];

  // The generation path is /v1/completions': the same tokens for the same request.
  const json v1 =
      ok_json(post(client, "/v1/completions",
                   {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}}),
              "/v1/completions");
  EXPECT_EQ(v1["choices"][0]["text"], text);
  EXPECT_EQ(ok_json(post(client, "/completions", greedy("Once upon a time", 6)), "/completions")["content"], text);

  // Streamed: one chunk per token (content, tokens, stop false), then the final result; no [DONE].
  json streamed = greedy("Once upon a time", 6);
  streamed["stream"] = true;
  const httplib::Result stream = post(client, "/completion", streamed);
  ASSERT_TRUE(stream && stream->status == 200) << (stream ? stream->body : "no response");
  EXPECT_NE(stream->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<std::string> events = sse_data(stream->body);
  ASSERT_GE(events.size(), 2u) << stream->body;
  std::string joined;
  size_t token_chunks = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i], nullptr, false);
    ASSERT_TRUE(chunk.is_object()) << events[i];
    EXPECT_EQ(chunk["stop"], false) << events[i];
    joined += chunk["content"].get<std::string>();
    token_chunks += chunk["tokens"].size();
  }
  const json last = json::parse(events.back(), nullptr, false);
  EXPECT_EQ(last["stop"], true) << events.back();
  EXPECT_EQ(last["stop_type"], "limit");
  EXPECT_EQ(last["tokens_predicted"], 6);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(token_chunks, 6u);
  EXPECT_EQ(stream->body.find("[DONE]"), std::string::npos);

  // A stop word: the text before it, stop_type "word", the word named.
  ASSERT_GE(text.size(), 4u) << text;
  const std::string word = text.substr(2, 2);
  json stopped = greedy("Once upon a time", 6);
  stopped["stop"] = {word};
  const json at_word = ok_json(post(client, "/completion", stopped), "stop word");
  EXPECT_EQ(at_word["stop_type"], "word") << at_word;
  EXPECT_EQ(at_word["stopped_word"], true);
  EXPECT_EQ(at_word["stopping_word"], word);
  EXPECT_EQ(at_word["content"], text.substr(0, text.find(word)));

  // A grammar: the output is one of its strings, ended as the grammar completes (eos).
  json constrained = greedy("Once upon a time", 6);
  constrained["grammar"] = R"(root ::= "yes" | "no")";
  constrained.erase("ignore_eos");
  const json answer = ok_json(post(client, "/completion", constrained), "grammar");
  EXPECT_TRUE(answer["content"] == "yes" || answer["content"] == "no") << answer;
  EXPECT_EQ(answer["stop_type"], "eos") << answer;

  // Several prompts: an array of results, in order.
  json several = greedy("", 3);
  several["prompt"] = {"Once upon a time", "The"};
  const json results = ok_json(post(client, "/completion", several), "two prompts");
  ASSERT_TRUE(results.is_array() && results.size() == 2) << results;
  EXPECT_EQ(results[0]["index"], 0);
  EXPECT_EQ(results[1]["index"], 1);
  EXPECT_EQ(results[0]["content"], text.substr(0, results[0]["content"].get<std::string>().size()));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// llama-server's /completion matches control tokens written in the prompt ("</s>" is the EOS
// token there); OpenAI's /v1/completions keeps them as text, as Tandem always has. The prompt
// token counts show which: one token for the tag, or the several of its characters.
TEST(NativeServer, CompletionParsesControlTokensInThePromptText) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"})) << server.log();
  httplib::Client client = server.client();
  const auto evaluated = [&](const json& prompt) {
    json body = greedy("", 1);
    body["prompt"] = prompt;
    const json reply = ok_json(post(client, "/completion", body), "/completion");
    return reply["tokens_evaluated"].get<int>();
  };
  const auto v1_prompt_tokens = [&](const std::string& prompt) {
    const json reply =
        ok_json(post(client, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}),
                "/v1/completions");
    return reply["usage"]["prompt_tokens"].get<int>();
  };
  const int plain = evaluated("Once upon a time");
  // The tag adds exactly one token on /completion, in a string prompt and in a mixed one.
  EXPECT_EQ(evaluated("Once upon a time</s>"), plain + 1);
  EXPECT_EQ(evaluated(json::array({"Once upon a time</s>"})), plain + 1);
  // /v1/completions spells it out: more than one token.
  EXPECT_GT(v1_prompt_tokens("Once upon a time</s>"), v1_prompt_tokens("Once upon a time") + 1);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NativeServer, LimitsKeyAndMalformedBodiesOnEveryNativePath) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.start({"--api-key", "K", "--max-body-bytes", "4096"})) << server.log();
  httplib::Client anonymous = server.client();
  httplib::Client client = server.client();
  client.set_bearer_token_auth("K");
  for (const char* path : {"/completion", "/completions", "/infill", "/embedding", "/embeddings", "/rerank",
                           "/v1/rerank", "/v1/reranking", "/slots/0?action=erase"}) {
    expect_error(post(anonymous, path, greedy("a", 1)), 401, "API key", path);
    expect_error(client.Post(path, "{\"prompt\": ", "application/json"), 400, "", path);
    expect_error(client.Post(path, std::string(5000, ' '), "application/json"), 413, "over the limit", path);
  }
  expect_error(anonymous.Get("/slots"), 401, "API key", "/slots");
  EXPECT_TRUE(ok_json(client.Get("/slots"), "/slots with the key").is_array());

  // The prompt against the context (128 tokens): before tokenizing when the bytes say so, after when not.
  const json too_long = expect_error(post(client, "/completion", greedy(std::string(3000, 'a'), 1)), 400,
                                     "the context is 128 tokens", "long prompt");
  EXPECT_EQ(too_long["code"], "context_length_exceeded");
  json ids = greedy("", 1);
  ids["prompt"] = std::vector<int>(200, 5);
  expect_error(post(client, "/completion", ids), 400, "the context is 128 tokens", "200 ids");
  const json n_probs =
      expect_error(post(client, "/completion", {{"prompt", "a"}, {"n_probs", 50}}), 400, "n_probs", "n_probs 50");
  EXPECT_EQ(n_probs["param"], "n_probs");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NativeServer, InfillEmbeddingRerankAndSlots) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "3"})) << server.log();
  httplib::Client client = server.client();

  // aidreams' vocabulary has no FIM tokens: the 400 names each missing one.
  const json infill = expect_error(post(client, "/infill", {{"input_prefix", "def f():"}, {"input_suffix", "x"}}), 400,
                                   "cannot infill", "/infill");
  for (const char* token : {"prefix", "suffix", "middle"})
    EXPECT_NE(infill.value("message", "").find(token), std::string::npos) << infill;

  // /embedding: llama-server's nesting of the vector /v1/embeddings returns (both unit length).
  const json native = ok_json(post(client, "/embedding", {{"content", "Once upon a time"}}), "/embedding");
  ASSERT_TRUE(native.is_array() && native.size() == 1) << native;
  EXPECT_EQ(native[0]["index"], 0);
  const json vector = native[0]["embedding"][0];
  const json openai = ok_json(post(client, "/v1/embeddings", {{"input", "Once upon a time"}}), "/v1/embeddings");
  EXPECT_EQ(vector, openai["data"][0]["embedding"]);
  const json raw =
      ok_json(post(client, "/embeddings", {{"content", "Once upon a time"}, {"embd_normalize", -1}}), "/embeddings");
  double norm = 0.0;
  for (const json& x : raw[0]["embedding"][0]) norm += x.get<double>() * x.get<double>();
  EXPECT_GT(std::fabs(std::sqrt(norm) - 1.0), 1e-3) << "embd_normalize -1 left it normalised";

  for (const char* path : {"/rerank", "/v1/rerank", "/v1/reranking"}) {
    expect_error(post(client, path, {{"query", "q"}, {"documents", {"a", "b"}}, {"top_n", 1}}), 400, "cannot rank",
                 path);
    EXPECT_EQ(expect_error(post(client, path, {{"query", "q"}}), 400, "'documents' is required", path)["param"],
              "documents");
  }

  // /slots: --parallel places; a finished request leaves its prompt and count in slot 0.
  json slots = ok_json(client.Get("/slots"), "/slots");
  ASSERT_TRUE(slots.is_array() && slots.size() == 3) << slots;
  EXPECT_EQ(slots[0]["is_processing"], false);
  EXPECT_EQ(slots[0]["n_ctx"], 128);
  ok_json(post(client, "/completion", greedy("Once upon a time", 4)), "a completion");
  slots = ok_json(client.Get("/slots"), "/slots after");
  EXPECT_EQ(slots[0]["prompt"], "Once upon a time") << slots[0];
  EXPECT_EQ(slots[0]["next_token"]["n_decoded"], 4) << slots[0];
  EXPECT_EQ(slots[0]["params"]["temperature"], 0.0) << slots[0];
  expect_error(post(client, "/slots/0?action=save", {{"filename", "a.bin"}}), 400, "--slot-save-path", "no dir");
  expect_error(post(client, "/slots/7?action=erase", json::object()), 400, "'id_slot'", "slot 7");
  expect_error(post(client, "/slots/0?action=drop", json::object()), 400, "'action'", "drop");
  const json erased = ok_json(post(client, "/slots/0?action=erase", json::object()), "erase");
  EXPECT_EQ(erased["id_slot"], 0);
  EXPECT_GT(erased["n_erased"].get<int>(), 4);
  EXPECT_EQ(ok_json(client.Get("/slots"), "/slots erased")[0]["prompt"], "");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NativeServer, SlotSavedAndRestoredIntoAFreshServersPrefixCache) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tandem-slots-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string prompt = "Once upon a time there was a little girl who lived in a village near the forest";
  json continued;  // the first request's prompt and output as ids, with 4 more tokens asked for
  std::string reference;
  int64_t saved = 0;
  {
    ServerProcess server;
    ASSERT_TRUE(server.start({"--slot-save-path", dir.string(), "--kv-block", "16"})) << server.log();
    httplib::Client client = server.client();
    json first = greedy(prompt, 8);
    first["return_tokens"] = true;
    const json output = ok_json(post(client, "/completion", first), "first");
    expect_error(post(client, "/slots/0?action=save", {{"filename", "../escape.bin"}}), 400, "bare file name", "../");
    expect_error(post(client, "/slots/0?action=save", json::object()), 400, "'filename' is required", "no name");
    const json save = ok_json(post(client, "/slots/0?action=save", {{"filename", "slot0.bin"}}), "save");
    saved = save["n_saved"].get<int64_t>();
    EXPECT_GE(saved, 17) << save;
    EXPECT_EQ((saved - 1) % 16, 0) << save;  // whole blocks and one token more
    EXPECT_GT(save["n_written"].get<int64_t>(), 0);
    EXPECT_TRUE(std::filesystem::exists(dir / "slot0.bin"));
    json ids = ok_json(post(client, "/tokenize", {{"content", prompt}, {"add_special", true}}), "tokenize")["tokens"];
    for (const json& id : output["tokens"]) ids.push_back(id);
    continued = greedy("", 4);
    continued["prompt"] = ids;
    reference = ok_json(post(client, "/completion", continued), "reference")["content"];
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  ServerProcess fresh;
  ASSERT_TRUE(fresh.start({"--slot-save-path", dir.string(), "--kv-block", "16"})) << fresh.log();
  httplib::Client client = fresh.client();
  expect_error(post(client, "/slots/1?action=restore", {{"filename", "none.bin"}}), 400, "no slot file", "missing");
  const json restore = ok_json(post(client, "/slots/1?action=restore", {{"filename", "slot0.bin"}}), "restore");
  EXPECT_EQ(restore["n_restored"], saved) << restore;
  EXPECT_EQ(restore["id_slot"], 1);
  // The saved sequence continued now starts from the restored blocks, and decodes as before.
  const json again = ok_json(post(client, "/completion", continued), "after restore");
  EXPECT_GE(again["tokens_cached"].get<int64_t>(), saved - 1) << again;
  EXPECT_EQ(again["content"], reference);
  EXPECT_EQ(fresh.stop(), 0) << fresh.log();
  std::filesystem::remove_all(dir);
}

// --pooling none: /embedding answers every prompt token's final-norm state, unnormalised (as
// llama-server does), the last row equal to what --pooling last gives; /v1/embeddings refuses.
TEST(NativeServer, EmbeddingPerTokenWithPoolingNone) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string text = "Once upon a time";
  std::vector<float> last;
  {
    ServerProcess server;
    ASSERT_TRUE(server.start({"--pooling", "last"})) << server.log();
    httplib::Client client = server.client();
    last = ok_json(post(client, "/embedding", {{"content", text}, {"embd_normalize", -1}}), "last")[0]["embedding"][0]
               .get<std::vector<float>>();
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  ServerProcess server;
  ASSERT_TRUE(server.start({"--pooling", "none"})) << server.log();
  httplib::Client client = server.client();
  const json tokens = ok_json(post(client, "/tokenize", {{"content", text}, {"add_special", true}}), "tokenize");
  const json rows = ok_json(post(client, "/embedding", {{"content", text}}), "none")[0]["embedding"];
  ASSERT_EQ(rows.size(), tokens["tokens"].size()) << rows.size();
  for (const json& row : rows) EXPECT_EQ(row.size(), 64u);
  const std::vector<float> final_row = rows.back().get<std::vector<float>>();
  ASSERT_EQ(final_row.size(), last.size());
  for (size_t i = 0; i < last.size(); ++i) EXPECT_NEAR(final_row[i], last[i], 1e-4) << i;
  expect_error(post(client, "/v1/embeddings", {{"input", text}}), 400, "--pooling none", "/v1/embeddings");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A random model with a classification head (gen-model --rank-head 1): /rerank orders the
// documents by the head's score of each [BOS] query [EOS] document [EOS] sequence's last hidden
// state, which /embedding (last pooling, no normalisation) gives for the same ids.
TEST(NativeServer, RerankScoresWithTheModelsHead) {
  const char* const vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
  TANDEM_REQUIRE_SHARED(vocab);
  static const GeneratedTinyModel model("tandem-reranker", shared_path(vocab), "--rank-head 1");
  ASSERT_FALSE(model.path().empty()) << "gen-model failed";
  ServerProcess server;
  ASSERT_TRUE(server.start({"--pooling", "last"}, 60.0, model.path())) << server.log();
  httplib::Client client = server.client();
  client.set_read_timeout(60, 0);

  const std::vector<std::string> documents = {"the cat sat on the mat", "stocks fell", "a dog barked", "rain"};
  const json body = {{"query", "where is the cat"}, {"documents", documents}, {"return_documents", true}};
  const json ranked = ok_json(post(client, "/v1/rerank", body), "/v1/rerank");
  ASSERT_EQ(ranked["results"].size(), documents.size()) << ranked;
  for (size_t k = 1; k < documents.size(); ++k)
    EXPECT_GE(ranked["results"][k - 1]["relevance_score"].get<double>(),
              ranked["results"][k]["relevance_score"].get<double>());
  for (const json& result : ranked["results"])
    EXPECT_EQ(result["document"]["text"], documents[result["index"].get<size_t>()]);
  json top = body;
  top["top_n"] = 2;
  const json best = ok_json(post(client, "/rerank", top), "/rerank top_n");
  ASSERT_EQ(best["results"].size(), 2u);
  EXPECT_EQ(best["results"][0]["index"], ranked["results"][0]["index"]);

  // The score is the head over the last hidden state, as /embedding returns it.
  const Tokenizer tokenizer = load_tokenizer(model.path(), "", 4096);
  const server::RerankRequest request = server::parse_rerank(body.dump(), tokenizer, 4096, 8, true);
  for (const json& result : ranked["results"]) {
    const size_t i = result["index"];
    const json hidden =
        ok_json(post(client, "/embedding", {{"content", request.inputs[i]}, {"embd_normalize", -1}}), "/embedding");
    const std::vector<float> h = hidden[0]["embedding"][0].get<std::vector<float>>();
    const server::RankHead head = server::read_rank_head(model.path(), static_cast<int64_t>(h.size()));
    ASSERT_EQ(head.n_out, 1);
    const float score = head.scores(h)[0];
    EXPECT_NEAR(result["relevance_score"].get<double>(), score, 1e-4 * (1.0 + std::fabs(score))) << i;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace tandem::testing
