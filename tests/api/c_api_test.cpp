// The C API (include/tandem/tandem_c.h) as a C caller meets it: status codes and messages
// instead of exceptions, NULL arguments refused, caller buffers sized by a first call,
// greedy generation equal to llama2.c's reference, streams, and cancellation by the callback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "api/c_boundary.h"
#include "base/build_info.h"
#include "tandem/tandem.h"
#include "tandem/tandem_c.h"

namespace {

std::string shared_path(const std::string& relative) { return std::string(TANDEM_SHARED_DIR) + "/" + relative; }

// "The dream" and its greedy continuation to the end of the 128-token context, from
// ../shared/models/aidreams260K/greedy-reference.jsonl.
const std::vector<int32_t> kTheDreamReference = {
    1,   368, 430, 281, 269, 435, 447, 262, 274, 359, 446, 299, 303, 266, 430, 430, 445, 362, 312, 429, 452, 437,
    361, 448, 429, 465, 438, 340, 431, 338, 353, 341, 325, 266, 386, 269, 293, 446, 262, 421, 392, 275, 280, 302,
    450, 405, 403, 399, 422, 448, 429, 465, 265, 434, 317, 431, 434, 289, 408, 326, 446, 262, 279, 438, 349, 261,
    446, 299, 303, 266, 323, 434, 285, 362, 262, 263, 428, 434, 436, 451, 275, 429, 339, 315, 374, 448, 429, 465,
    265, 434, 317, 431, 434, 289, 418, 321, 278, 416, 446, 262, 429, 453, 435, 285, 361, 437, 431, 440, 437, 445,
    430, 275, 280, 302, 450, 405, 403, 399, 448, 429, 465, 265, 434, 317, 431, 434, 279, 438, 349};

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(shared_path("models/aidreams260K/model.gguf")))
      GTEST_SKIP() << "../shared/models/aidreams260K/model.gguf is not present; skipping";
    ASSERT_EQ(tandem_model_load(shared_path("models/aidreams260K/model.gguf").c_str(), nullptr, &model_), TANDEM_OK)
        << tandem_last_error();
    tandem_engine_options options = tandem_engine_options_default();
    EXPECT_EQ(options.kv_type_k, TANDEM_KV_F16);
    EXPECT_EQ(options.kv_type_v, TANDEM_KV_F16);
    options.threads = 1;
    // kTheDreamReference is llama2.c's run.c, which keeps its KV cache in f32.
    options.kv_type_k = options.kv_type_v = TANDEM_KV_F32;
    ASSERT_EQ(tandem_engine_create(model_, &options, &engine_), TANDEM_OK) << tandem_last_error();
  }
  void TearDown() override {
    tandem_engine_free(engine_);
    tandem_model_free(model_);
  }

  static tandem_generate_options greedy(int64_t max_tokens) {
    tandem_generate_options options = tandem_generate_options_default();
    options.temperature = 0;
    options.max_tokens = max_tokens;
    return options;
  }

  std::vector<int32_t> tokenize(const std::string& text) {
    size_t n = 0;
    EXPECT_EQ(tandem_tokenize(model_, text.data(), text.size(), 1, nullptr, 0, &n), TANDEM_ERROR_BUFFER_TOO_SMALL);
    std::vector<int32_t> ids(n);
    EXPECT_EQ(tandem_tokenize(model_, text.data(), text.size(), 1, ids.data(), ids.size(), &n), TANDEM_OK);
    return ids;
  }

  tandem_model* model_ = nullptr;
  tandem_engine* engine_ = nullptr;
};

struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  int events = 0;
  int finished_events = 0;
  int cancel_after = -1;                        // return nonzero from this event on
  tandem_speculation_usage last_speculation{};  // the final event's
  std::string last_error;                       // the final event's
};

int collect(const tandem_event* event, void* user_data) {
  auto& collected = *static_cast<Collected*>(user_data);
  EXPECT_EQ(std::strlen(event->text), event->text_len);
  collected.text.append(event->text, event->text_len);
  collected.tokens.insert(collected.tokens.end(), event->tokens, event->tokens + event->n_tokens);
  collected.finished_events += event->finished;
  if (event->finished) {
    collected.last_speculation = event->speculation;
    collected.last_error.assign(event->error, event->error_len);
  }
  ++collected.events;
  return collected.cancel_after >= 0 && collected.events > collected.cancel_after;
}

