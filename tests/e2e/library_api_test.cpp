// The library is usable without the CLI: the public C++ API (include/tandem/tandem.h) gives
// llama2.c's greedy continuations, shares one model and one engine between threads without
// changing a token, cancels, reports usage and timings, tokenizes and renders chats, and
// reports bad input as tandem::api::Error.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "greedy_reference.h"
#include "support/run_binary.h"
#include "tandem/tandem.h"

namespace tandem::testing {
namespace {

namespace api = tandem::api;

std::shared_ptr<const api::Model> load_aidreams(const api::ModelOptions& options = {}) {
  return api::Model::load(shared_path("models/aidreams260K/model.gguf"), options);
}

api::GenerateOptions greedy(int64_t max_tokens) {
  api::GenerateOptions options;
  options.temperature = 0;
  options.max_tokens = max_tokens;
  return options;
}

api::EngineOptions engine_options(int threads = 1, int32_t max_sequences = 4) {
  api::EngineOptions options;
  options.threads = threads;
  options.max_sequences = max_sequences;
  return options;
}

std::vector<int32_t> whole_sequence(const api::Result& result) {
  std::vector<int32_t> ids = result.prompt_ids;
  ids.insert(ids.end(), result.tokens.begin(), result.tokens.end());
  return ids;
}

TEST(LibraryApi, GreedyGenerationThroughThePublicHeader) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  std::string streamed;
  const api::Result result =
      engine.generate("The dream", greedy(20), [&](std::string_view piece) { streamed += piece; });
  EXPECT_EQ(streamed, result.text);
  EXPECT_EQ(result.text.rfind(" align, as I seep into the void.", 0), 0u) << result.text;
  EXPECT_EQ(result.finish_reason, api::FinishReason::Length);
  EXPECT_EQ(result.tokens.size(), 20u);
  // A second request on the same engine starts afresh (and may reuse the prompt's KV blocks).
  EXPECT_EQ(engine.generate("The dream", greedy(20)).text, result.text);
}

// llama2.c's run.c keeps its KV cache in f32; its references are compared with an f32 cache.
api::EngineOptions f32_kv(api::EngineOptions options) {
  options.kv_type_k = options.kv_type_v = api::KvCacheType::F32;
  return options;
}

TEST(LibraryApi, GreedyGenerationMatchesRunC) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), f32_kv(engine_options()));
  const std::vector<ReferenceRun> runs = read_reference();
  ASSERT_FALSE(runs.empty());
  for (const ReferenceRun& run : runs) {
    // run.c stops at the 128-token context; a larger max_tokens lets the context end it too.
    const api::Result result = engine.generate(run.prompt, greedy(1000));
    EXPECT_EQ(whole_sequence(result), run.ids) << "prompt: '" << run.prompt << "'";
    EXPECT_EQ(run.prompt + result.text, run.text);
    EXPECT_EQ(result.finish_reason, api::FinishReason::ContextLimit);
  }
}

TEST(LibraryApi, PromptLongerThanContextIsAnError) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += "dream ";
  try {
    engine.generate(prompt, greedy(4));
    FAIL() << "no error";
  } catch (const api::Error& error) {
    EXPECT_NE(std::string(error.what()).find("context"), std::string::npos) << error.what();
  }
  // A bad request fails alone: the engine keeps serving.
  EXPECT_EQ(engine.generate("The dream", greedy(4)).tokens.size(), 4u);
}

TEST(LibraryApi, MissingModelIsAnErrorNamingThePath) {
  try {
    api::Model::load("/nonexistent/model.gguf");
    FAIL() << "no error";
  } catch (const api::Error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/model.gguf"), std::string::npos) << error.what();
  }
}

TEST(LibraryApi, KvCacheTypesAndTheirBytes) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  EXPECT_EQ(model->kv_bytes_per_token(), model->kv_bytes_per_token(api::KvCacheType::F16, api::KvCacheType::F16));
  EXPECT_LT(model->kv_bytes_per_token(), model->kv_bytes_per_token(api::KvCacheType::F32, api::KvCacheType::F32));
  api::EngineOptions bf16 = engine_options();
  bf16.kv_type_k = bf16.kv_type_v = api::KvCacheType::BF16;
  api::Engine engine(model, bf16);
  const api::Result result = engine.generate("The dream", greedy(12));
  EXPECT_EQ(result.tokens.size(), 12u);
  EXPECT_EQ(result.usage.kv_bytes % model->kv_bytes_per_token(api::KvCacheType::BF16, api::KvCacheType::BF16), 0);
  api::EngineOptions q8 = engine_options();
  q8.kv_type_k = api::KvCacheType::Q8_0;  // aidreams260K's heads are 16 wide: not whole blocks of 32
  EXPECT_THROW(api::Engine(model, q8), api::Error);
}

