// The pure halves of issue 15's endpoints and flags, without sockets or ../shared: /tokenize,
// /detokenize and /apply-template bodies on a hand-made vocabulary (tokenize_api.h), served
// model names and OpenAI's 404 (model_names.h), --allowed-origins (cors.h), /props (props.h).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "base/error.h"
#include "server/cors.h"
#include "server/json_body.h"
#include "server/model_names.h"
#include "server/openai_protocol.h"
#include "server/props.h"
#include "server/tokenize_api.h"

namespace tandem::server {
namespace {

using nlohmann::json;

// SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens (3..258), then "▁" (259), "h",
// "i", "▁h", "▁hi" (263).
Tokenizer small_tokenizer() {
  Vocab vocab;
  auto add = [&](std::string piece, float score, TokenType type) {
    vocab.pieces.push_back(std::move(piece));
    vocab.scores.push_back(score);
    vocab.types.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  for (const char* piece : {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi"})
    add(piece, -1, TokenType::Normal);
  return Tokenizer(std::move(vocab));
}

// The ApiError's message; fails the test when `call` succeeds or throws anything else.
template <typename Call>
std::string rejection(Call call, int status = 400) {
  try {
    call();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, status);
    EXPECT_EQ(e.type, "invalid_request_error");
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an ApiError: " << e.what();
    return {};
  }
  ADD_FAILURE() << "accepted";
  return {};
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A long /tokenize asks whether its client is still there as it goes (issue 33): while the
// text is encoded, and also while the answer is written, every 65536 ids of it — with pieces
// twice (sizing the answer, then writing it) — so a client that leaves, or the server
// stopping, ends the work there too.
TEST(TokenizeApi, LongAnswersAskForTheirClientAsTheyAreWritten) {
  const Tokenizer tokenizer = small_tokenizer();
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "hi ";
  const std::string plain = json{{"content", text}}.dump();
  const std::string with_pieces = json{{"content", text}, {"with_pieces", true}}.dump();
  const auto calls_for = [&](const std::string& body) {
    int64_t calls = 0;
    tokenize_response(body, tokenizer, [&calls] {
      ++calls;
      return false;
    });
    return calls;
  };
  const auto n_ids = static_cast<int64_t>(tokenize_json(plain, tokenizer)["tokens"].size());
  ASSERT_GT(n_ids, 3 * 65536);
  const int64_t plain_calls = calls_for(plain), pieces_calls = calls_for(with_pieces);
  EXPECT_GE(pieces_calls - plain_calls, n_ids / 65536)
      << plain_calls << " calls without pieces, " << pieces_calls << " with, for " << n_ids << " ids";
  // The last of them, after the text is encoded, stops the answer.
  int64_t calls = 0;
  EXPECT_THROW(tokenize_response(with_pieces, tokenizer, [&] { return ++calls == pieces_calls; }), BodyAbandoned);
}

TEST(TokenizeApi, TokenizeAndDetokenizeRoundTrip) {
  const Tokenizer tokenizer = small_tokenizer();
  const json ids = tokenize_json(R"({"content": "hi hi"})", tokenizer);
  ASSERT_TRUE(ids["tokens"].is_array());
  EXPECT_EQ(ids["tokens"], json(tokenizer.encode("hi hi", false)));
  const json text = detokenize_json(json{{"tokens", ids["tokens"]}}.dump(), tokenizer);
  EXPECT_EQ(text, (json{{"content", "hi hi"}, {"prompt", "hi hi"}}));  // llama-server's key and vLLM's
  // Unknown fields are ignored; add_special puts BOS first, as the vocabulary asks.
  const json with_bos = tokenize_json(R"({"content": "hi", "add_special": true, "extra": 1})", tokenizer);
  EXPECT_EQ(with_bos["tokens"][0], 1);
  EXPECT_EQ(tokenize_json(R"({"content": "hi", "add_special": false})", tokenizer)["tokens"][0], 263);
  EXPECT_EQ(tokenize_json(R"({"content": ""})", tokenizer)["tokens"], json::array());
}

TEST(TokenizeApi, PiecesAreTextOrBytes) {
  const Tokenizer tokenizer = small_tokenizer();
  const json pieces = tokenize_json(R"({"content": "hi", "with_pieces": true, "add_special": true})", tokenizer);
  ASSERT_EQ(pieces["tokens"].size(), 2u) << pieces;
  EXPECT_EQ(pieces["tokens"][0], (json{{"id", 1}, {"piece", "<s>"}}));
  EXPECT_EQ(pieces["tokens"][1], (json{{"id", 263}, {"piece", " hi"}}));
  // "é" has no piece: two byte tokens, each half a character, shown as its byte value.
  const json bytes = tokenize_json(R"({"content": "\u00e9", "with_pieces": true})", tokenizer);
  const json& tokens = bytes["tokens"];
  ASSERT_EQ(tokens.size(), 3u) << bytes;  // "▁", 0xC3, 0xA9
  EXPECT_EQ(tokens[1]["piece"], json::array({0xC3}));
  EXPECT_EQ(tokens[2]["piece"], json::array({0xA9}));
}

TEST(TokenizeApi, ParseSpecialMatchesControlTokensOnlyWhenAsked) {
  const Tokenizer tokenizer = small_tokenizer();
  const json plain = tokenize_json(R"({"content": "<s>"})", tokenizer);
  EXPECT_GT(plain["tokens"].size(), 1u);  // spelt out in bytes
  const json special = tokenize_json(R"({"content": "<s>", "parse_special": true})", tokenizer);
  EXPECT_EQ(special["tokens"], json::array({1})) << special;
}

TEST(TokenizeApi, MalformedBodiesAre400sNamingTheField) {
  const Tokenizer tokenizer = small_tokenizer();
  const auto tokenize = [&](std::string body) { return rejection([&] { tokenize_json(body, tokenizer); }); };
  const auto detokenize = [&](std::string body) { return rejection([&] { detokenize_json(body, tokenizer); }); };
  EXPECT_TRUE(contains(tokenize("{\"content\": "), "not valid JSON"));
  EXPECT_TRUE(contains(tokenize("[1]"), "JSON object"));
  EXPECT_TRUE(contains(tokenize("{}"), "'content' is required"));
  EXPECT_TRUE(contains(tokenize(R"({"content": 5})"), "'content' must be a string"));
  EXPECT_TRUE(contains(tokenize(R"({"content": "x", "add_special": "yes"})"), "'add_special'"));
  EXPECT_TRUE(contains(tokenize(R"({"content": "x", "with_pieces": 1})"), "'with_pieces'"));
  EXPECT_TRUE(contains(detokenize("{\"tokens\": [1,"), "not valid JSON"));
  EXPECT_TRUE(contains(detokenize("{}"), "'tokens' is required"));
  EXPECT_TRUE(contains(detokenize(R"({"tokens": "1 2"})"), "must be an array"));
  EXPECT_TRUE(contains(detokenize(R"({"tokens": [1, 2.5]})"), "2.5"));
  EXPECT_TRUE(contains(detokenize(R"({"tokens": [1, "2"]})"), "\"2\""));
  // Every id outside the vocabulary is named, as sent.
  const std::string outside = detokenize(R"({"tokens": [1, 263, 264, -1, 99999999999, 5]})");
  EXPECT_TRUE(contains(outside, "264")) << outside;
  EXPECT_TRUE(contains(outside, "-1")) << outside;
  EXPECT_TRUE(contains(outside, "99999999999")) << outside;
  EXPECT_FALSE(contains(outside, "263")) << outside;
  EXPECT_EQ(detokenize_json(R"({"tokens": []})", tokenizer), (json{{"content", ""}, {"prompt", ""}}));
}

// vLLM's /tokenize shapes (issue 35 item 6): a prompt (BOS added by default) or chat messages
// (rendered as the chat endpoint renders them, no BOS added by default), answered with count,
// max_model_len, tokens and token_strs.
TEST(TokenizeApi, VllmPromptAndMessagesShapes) {
  const Tokenizer tokenizer = small_tokenizer();
  chat::ChatRenderer renderer;  // built-in ChatML
  const VllmTokenizeContext vllm{&renderer, nullptr, 4096};
  const auto tokenize = [&](const std::string& body) {
    return json::parse(tokenize_response(body, tokenizer, {}, vllm));
  };
  const json prompt = tokenize(R"({"model": "m", "prompt": "hi hi"})");
  EXPECT_EQ(prompt["tokens"], json(tokenizer.encode("hi hi", true))) << prompt;
  EXPECT_EQ(prompt["tokens"][0], 1);  // BOS: vLLM's add_special_tokens defaults to true
  EXPECT_EQ(prompt["count"], prompt["tokens"].size());
  EXPECT_EQ(prompt["max_model_len"], 4096);
  EXPECT_TRUE(prompt["token_strs"].is_null());
  const json plain = tokenize(R"({"prompt": "hi", "add_special_tokens": false, "return_token_strs": true})");
  EXPECT_EQ(plain["tokens"], json::array({263})) << plain;
  EXPECT_EQ(plain["token_strs"], json::array({"\xE2\x96\x81hi"})) << plain;
  const std::string messages = R"([{"role": "user", "content": "hi"}])";
  const json chat = tokenize(R"({"messages": )" + messages + "}");
  const RenderedChat rendered = renderer.render_for_tokenizer({{"user", "hi"}}, tokenizer);
  EXPECT_EQ(chat["tokens"], json(tokenizer.encode(rendered.text, true, rendered.special_spans))) << chat;
  EXPECT_EQ(chat["count"], chat["tokens"].size());
  const json bare = tokenize(R"({"add_special_tokens": false, "messages": )" + messages + "}");
  EXPECT_EQ(bare["tokens"], json(tokenizer.encode(rendered.text, false, rendered.special_spans))) << bare;
  // Without a chat template, and with a prompt of the wrong type: 400s that say so.
  const auto refused = [&](const std::string& body, const VllmTokenizeContext& context) {
    return rejection([&] { tokenize_response(body, tokenizer, {}, context); });
  };
  EXPECT_TRUE(contains(refused(R"({"messages": )" + messages + "}", {}), "chat template"));
  EXPECT_TRUE(contains(refused(R"({"prompt": 5})", vllm), "'prompt' must be a string"));
}

TEST(TokenizeApi, ApplyTemplateRendersAsTheChatEndpointWould) {
  chat::ChatRenderer renderer;  // built-in ChatML
  const std::string body = R"({"messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})";
  const json prompt = apply_template_json(body, renderer);
  EXPECT_EQ(prompt["prompt"], renderer.render({{"system", "Be brief."}, {"user", "Hi"}}));
  EXPECT_TRUE(contains(prompt["prompt"].get<std::string>(), "<|im_start|>user\nHi<|im_end|>")) << prompt;
  const auto apply = [&](std::string b) { return rejection([&] { apply_template_json(b, renderer); }); };
  EXPECT_TRUE(contains(apply("{\"messages\": "), "not valid JSON"));
  EXPECT_TRUE(contains(apply("{}"), "'messages'"));
  EXPECT_TRUE(contains(apply(R"({"messages": [{"role": "wizard", "content": "x"}]})"), "wizard"));
  EXPECT_TRUE(contains(apply(R"({"messages": [{"role": "user", "content": 5}]})"), "messages[0].content"));
}

TEST(ModelNames, FlagValuesAreListsInOrder) {
  EXPECT_EQ(parse_served_model_names({}), std::vector<std::string>{});
  EXPECT_EQ(parse_served_model_names({"gpt-4o-mini", "a,b", "a"}), (std::vector<std::string>{"gpt-4o-mini", "a", "b"}));
  EXPECT_EQ(parse_served_model_names({"org/model"}), std::vector<std::string>{"org/model"});
  EXPECT_THROW(parse_served_model_names({"a,,b"}), InputError);
  EXPECT_THROW(parse_served_model_names({""}), InputError);
  EXPECT_THROW(parse_served_model_names({"a\nb"}), InputError);
}

TEST(ModelNames, UnknownModelIsOpenAIs404) {
  const std::vector<std::string> names = {"gpt-4o-mini", "tiny"};
  EXPECT_TRUE(model_name_accepted(names, ""));
  EXPECT_TRUE(model_name_accepted(names, "tiny"));
  EXPECT_FALSE(model_name_accepted(names, "Tiny"));
  EXPECT_NO_THROW(check_model_name(names, "gpt-4o-mini"));
  const std::string message = rejection([&] { check_model_name(names, "gpt-9"); }, 404);
  EXPECT_TRUE(contains(message, "'gpt-9'") && contains(message, "'gpt-4o-mini'")) << message;
  EXPECT_EQ(openai_error_code(404, "invalid_request_error"), "model_not_found");
  EXPECT_EQ(openai_error_code(404, "not_found_error"), std::nullopt);
  EXPECT_EQ(openai_error_code(400, "invalid_request_error"), std::nullopt);
  EXPECT_EQ(
      model_json("tiny", 128),
      (json{{"id", "tiny"}, {"object", "model"}, {"created", 0}, {"owned_by", "tandem"}, {"max_model_len", 128}}));
}

TEST(ModelNames, IdFromTarget) {
  EXPECT_EQ(model_id_from_target("/v1/models/tiny"), "tiny");
  EXPECT_EQ(model_id_from_target("/v1/models/org%2Fmodel?x=1"), "org/model");
  EXPECT_EQ(model_id_from_target("/v1/models/org/model"), "org/model");
  EXPECT_EQ(model_id_from_target("/v1/models/100%"), "100%");  // a cut escape is kept
  EXPECT_EQ(model_id_from_target("/v1/models/a%zz"), "a%zz");
  EXPECT_EQ(model_id_from_target("/v1/models/"), "");
  EXPECT_EQ(model_id_from_target("/v1/models"), "");
  EXPECT_EQ(model_id_from_target("/v1/modelsX/a"), "");
}

TEST(Cors, OnlyListedOriginsAreAnswered) {
  const CorsPolicy none = parse_allowed_origins({});
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(allowed_origin(none, "http://localhost:5173"), "");

  const CorsPolicy some = parse_allowed_origins({"http://localhost:5173,https://chat.example.com/", "HTTP://A.test"});
  EXPECT_EQ(some.origins,
            (std::vector<std::string>{"http://localhost:5173", "https://chat.example.com", "HTTP://A.test"}));
  EXPECT_EQ(allowed_origin(some, "http://localhost:5173"), "http://localhost:5173");
  EXPECT_EQ(allowed_origin(some, "https://chat.example.com"), "https://chat.example.com");
  EXPECT_EQ(allowed_origin(some, "http://a.test"), "http://a.test");  // scheme and host: any case
  EXPECT_EQ(allowed_origin(some, "http://localhost:5174"), "");
  EXPECT_EQ(allowed_origin(some, "http://evil.test"), "");
  EXPECT_EQ(allowed_origin(some, "null"), "");
  EXPECT_EQ(allowed_origin(some, ""), "");

  const CorsPolicy any = parse_allowed_origins({"*"});
  EXPECT_TRUE(any.any);
  EXPECT_EQ(allowed_origin(any, "http://evil.test"), "*");
  EXPECT_EQ(allowed_origin(any, ""), "");  // not a browser's cross-origin request: nothing to add

  EXPECT_THROW(parse_allowed_origins({"localhost:5173"}), InputError);
  EXPECT_THROW(parse_allowed_origins({"http://a.test/path"}), InputError);
  EXPECT_THROW(parse_allowed_origins({"http://a.test,"}), InputError);
  EXPECT_THROW(parse_allowed_origins({"http://a b"}), InputError);
  EXPECT_THROW(parse_allowed_origins({"http://"}), InputError);
}

TEST(Props, DefaultsAreTheParsersDefaults) {
  chat::ChatRenderer renderer;
  renderer.jinja_template = "{{ messages }}";
  renderer.bos_token = "<s>";
  ServerProps props{.model_names = {"gpt-4o-mini", "tiny"},
                    .model_path = "/models/tiny.gguf",
                    .chat_renderer = &renderer,
                    .context_length = 512,
                    .total_slots = 4,
                    .speculation = {}};
  const json body = props_json(props);
  const ApiRequest defaults = parse_request(Endpoint::Completions, R"({"prompt": "x"})", 16);
  const json& params = body["default_generation_settings"]["params"];
  EXPECT_EQ(params["temperature"], defaults.params.sampling.temperature);
  EXPECT_EQ(params["top_k"], defaults.params.sampling.top_k);
  EXPECT_EQ(params["top_p"], defaults.params.sampling.top_p);
  EXPECT_EQ(params["max_tokens"], 16);
  EXPECT_EQ(params["chat_max_tokens"], 512);
  EXPECT_EQ(params["speculative"]["type"], "none");
  EXPECT_EQ(body["default_generation_settings"]["n_ctx"], 512);
  EXPECT_EQ(body["total_slots"], 4);
  EXPECT_EQ(body["model_path"], "/models/tiny.gguf");
  EXPECT_EQ(body["model_alias"], "gpt-4o-mini");
  EXPECT_EQ(body["served_model_names"], json::array({"gpt-4o-mini", "tiny"}));
  EXPECT_EQ(body["chat_template"], "{{ messages }}");
  EXPECT_EQ(body["chat_format"], "model template");
  EXPECT_EQ(body["bos_token"], "<s>");
  EXPECT_EQ(body["n_ctx"], 512);
  EXPECT_EQ(body["build_info"], build_info());
  EXPECT_TRUE(contains(build_info(), body["version"].get<std::string>()));
}

}  // namespace
}  // namespace tandem::server
