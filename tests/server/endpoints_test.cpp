// Issue 15's endpoints and flags on the real `tandem serve` over 127.0.0.1: /tokenize,
// /detokenize and /apply-template agree with what the generation endpoints feed the model;
// /props; --served-model-name (aliases accepted, the first is the id, a wrong name is OpenAI's
// 404 model_not_found, /v1/models/{id}); CORS with --allowed-origins (preflights, allowed and
// refused origins, none by default). Malformed bodies and wrong types are 400s with a reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "json_replies.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(kAidreamsGguf)

httplib::Result post(httplib::Client& client, const std::string& path, const json& body,
                     const httplib::Headers& headers = {}) {
  return post_json(client, path, body, headers);
}

TEST(ServerEndpoints, TokenizeDetokenizeAndApplyTemplateMatchGeneration) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  httplib::Client client = server.client();

  const std::string text = "The dream of a quiet sea";
  const json plain = ok_json(post(client, "/tokenize", {{"content", text}}), "tokenize");
  const json special = ok_json(post(client, "/tokenize", {{"content", text}, {"add_special", true}}), "with BOS");
  ASSERT_FALSE(plain["tokens"].empty());
  EXPECT_EQ(special["tokens"].size(), plain["tokens"].size() + 1);  // BOS
  // The count /v1/completions reports for the same prompt (it adds BOS).
  const json completion =
      ok_json(post(client, "/v1/completions", {{"prompt", text}, {"max_tokens", 1}, {"temperature", 0}}), "complete");
  EXPECT_EQ(completion["usage"]["prompt_tokens"], special["tokens"].size());
  // ... and /v1/completions fed the ids gives the same text as fed the string.
  const json by_ids = ok_json(
      post(client, "/v1/completions", {{"prompt", special["tokens"]}, {"max_tokens", 1}, {"temperature", 0}}), "ids");
  EXPECT_EQ(by_ids["choices"][0]["text"], completion["choices"][0]["text"]);

  const json back = ok_json(post(client, "/detokenize", {{"tokens", plain["tokens"]}}), "detokenize");
  EXPECT_EQ(back["content"], text);

  const json pieces = ok_json(post(client, "/tokenize", {{"content", text}, {"with_pieces", true}}), "pieces");
  ASSERT_EQ(pieces["tokens"].size(), plain["tokens"].size());
  std::string joined;
  for (size_t i = 0; i < pieces["tokens"].size(); ++i) {
    EXPECT_EQ(pieces["tokens"][i]["id"], plain["tokens"][i]);
    joined += pieces["tokens"][i]["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, " " + text);  // SentencePiece's space prefix, which decode drops

  // The prompt /v1/chat/completions renders for the same messages: as many tokens as it reports.
  const json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Tell me a dream."}}});
  const json rendered = ok_json(post(client, "/apply-template", {{"messages", messages}}), "apply-template");
  ASSERT_TRUE(rendered["prompt"].is_string()) << rendered;
  const std::string prompt = rendered["prompt"];
  EXPECT_NE(prompt.find("Tell me a dream."), std::string::npos) << prompt;
  const json chat = ok_json(
      post(client, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}}), "chat");
  const json prompt_ids = ok_json(
      post(client, "/tokenize", {{"content", prompt}, {"add_special", true}, {"parse_special", true}}), "prompt ids");
  EXPECT_EQ(chat["usage"]["prompt_tokens"], prompt_ids["tokens"].size());

  // vLLM's shapes on the same server: a prompt (BOS added) and the chat messages (rendered as
  // the chat endpoint renders them), with the server's context as max_model_len.
  const json vllm_prompt = ok_json(post(client, "/tokenize", {{"model", "x"}, {"prompt", text}}), "vLLM prompt");
  EXPECT_EQ(vllm_prompt["tokens"], special["tokens"]) << vllm_prompt;
  EXPECT_EQ(vllm_prompt["count"], special["tokens"].size());
  EXPECT_GT(vllm_prompt["max_model_len"].get<int64_t>(), 0);
  const json vllm_chat = ok_json(post(client, "/tokenize", {{"messages", messages}}), "vLLM messages");
  EXPECT_EQ(vllm_chat["count"], chat["usage"]["prompt_tokens"]) << vllm_chat;
  EXPECT_EQ(ok_json(post(client, "/detokenize", {{"tokens", plain["tokens"]}}), "vLLM detokenize")["prompt"], text);

  // Bad bodies: 400 with the reason; wrong methods 405.
  const auto raw = [&](const char* path, const std::string& body) {
    return client.Post(path, body, "application/json");
  };
  expect_error(raw("/tokenize", "{\"content\": "), 400, "not valid JSON", "malformed JSON");
  expect_error(raw("/tokenize", "[\"text\"]"), 400, "JSON object", "not an object");
  expect_error(raw("/tokenize", R"({"content": 5})"), 400, "'content' must be a string", "content number");
  expect_error(raw("/tokenize", R"({"text": "hi"})"), 400, "'content' is required", "no content");
  expect_error(raw("/tokenize", R"({"content": "hi", "add_special": "yes"})"), 400, "'add_special'", "bool string");
  expect_error(raw("/detokenize", "{\"tokens\": [1,"), 400, "not valid JSON", "malformed JSON");
  expect_error(raw("/detokenize", R"({"tokens": "1 2"})"), 400, "must be an array", "tokens string");
  expect_error(raw("/detokenize", R"({"tokens": [1, 2.5]})"), 400, "2.5", "fractional id");
  expect_error(raw("/detokenize", R"({"tokens": [1, 70000, -3]})"), 400, "70000, -3", "ids outside the vocabulary");
  expect_error(raw("/apply-template", "{\"messages\": "), 400, "not valid JSON", "malformed JSON");
  expect_error(raw("/apply-template", R"({"messages": []})"), 400, "'messages'", "no messages");
  expect_error(raw("/apply-template", R"({"messages": [{"role": "user", "content": 7}]})"), 400, "messages[0].content",
               "content number");
  expect_error(client.Get("/tokenize"), 405, "GET", "GET on a POST endpoint");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServerEndpoints, PropsDescribeTheServer) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "3"})) << server.log();
  httplib::Client client = server.client();
  const json props = ok_json(client.Get("/props"), "props");
  EXPECT_EQ(props["total_slots"], 3);
  EXPECT_EQ(props["model_path"], shared_path(kAidreamsGguf));
  EXPECT_EQ(props["model_alias"], "model.gguf");
  EXPECT_GT(props["n_ctx"].get<int64_t>(), 0);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], props["n_ctx"]);
  const json& params = props["default_generation_settings"]["params"];
  EXPECT_EQ(params["temperature"], 1.0);  // OpenAI's default, as a request that leaves it out gets
  EXPECT_EQ(params["max_tokens"], 16);
  EXPECT_TRUE(props["chat_template"].is_string());
  EXPECT_TRUE(props["chat_format"].is_string() && !props["chat_format"].get<std::string>().empty());
  EXPECT_EQ(props["build_info"].get<std::string>().rfind("tandem ", 0), 0u) << props["build_info"];
  expect_error(client.Post("/props", "{}", "application/json"), 405, "POST", "POST on /props");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServerEndpoints, ServedModelNamesAndModelNotFound) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--served-model-name", "gpt-4o-mini", "dreamer,org/dreams", "--served-model-name",
                            "last-alias", "--parallel", "2"}))
      << server.log();
  httplib::Client client = server.client();
  const json models = ok_json(client.Get("/v1/models"), "models");
  ASSERT_EQ(models["data"].size(), 1u) << models;
  EXPECT_EQ(models["data"][0]["id"], "gpt-4o-mini");
  EXPECT_GT(models["data"][0]["max_model_len"].get<int64_t>(), 0);

  for (const char* name : {"gpt-4o-mini", "dreamer", "org/dreams", "last-alias"}) {
    const json body =
        ok_json(post(client, "/v1/completions", {{"model", name}, {"prompt", "The dream"}, {"max_tokens", 2}}), name);
    EXPECT_EQ(body["model"], "gpt-4o-mini") << name;  // responses carry the id
  }
  for (const char* name : {"model.gguf", "gpt-4o", "GPT-4O-MINI"}) {
    const json error =
        expect_error(post(client, "/v1/chat/completions",
                          {{"model", name}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}),
                     404, std::string("'") + name + "'", name);
    EXPECT_EQ(error["type"], "invalid_request_error") << name;
    EXPECT_EQ(error["code"], "model_not_found") << name;
    EXPECT_TRUE(error.contains("param") && error["param"].is_null()) << name << ": param null, as OpenAI's";
  }
  // A bad request of another kind keeps its 400, with the field and its own code.
  const json other = expect_error(post(client, "/v1/completions", {{"prompt", 5}}), 400, "'prompt'", "bad prompt");
  EXPECT_EQ(other["code"], "invalid_type") << other;
  EXPECT_EQ(other["param"], "prompt") << other;

  const json retrieved = ok_json(client.Get("/v1/models/gpt-4o-mini"), "retrieve");
  EXPECT_EQ(retrieved["id"], "gpt-4o-mini");
  EXPECT_EQ(retrieved["object"], "model");
  EXPECT_EQ(ok_json(client.Get("/v1/models/org%2Fdreams"), "escaped")["id"], "org/dreams");
  EXPECT_EQ(ok_json(client.Get("/v1/models/org/dreams"), "slash")["id"], "org/dreams");
  EXPECT_EQ(ok_json(client.Get("/v1/models/dreamer"), "alias")["id"], "dreamer");
  const json missing = expect_error(client.Get("/v1/models/model.gguf"), 404, "'model.gguf'", "unknown id");
  EXPECT_EQ(missing["code"], "model_not_found");
  EXPECT_EQ(missing["type"], "invalid_request_error");
  // An unknown path is still a 404 of another kind.
  const json no_path = expect_error(client.Get("/v2/models"), 404, "no such endpoint", "unknown path");
  EXPECT_EQ(no_path["type"], "not_found_error");
  EXPECT_EQ(ok_json(client.Get("/props"), "props")["served_model_names"],
            json::array({"gpt-4o-mini", "dreamer", "org/dreams", "last-alias"}));
  EXPECT_EQ(server.stop(), 0) << server.log();

  // Without the flag, the file's name is the id, and /v1/models/{id} finds it.
  ServerProcess plain;
  ASSERT_TRUE(plain.start({})) << plain.log();
  httplib::Client plain_client = plain.client();
  EXPECT_EQ(ok_json(plain_client.Get("/v1/models/model.gguf"), "file name")["id"], "model.gguf");
  EXPECT_EQ(expect_error(plain_client.Get("/v1/models/gpt-4o-mini"), 404, "gpt-4o-mini", "not served")["code"],
            "model_not_found");
  EXPECT_EQ(plain.stop(), 0) << plain.log();
}