TEST(LibraryApi, UnusableOptionsAreErrors) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  api::EngineOptions no_sequences = engine_options();
  no_sequences.max_sequences = 0;
  EXPECT_THROW(api::Engine(model, no_sequences), api::Error);
  api::Engine engine(model, engine_options());
  api::GenerateOptions bad_penalty = greedy(4);
  bad_penalty.repetition_penalty = 0;
  EXPECT_THROW(engine.generate("The dream", bad_penalty), api::Error);
  EXPECT_THROW(engine.generate(std::vector<int32_t>{}, greedy(4)), api::Error);
  EXPECT_THROW(engine.generate(std::vector<int32_t>{1, 100000}, greedy(4)), api::Error);
}

// One model, one engine, two threads at once: continuous batching must not change a token.
TEST(LibraryApi, TwoThreadsOnOneModelAndEngineGiveTheTokensOfEachAlone) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  const std::vector<std::string> prompts = {"The dream", "Echoes of light"};
  std::vector<api::Result> alone;
  {
    api::Engine engine(model, engine_options());
    for (const std::string& prompt : prompts) alone.push_back(engine.generate(prompt, greedy(1000)));
  }
  api::Engine engine(model, engine_options(2));
  for (int round = 0; round < 3; ++round) {
    std::vector<api::Result> together(prompts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); ++i)
      threads.emplace_back([&, i] { together[i] = engine.generate(prompts[i], greedy(1000)); });
    for (std::thread& thread : threads) thread.join();
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << prompts[i];
      EXPECT_EQ(together[i].text, alone[i].text) << prompts[i];
    }
  }
  // A second engine on the same model, at the same time as the first.
  api::Engine second(model, engine_options());
  std::thread other([&] { EXPECT_EQ(second.generate(prompts[0], greedy(1000)).tokens, alone[0].tokens); });
  EXPECT_EQ(engine.generate(prompts[1], greedy(1000)).tokens, alone[1].tokens);
  other.join();
}

// Cancelled from its own first event, on the engine's thread: the cancel lands at the next
// step, so exactly one token was generated.
TEST(LibraryApi, CancelFromTheEventCallbackStopsTheRequest) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  api::Engine engine(model, engine_options());
  std::mutex mutex;
  std::condition_variable done;
  std::vector<api::Event> events;
  engine.submit(model->tokenize("The dream"), greedy(1000), [&](const api::Event& event) {
    if (event.tokens.size() == 1 && !event.finished && events.empty()) engine.cancel(event.request_id);
    std::lock_guard lock(mutex);
    events.push_back(event);
    done.notify_one();
  });
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return !events.empty() && events.back().finished; });
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events.back().finish_reason, api::FinishReason::Cancelled);
  EXPECT_EQ(events.back().usage.completion_tokens, 1);
}

// A stream cancelled while it waits behind a request that holds the engine's only sequence
// (held still inside its callback) ends Cancelled with no token; the engine goes on serving.
TEST(LibraryApi, CancelledStreamEndsWithoutTokens) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  api::Engine engine(model, engine_options(1, 1));
  std::mutex mutex;
  std::condition_variable changed;
  bool holding = false, release = false, blocker_done = false;
  engine.submit(model->tokenize("I see"), greedy(8), [&](const api::Event& event) {
    std::unique_lock lock(mutex);
    if (!release) {
      holding = true;
      changed.notify_all();
      changed.wait(lock, [&] { return release; });
    }
    if (event.finished) blocker_done = true;
    changed.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return holding; });
  }
  api::Stream waiting = engine.stream("The dream", greedy(1000));
  waiting.cancel();
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  changed.notify_all();
  std::vector<api::Event> events;
  for (const api::Event& event : waiting) events.push_back(event);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].finished);
  EXPECT_EQ(events[0].finish_reason, api::FinishReason::Cancelled);
  EXPECT_TRUE(events[0].tokens.empty());
  EXPECT_EQ(events[0].usage.completion_tokens, 0);
  EXPECT_FALSE(waiting.next().has_value());
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return blocker_done; });
  }
  EXPECT_EQ(engine.generate("The dream", greedy(20)).text.rfind(" align, as I seep into the void.", 0), 0u);
}

TEST(LibraryApi, DroppingAStreamOrTheEngineMidwayNeitherHangsNorLeaks) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  auto engine = std::make_unique<api::Engine>(model, engine_options());
  {
    api::Stream stream = engine->stream("The dream", greedy(1000));
    ASSERT_TRUE(stream.next().has_value());
  }  // cancelled here
  EXPECT_EQ(engine->generate("The dream", greedy(20)).tokens.size(), 20u);
  api::Stream outliving = engine->stream("I see", greedy(1000));
  engine.reset();  // stops the engine: the stream still reads to a final event
  std::optional<api::Event> last;
  while (std::optional<api::Event> event = outliving.next()) last = std::move(event);
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(last->finished);
}