TEST(CApiErrors, LoadFailuresAreStatusesWithAMessage) {
  tandem_model* model = reinterpret_cast<tandem_model*>(0x1);
  EXPECT_EQ(tandem_model_load("/nonexistent/model.gguf", nullptr, &model), TANDEM_ERROR_INPUT);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(std::string(tandem_last_error()).find("/nonexistent/model.gguf"), std::string::npos) << tandem_last_error();
  EXPECT_STREQ(tandem_status_name(TANDEM_ERROR_INPUT), "input error");
  EXPECT_EQ(tandem_model_load(nullptr, nullptr, &model), TANDEM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tandem_model_load("x.gguf", nullptr, nullptr), TANDEM_ERROR_INVALID_ARGUMENT);
  // The message is per thread: another thread's failure leaves this one's alone.
  EXPECT_EQ(tandem_model_load("/nonexistent/first.gguf", nullptr, &model), TANDEM_ERROR_INPUT);
  std::thread other([] {
    tandem_model* m = nullptr;
    EXPECT_EQ(tandem_model_load("/nonexistent/second.gguf", nullptr, &m), TANDEM_ERROR_INPUT);
    EXPECT_NE(std::string(tandem_last_error()).find("second"), std::string::npos);
  });
  other.join();
  EXPECT_NE(std::string(tandem_last_error()).find("first"), std::string::npos) << tandem_last_error();
  // NULL handles are refused or ignored, never dereferenced.
  tandem_model_free(nullptr);
  tandem_engine_free(nullptr);
  tandem_stream_free(nullptr);
  tandem_result_free(nullptr);
  EXPECT_EQ(tandem_model_vocab_size(nullptr), 0);
  tandem_engine* engine = nullptr;
  EXPECT_EQ(tandem_engine_create(nullptr, nullptr, &engine), TANDEM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tandem_generate(nullptr, "x", nullptr, nullptr, nullptr, nullptr), TANDEM_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tandem_version(), TANDEM_VERSION);
  EXPECT_STREQ(tandem::api::version(), TANDEM_VERSION);
  EXPECT_STREQ(tandem::release_version(), TANDEM_VERSION);  // what base/ and the server report
}

TEST_F(CApi, ModelProperties) {
  EXPECT_EQ(tandem_model_vocab_size(model_), 512);
  EXPECT_EQ(tandem_model_context_length(model_), 128);
  EXPECT_EQ(tandem_model_bos_token(model_), 1);
  EXPECT_EQ(tandem_model_eos_token(model_), 2);
  EXPECT_GT(tandem_model_kv_bytes_per_token(model_), 0);
}

TEST_F(CApi, TokenizeAndDetokenizeIntoCallerBuffers) {
  const std::string text = "The dream align, as I seep into the void.";
  const std::vector<int32_t> ids = tokenize(text);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  std::vector<int32_t> short_buffer(ids.size() - 1, -7);
  size_t n = 0;
  EXPECT_EQ(tandem_tokenize(model_, text.data(), text.size(), 1, short_buffer.data(), short_buffer.size(), &n),
            TANDEM_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, ids.size());
  EXPECT_EQ(short_buffer[0], -7);  // nothing written when it does not fit
  std::vector<int32_t> no_bos(ids.size());
  EXPECT_EQ(tandem_tokenize(model_, text.data(), text.size(), 0, no_bos.data(), no_bos.size(), &n), TANDEM_OK);
  EXPECT_EQ(std::vector<int32_t>(no_bos.begin(), no_bos.begin() + static_cast<long>(n)),
            std::vector<int32_t>(ids.begin() + 1, ids.end()));

  size_t length = 0;
  EXPECT_EQ(tandem_detokenize(model_, ids.data(), ids.size(), nullptr, 0, &length), TANDEM_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, text.size());
  std::string out(length, '\0');  // no room for the NUL
  EXPECT_EQ(tandem_detokenize(model_, ids.data(), ids.size(), out.data(), out.size(), &length),
            TANDEM_ERROR_BUFFER_TOO_SMALL);
  std::vector<char> buffer(length + 1);
  EXPECT_EQ(tandem_detokenize(model_, ids.data(), ids.size(), buffer.data(), buffer.size(), &length), TANDEM_OK);
  EXPECT_STREQ(buffer.data(), text.c_str());
  const int32_t outside = 512;
  EXPECT_EQ(tandem_detokenize(model_, &outside, 1, buffer.data(), buffer.size(), &length), TANDEM_ERROR_INPUT);
  EXPECT_NE(std::string(tandem_last_error()).find("512"), std::string::npos) << tandem_last_error();
}