TEST(ServerEndpoints, CorsOnlyForAllowedOrigins) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({"--allowed-origins", "http://localhost:5173,https://chat.example.com", "--api-key", "k"}))
      << server.log();
  httplib::Client client = server.client();
  const std::string allowed = "http://localhost:5173";
  const httplib::Headers preflight = {{"Origin", allowed},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization, content-type"}};
  // A preflight carries no key: answered 204 all the same, with what the API accepts.
  const auto options = client.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(options);
  EXPECT_EQ(options->status, 204) << options->body;
  EXPECT_EQ(options->get_header_value("Access-Control-Allow-Origin"), allowed);
  EXPECT_NE(options->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  const std::string allow_headers = options->get_header_value("Access-Control-Allow-Headers");
  EXPECT_NE(allow_headers.find("Authorization"), std::string::npos) << allow_headers;
  EXPECT_NE(allow_headers.find("Content-Type"), std::string::npos) << allow_headers;
  EXPECT_EQ(options->get_header_value("Vary"), "Origin");
  EXPECT_TRUE(options->body.empty());
  EXPECT_FALSE(options->has_header("Content-Length"));

  // A listed origin's requests and refusals carry the header, so the page can read them.
  const httplib::Headers keyed = {{"Origin", allowed}, {"Authorization", "Bearer k"}};
  const auto models = client.Get("/v1/models", keyed);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), allowed);
  const auto no_key = client.Get("/v1/models", {{"Origin", "https://chat.example.com"}});
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(no_key->get_header_value("Access-Control-Allow-Origin"), "https://chat.example.com");
  const auto tokens = post(client, "/tokenize", {{"content", "hi"}}, keyed);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->status, 200) << tokens->body;
  EXPECT_EQ(tokens->get_header_value("Access-Control-Allow-Origin"), allowed);

  // Any other origin gets no CORS header at all (the browser then withholds the answer).
  for (const char* origin : {"http://evil.test", "http://localhost:5174", "null"}) {
    httplib::Headers other = preflight;
    other.erase("Origin");
    other.emplace("Origin", origin);
    const auto refused = client.Options("/v1/chat/completions", other);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 204);
    EXPECT_FALSE(refused->has_header("Access-Control-Allow-Origin")) << origin;
    EXPECT_FALSE(refused->has_header("Access-Control-Allow-Methods")) << origin;
    const auto get = client.Get("/v1/models", {{"Origin", origin}, {"Authorization", "Bearer k"}});
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 200);
    EXPECT_FALSE(get->has_header("Access-Control-Allow-Origin")) << origin;
    EXPECT_EQ(get->get_header_value("Vary"), "Origin") << origin;  // a cache must not mix origins' answers
  }
  // A preflight for a path that does not exist is not answered as one.
  const auto unknown = client.Options("/nowhere", preflight);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
  EXPECT_EQ(server.stop(), 0) << server.log();

  // '*' answers any origin with '*'.
  ServerProcess any;
  ASSERT_TRUE(any.start({"--allowed-origins", "*"})) << any.log();
  httplib::Client any_client = any.client();
  const auto star = any_client.Get("/health", {{"Origin", "http://anything.test"}});
  ASSERT_TRUE(star);
  EXPECT_EQ(star->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(star->has_header("Vary"));
  EXPECT_EQ(any.stop(), 0) << any.log();
}