TEST(LibraryApi, StreamEventsInARangeForJoinToTheGeneratedText) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  api::Stream stream = engine.stream("The dream", greedy(30));
  std::string text;
  std::vector<int32_t> tokens;
  int finished = 0;
  for (const api::Event& event : stream) {
    EXPECT_EQ(event.request_id, stream.id());
    text += event.text;
    tokens.insert(tokens.end(), event.tokens.begin(), event.tokens.end());
    finished += event.finished;
  }
  EXPECT_EQ(finished, 1);
  const api::Result whole = engine.generate("The dream", greedy(30));
  EXPECT_EQ(text, whole.text);
  EXPECT_EQ(tokens, whole.tokens);
}

TEST(LibraryApi, UsageAndTimingsArePopulated) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  api::Engine engine(model, engine_options());
  const api::Result result = engine.generate("The dream", greedy(20));
  const api::Usage& usage = result.usage;
  EXPECT_EQ(usage.prompt_tokens, static_cast<int64_t>(result.prompt_ids.size()));
  EXPECT_EQ(result.prompt_ids, model->tokenize("The dream"));
  EXPECT_EQ(usage.completion_tokens, 20);
  // Whole blocks, at least the positions the request computed (the last token is not fed).
  EXPECT_EQ(usage.kv_bytes % model->kv_bytes_per_token(), 0);
  EXPECT_GE(usage.kv_bytes, (usage.prompt_tokens + 19) * model->kv_bytes_per_token());
  const api::Timings& t = result.timings;
  EXPECT_GE(t.queue_ms, 0.0);
  EXPECT_GT(t.prefill_ms, 0.0);
  EXPECT_GE(t.ttft_ms, t.prefill_ms);
  EXPECT_GT(t.decode_ms, 0.0);
  EXPECT_GE(t.e2e_ms, t.ttft_ms + t.decode_ms * 0.999);
  ASSERT_EQ(t.itl_ms.size(), 19u);
  const double slowest = *std::max_element(t.itl_ms.begin(), t.itl_ms.end());
  EXPECT_LE(t.tpot_percentile_ms(0.5), t.tpot_percentile_ms(0.99));
  EXPECT_LE(t.tpot_percentile_ms(0.99), slowest);
  EXPECT_NEAR(t.tpot_mean_ms() * 19, t.decode_ms, 1e-6 * t.decode_ms + 1e-9);
  EXPECT_STREQ(api::finish_reason_name(result.finish_reason), "token limit");
}

TEST(LibraryApi, StopStringsAndZeroTokens) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  api::GenerateOptions options = greedy(40);
  options.stop = {" into"};
  const api::Result stopped = engine.generate("The dream", options);
  EXPECT_EQ(stopped.text, " align, as I seep");
  EXPECT_EQ(stopped.finish_reason, api::FinishReason::StopString);
  const api::Result nothing = engine.generate("The dream", greedy(0));
  EXPECT_TRUE(nothing.text.empty());
  EXPECT_TRUE(nothing.tokens.empty());
  EXPECT_EQ(nothing.finish_reason, api::FinishReason::Length);
  EXPECT_EQ(nothing.usage.prompt_tokens, static_cast<int64_t>(nothing.prompt_ids.size()));
}

// A grammar or schema constrains the output: aidreams260K writes prose unconstrained, so a
// parsed JSON object or one of two words is the grammar's doing. Bad grammars are Errors.
TEST(LibraryApi, GrammarAndJsonSchemaConstrainTheOutput) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  api::GenerateOptions options;
  options.max_tokens = 100;
  options.seed = 5;
  const api::Result free_text = engine.generate("The dream", options);
  EXPECT_NE(free_text.text, "yes");
  EXPECT_NE(free_text.text, "no");
  options.grammar = R"(root ::= "yes" | "no")";
  const api::Result word = engine.generate("The dream", options);
  EXPECT_TRUE(word.text == "yes" || word.text == "no") << word.text;
  EXPECT_EQ(word.finish_reason, api::FinishReason::EndOfSequence);
  options.grammar.clear();
  options.json_schema = R"({"type":"object","properties":{"n":{"type":"integer"},"ok":{"type":"boolean"}},)"
                        R"("required":["n","ok"],"additionalProperties":false})";
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    options.seed = seed;
    const api::Result object = engine.generate("The dream", options);
    if (object.finish_reason != api::FinishReason::EndOfSequence) continue;  // ran out of tokens mid-number
    const nlohmann::json parsed = nlohmann::json::parse(object.text, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << object.text;
    EXPECT_TRUE(parsed.at("n").is_number_integer()) << object.text;
    EXPECT_TRUE(parsed.at("ok").is_boolean()) << object.text;
    EXPECT_EQ(parsed.size(), 2u) << object.text;
  }
  options.json_schema = "{}";  // any JSON
  options.max_tokens = 200;
  const api::Result any = engine.generate("The dream", options);
  if (any.finish_reason == api::FinishReason::EndOfSequence) {
    EXPECT_FALSE(nlohmann::json::parse(any.text, nullptr, false).is_discarded()) << any.text;
  }
  options.json_schema = "{not json";
  EXPECT_THROW(engine.generate("The dream", options), api::Error);
  options.json_schema.clear();
  options.grammar = "root ::= missing";
  EXPECT_THROW(engine.generate("The dream", options), api::Error);
  options.grammar = R"(root ::= "a")";
  options.json_schema = "{}";
  EXPECT_THROW(engine.generate("The dream", options), api::Error);
}