TEST_F(CApi, ChatRendersAndTokenizes) {
  const tandem_chat_message messages[] = {{"system", "You dream."}, {"user", "What do you see?"}};
  size_t length = 0;
  EXPECT_EQ(tandem_render_chat(model_, messages, 2, nullptr, 0, &length), TANDEM_ERROR_BUFFER_TOO_SMALL);
  std::vector<char> text(length + 1);
  ASSERT_EQ(tandem_render_chat(model_, messages, 2, text.data(), text.size(), &length), TANDEM_OK);
  EXPECT_STREQ(text.data(), "<|im_start|>system\nYou dream.<|im_end|>\n<|im_start|>user\nWhat do you see?<|im_end|>\n"
                            "<|im_start|>assistant\n");
  size_t n = 0;
  EXPECT_EQ(tandem_tokenize_chat(model_, messages, 2, nullptr, 0, &n), TANDEM_ERROR_BUFFER_TOO_SMALL);
  std::vector<int32_t> ids(n);
  ASSERT_EQ(tandem_tokenize_chat(model_, messages, 2, ids.data(), ids.size(), &n), TANDEM_OK);
  Collected collected;
  tandem_generate_options options = greedy(8);
  tandem_result chat{};
  ASSERT_EQ(tandem_chat(engine_, messages, 2, &options, collect, &collected, &chat), TANDEM_OK) << tandem_last_error();
  tandem_result direct{};
  ASSERT_EQ(tandem_generate_tokens(engine_, ids.data(), ids.size(), &options, nullptr, nullptr, &direct), TANDEM_OK);
  EXPECT_STREQ(chat.text, direct.text);
  EXPECT_EQ(collected.text, chat.text);
  EXPECT_EQ(chat.n_tokens, 8u);
  tandem_result_free(&chat);
  tandem_result_free(&direct);
  const tandem_chat_message no_content[] = {{"user", nullptr}};
  EXPECT_EQ(tandem_render_chat(model_, no_content, 1, text.data(), text.size(), &length),
            TANDEM_ERROR_INVALID_ARGUMENT);
  const tandem_chat_message bad_role[] = {{"narrator", "x"}};
  EXPECT_EQ(tandem_render_chat(model_, bad_role, 1, text.data(), text.size(), &length), TANDEM_ERROR_INPUT);
}

TEST_F(CApi, GreedyGenerationMatchesRunC) {
  Collected collected;
  tandem_generate_options options = greedy(1000);
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, collect, &collected, &result), TANDEM_OK)
      << tandem_last_error();
  std::vector<int32_t> sequence = tokenize("The dream");
  sequence.insert(sequence.end(), result.tokens, result.tokens + result.n_tokens);
  EXPECT_EQ(sequence, kTheDreamReference);
  EXPECT_EQ(collected.text, std::string(result.text, result.text_len));
  EXPECT_EQ(collected.tokens, std::vector<int32_t>(result.tokens, result.tokens + result.n_tokens));
  EXPECT_EQ(collected.finished_events, 1);
  EXPECT_EQ(std::string(result.text).rfind(" align, as I seep into the void.", 0), 0u) << result.text;
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_CONTEXT_LIMIT);
  EXPECT_STREQ(tandem_finish_reason_name(result.finish_reason), "context limit");
  EXPECT_EQ(result.usage.prompt_tokens, static_cast<int64_t>(tokenize("The dream").size()));
  EXPECT_EQ(result.usage.completion_tokens, static_cast<int64_t>(result.n_tokens));
  EXPECT_GT(result.usage.kv_bytes, 0);
  EXPECT_GT(result.timings.ttft_ms, 0.0);
  EXPECT_GT(result.timings.decode_ms, 0.0);
  EXPECT_GT(result.timings.tpot_mean_ms, 0.0);
  EXPECT_LE(result.timings.tpot_p50_ms, result.timings.tpot_p99_ms);
  EXPECT_GE(result.timings.e2e_ms, result.timings.ttft_ms);
  tandem_result_free(&result);
  EXPECT_EQ(result.text, nullptr);
  tandem_result_free(&result);  // twice is harmless
}