TEST(ServerEndpoints, NoCorsByDefaultAndBadOriginsAreRefusedAtStart) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_TRUE(server.start({})) << server.log();
  httplib::Client client = server.client();
  const auto options = client.Options("/v1/completions",
                                      {{"Origin", "http://localhost:5173"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(options);
  EXPECT_EQ(options->status, 204);
  EXPECT_EQ(options->get_header_value("Allow"), "POST, OPTIONS");
  EXPECT_FALSE(options->has_header("Access-Control-Allow-Origin"));
  const auto get = client.Get("/v1/models", {{"Origin", "http://localhost:5173"}});
  ASSERT_TRUE(get);
  EXPECT_FALSE(get->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(get->has_header("Vary"));
  EXPECT_EQ(server.stop(), 0) << server.log();

  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--allowed-origins", "localhost:5173"},
                                                std::vector<std::string>{"--allowed-origins", "http://a.test/path"},
                                                std::vector<std::string>{"--served-model-name", "a,,b"}}) {
    ServerProcess bad;
    std::vector<std::string> args = {"serve", "-m", shared_path(kAidreamsGguf), "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(bad.spawn(args));
    const std::optional<int> code = bad.wait_exit(30.0);
    ASSERT_TRUE(code.has_value()) << flags[1] << ": still running";
    EXPECT_EQ(*code, 1) << flags[1] << ": " << bad.log();
    EXPECT_NE(bad.log().find(flags[0]), std::string::npos) << bad.log();
  }
}

}  // namespace
}  // namespace tandem::testing