TEST(LibraryApi, SameSeedSameText) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  api::Engine engine(load_aidreams(), engine_options());
  api::GenerateOptions options;
  options.max_tokens = 40;
  options.temperature = 0.9f;
  options.seed = 42;
  const api::Result first = engine.generate("I see", options);
  EXPECT_EQ(first.seed, 42u);
  EXPECT_EQ(engine.generate("I see", options).text, first.text);
  options.seed.reset();
  EXPECT_NE(engine.generate("I see", options).seed, engine.generate("I see", options).seed);
}

TEST(LibraryApi, TokenizeDetokenizeRoundTrip) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const auto model = load_aidreams();
  EXPECT_EQ(model->vocab_size(), 512);
  EXPECT_EQ(model->context_length(), 128);
  EXPECT_EQ(model->bos_token(), 1);
  EXPECT_EQ(model->eos_token(), 2);
  for (const std::string text : {"The dream align, as I seep into the void.", "I see", "Échos\nof light"}) {
    const std::vector<int32_t> ids = model->tokenize(text);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), model->bos_token());
    EXPECT_EQ(model->detokenize(ids), text);
    const std::vector<int32_t> without_bos = model->tokenize(text, /*add_bos=*/false);
    EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), without_bos);
    EXPECT_EQ(model->detokenize(without_bos), text);
  }
  // The reference's own ids decode to its text.
  for (const ReferenceRun& run : read_reference()) EXPECT_EQ(model->detokenize(run.ids), run.text);
  EXPECT_THROW(model->detokenize({1, 512}), api::Error);
}

TEST(LibraryApi, ChatRendersWithTheModelsTemplate) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const std::vector<api::ChatMessage> messages = {{"system", "You dream."}, {"user", "What do you see?"}};
  // This GGUF has no chat template of its own: the built-in ChatML.
  const auto model = load_aidreams();
  EXPECT_EQ(model->chat_format(), "chatml");
  EXPECT_EQ(model->render_chat(messages),
            "<|im_start|>system\nYou dream.<|im_end|>\n<|im_start|>user\nWhat do you see?<|im_end|>\n"
            "<|im_start|>assistant\n");
  const auto llama2 = load_aidreams({.tokenizer_path = "", .chat_template = "llama2"});
  EXPECT_EQ(llama2->chat_format(), "llama2");
  EXPECT_NE(llama2->render_chat(messages).find("[INST]"), std::string::npos);
  EXPECT_THROW(load_aidreams({.tokenizer_path = "", .chat_template = "no-such-format"}), api::Error);
  EXPECT_THROW(model->render_chat({{"narrator", "x"}}), api::Error);

  const std::vector<int32_t> ids = model->tokenize_chat(messages);
  EXPECT_EQ(ids.front(), model->bos_token());
  EXPECT_EQ(model->detokenize(ids), model->render_chat(messages));
  api::Engine engine(model, engine_options());
  const api::Result reply = engine.chat(messages, greedy(8));
  EXPECT_EQ(reply.prompt_ids, ids);
  EXPECT_EQ(reply.tokens.size(), 8u);
  EXPECT_EQ(reply.text, engine.generate(ids, greedy(8)).text);
}

TEST(LibraryApi, Llama2cCheckpointWithItsTokenizer) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.bin");
  const auto model =
      api::Model::load(shared_path("models/aidreams260K/model.bin"),
                       {.tokenizer_path = shared_path("models/aidreams260K/tok512.bin"), .chat_template = ""});
  api::Engine engine(model, f32_kv(engine_options()));
  const ReferenceRun run = read_reference().at(1);
  EXPECT_EQ(whole_sequence(engine.generate(run.prompt, greedy(1000))), run.ids);
}

}  // namespace
}  // namespace tandem::testing