TEST_F(CApi, PromptLookupSpeculationGivesTheSameTokens) {
  tandem_generate_options options = greedy(1000);
  options.speculation = TANDEM_SPECULATION_NGRAM;
  options.draft_max = 4;
  options.ngram_min = 1;
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_OK)
      << tandem_last_error();
  std::vector<int32_t> sequence = tokenize("The dream");
  sequence.insert(sequence.end(), result.tokens, result.tokens + result.n_tokens);
  EXPECT_EQ(sequence, kTheDreamReference);
  tandem_result_free(&result);
  options.speculation = 7;
  EXPECT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  options.speculation = TANDEM_SPECULATION_NGRAM;
  options.draft_min = 5;  // above draft_max
  EXPECT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
}

TEST_F(CApi, DraftModelSpeculationGivesTheSameTokensAndCountsThem) {
  // The model as its own draft (same KV type as the target): every greedy proposal is kept.
  tandem_engine_options options = tandem_engine_options_default();
  options.threads = 1;
  options.kv_type_k = options.kv_type_v = TANDEM_KV_F32;
  options.draft_model = model_;
  tandem_engine* with_draft = nullptr;
  ASSERT_EQ(tandem_engine_create(model_, &options, &with_draft), TANDEM_OK) << tandem_last_error();
  tandem_generate_options generate = greedy(1000);
  generate.speculation = TANDEM_SPECULATION_DRAFT;
  generate.draft_max = 4;
  Collected collected;
  tandem_result result{};
  ASSERT_EQ(tandem_generate(with_draft, "The dream", &generate, collect, &collected, &result), TANDEM_OK)
      << tandem_last_error();
  std::vector<int32_t> sequence = tokenize("The dream");
  sequence.insert(sequence.end(), result.tokens, result.tokens + result.n_tokens);
  EXPECT_EQ(sequence, kTheDreamReference);
  EXPECT_GT(result.speculation.drafted_tokens, 0);
  EXPECT_EQ(result.speculation.accepted_tokens, result.speculation.drafted_tokens);
  EXPECT_EQ(collected.last_speculation.drafted_tokens, result.speculation.drafted_tokens);
  tandem_result_free(&result);
  // An engine without a draft model refuses draft requests with a reason.
  EXPECT_EQ(tandem_generate(engine_, "The dream", &generate, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  EXPECT_NE(std::string(tandem_last_error()).find("draft"), std::string::npos) << tandem_last_error();
  tandem_engine_free(with_draft);
}

TEST_F(CApi, OptionsAndBadRequests) {
  tandem_generate_options options = greedy(40);
  const char* stops[] = {" into"};
  options.stop = stops;
  options.n_stop = 1;
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_OK);
  EXPECT_STREQ(result.text, " align, as I seep");
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_STOP_STRING);
  tandem_result_free(&result);
  options.stop = nullptr;
  EXPECT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  options = greedy(4);
  options.repetition_penalty = -1;
  EXPECT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "dream ";
  options = greedy(4);
  EXPECT_EQ(tandem_generate(engine_, long_prompt.c_str(), &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  EXPECT_NE(std::string(tandem_last_error()).find("context"), std::string::npos) << tandem_last_error();
  EXPECT_EQ(result.text, nullptr);  // a failed call leaves an empty result
  tandem_engine_options engine_options = tandem_engine_options_default();
  engine_options.max_sequences = 0;
  tandem_engine* engine = nullptr;
  EXPECT_EQ(tandem_engine_create(model_, &engine_options, &engine), TANDEM_ERROR_INPUT);
  EXPECT_EQ(engine, nullptr);
  engine_options = tandem_engine_options_default();
  engine_options.kv_type_v = TANDEM_KV_Q4_0;  // aidreams260K's heads are 16 wide: not whole blocks of 32
  EXPECT_EQ(tandem_engine_create(model_, &engine_options, &engine), TANDEM_ERROR_INPUT);
  EXPECT_NE(std::string(tandem_last_error()).find("head_dim"), std::string::npos) << tandem_last_error();
  engine_options.kv_type_v = 9;
  EXPECT_EQ(tandem_engine_create(model_, &engine_options, &engine), TANDEM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  // Seeds: the same one gives the same text; a random one is reported.
  options = tandem_generate_options_default();
  options.max_tokens = 30;
  options.seed = 7;
  tandem_result first{}, second{};
  ASSERT_EQ(tandem_generate(engine_, "I see", &options, nullptr, nullptr, &first), TANDEM_OK);
  ASSERT_EQ(tandem_generate(engine_, "I see", &options, nullptr, nullptr, &second), TANDEM_OK);
  EXPECT_STREQ(first.text, second.text);
  EXPECT_EQ(first.seed, 7u);
  tandem_result_free(&first);
  tandem_result_free(&second);
}

TEST_F(CApi, GrammarConstrainsAndBadGrammarsAreInputErrors) {
  tandem_generate_options options = tandem_generate_options_default();
  options.max_tokens = 50;
  options.seed = 3;
  options.grammar = "root ::= \"yes\" | \"no\"";
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_OK)
      << tandem_last_error();
  EXPECT_TRUE(std::string(result.text) == "yes" || std::string(result.text) == "no") << result.text;
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_END_OF_SEQUENCE);
  tandem_result_free(&result);
  options.grammar = nullptr;
  options.json_schema = "{\"enum\": [\"red\", \"green\"]}";
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_OK)
      << tandem_last_error();
  std::string value = result.text;  // JSON allows whitespace around the value
  value.erase(0, value.find_first_not_of(" \t\n\r"));
  value.erase(value.find_last_not_of(" \t\n\r") + 1);
  EXPECT_TRUE(value == "\"red\"" || value == "\"green\"") << result.text;
  tandem_result_free(&result);
  options.json_schema = "[1, 2";
  EXPECT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_ERROR_INPUT);
  EXPECT_NE(std::string(tandem_last_error()).find("json_schema"), std::string::npos) << tandem_last_error();
}

// A grammar within the compile limits whose matching is not (grammar_limits.h): after the
// forced "x", one "a" of ("a"?){0,2000} is any of 2000 places, past the per-token matching
// work. The request ends with TANDEM_FINISH_ERROR, and the reason reaches a C caller in the
// final event (stream and callback) and in the result; every other event's error is "".
TEST_F(CApi, AGrammarPastItsMatchingLimitEndsWithTheReason) {
  const std::string reason = "grammar: matching one token needed more than";
  tandem_generate_options options = tandem_generate_options_default();
  options.max_tokens = 8;
  options.seed = 1;
  options.grammar = R"(root ::= "x" ("a"?){0,2000} "b")";

  tandem_stream* stream = nullptr;
  ASSERT_EQ(tandem_stream_open(engine_, "The dream", &options, &stream), TANDEM_OK) << tandem_last_error();
  std::string text;
  tandem_event event{};
  do {
    ASSERT_EQ(tandem_stream_next(stream, &event), TANDEM_OK) << tandem_last_error();
    text.append(event.text, event.text_len);
    ASSERT_NE(event.error, nullptr);
    EXPECT_EQ(std::strlen(event.error), event.error_len);
    if (!event.finished) {
      EXPECT_STREQ(event.error, "");
    }
  } while (!event.finished);
  EXPECT_EQ(event.finish_reason, TANDEM_FINISH_ERROR);
  EXPECT_NE(std::string(event.error, event.error_len).find(reason), std::string::npos) << event.error;
  EXPECT_EQ(text, "x");  // the limit was passed mid-decode, after the grammar's first token
  tandem_stream_free(stream);

  Collected collected;
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, collect, &collected, &result), TANDEM_OK)
      << tandem_last_error();
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_ERROR);
  ASSERT_NE(result.error, nullptr);
  EXPECT_EQ(std::strlen(result.error), result.error_len);
  EXPECT_NE(std::string(result.error).find(reason), std::string::npos) << result.error;
  EXPECT_EQ(collected.last_error, result.error);
  tandem_result_free(&result);
  EXPECT_EQ(result.error, nullptr);  // freed and cleared

  tandem_generate_options plain = greedy(4);
  ASSERT_EQ(tandem_generate(engine_, "The dream", &plain, nullptr, nullptr, &result), TANDEM_OK);
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_LENGTH);
  ASSERT_NE(result.error, nullptr);
  EXPECT_STREQ(result.error, "");
  EXPECT_EQ(result.error_len, 0u);
  tandem_result_free(&result);
}

TEST_F(CApi, StreamsPullEventsToTheEnd) {
  tandem_generate_options options = greedy(20);
  options.seed = 5;
  tandem_stream* stream = nullptr;
  ASSERT_EQ(tandem_stream_open(engine_, "The dream", &options, &stream), TANDEM_OK);
  EXPECT_EQ(tandem_stream_seed(stream), 5u);
  std::string text;
  size_t tokens = 0;
  tandem_event event{};
  do {
    ASSERT_EQ(tandem_stream_next(stream, &event), TANDEM_OK) << tandem_last_error();
    text.append(event.text, event.text_len);
    tokens += event.n_tokens;
  } while (!event.finished);
  EXPECT_EQ(event.finish_reason, TANDEM_FINISH_LENGTH);
  EXPECT_EQ(event.usage.completion_tokens, 20);
  EXPECT_GT(event.timings.e2e_ms, 0.0);
  EXPECT_EQ(tokens, 20u);
  EXPECT_EQ(tandem_stream_next(stream, &event), TANDEM_ERROR_INPUT);
  tandem_stream_free(stream);
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, nullptr, nullptr, &result), TANDEM_OK);
  EXPECT_EQ(text, result.text);
  tandem_result_free(&result);

  const std::vector<int32_t> ids = tokenize("I see");
  ASSERT_EQ(tandem_stream_open_tokens(engine_, ids.data(), ids.size(), &options, &stream), TANDEM_OK);
  ASSERT_EQ(tandem_stream_next(stream, &event), TANDEM_OK);
  tandem_stream_free(stream);  // unfinished: cancelled
  EXPECT_EQ(tandem_stream_open(engine_, "I see", &options, nullptr), TANDEM_ERROR_INVALID_ARGUMENT);
}

// The callback's nonzero return cancels. A second request, slowed to ~5 ms per step by its
// own engine-thread callback, keeps every step long, so the cancel lands long before the
// cancelled request could reach its context limit.
TEST_F(CApi, CallbackReturnValueCancels) {
  // Shared with the callback, which the engine may still call after this test body returns.
  auto slowing = std::make_shared<std::atomic<bool>>(true);
  const uint64_t slow_id = engine_->engine.submit(
      engine_->engine.model().tokenize("I see"),
      [] {
        tandem::api::GenerateOptions options;
        options.temperature = 0;
        options.max_tokens = 1000;
        return options;
      }(),
      [slowing](const tandem::api::Event&) {
        if (*slowing) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      });
  Collected collected;
  collected.cancel_after = 1;
  tandem_generate_options options = greedy(1000);
  tandem_result result{};
  ASSERT_EQ(tandem_generate(engine_, "The dream", &options, collect, &collected, &result), TANDEM_OK);
  *slowing = false;
  tandem_engine_cancel(engine_, slow_id);
  EXPECT_EQ(result.finish_reason, TANDEM_FINISH_CANCELLED);
  EXPECT_LT(result.n_tokens, 100u);
  EXPECT_EQ(collected.finished_events, 1);  // the final event still reached the callback
  EXPECT_EQ(collected.tokens, std::vector<int32_t>(result.tokens, result.tokens + result.n_tokens));
  tandem_result_free(&result);
}

TEST_F(CApi, ThreadsGenerateTogetherOnOneEngine) {
  const std::vector<std::string> prompts = {"The dream", "Echoes of light", "I see"};
  auto run = [&](const std::string& prompt) {
    tandem_generate_options options = greedy(1000);
    tandem_result result{};
    EXPECT_EQ(tandem_generate(engine_, prompt.c_str(), &options, nullptr, nullptr, &result), TANDEM_OK);
    std::vector<int32_t> tokens(result.tokens, result.tokens + result.n_tokens);
    tandem_result_free(&result);
    return tokens;
  };
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& prompt : prompts) alone.push_back(run(prompt));
  std::vector<std::vector<int32_t>> together(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) threads.emplace_back([&, i] { together[i] = run(prompts[i]); });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(together, alone);
}

}  // namespace
