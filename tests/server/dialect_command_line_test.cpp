// The command lines of llama-server's README and vLLM's `vllm serve` documentation, with
// `tandem serve` in place of the program name and the tiny aidreams260K model (context 128)
// in place of theirs (--port 0 in place of a fixed port): each starts the real server, which
// answers /health, shows what the mapped flags set where it can be seen (/props, /v1/models,
// /metrics, /v1/embeddings, the start-up log), and stops cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// `tandem serve ARGS... -t 2` (two compute threads: tests share the machine).
bool start_line(ServerProcess& server, std::vector<std::string> args) {
  args.insert(args.begin(), "serve");
  args.insert(args.end(), {"-t", "2"});
  return server.start_program(TANDEM_BINARY, args);
}

json get_json(const ServerProcess& server, const std::string& path, const std::string& key = "") {
  httplib::Client client = server.client();
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  const auto response = client.Get(path, headers);
  if (!response || response->status != 200) {
    ADD_FAILURE() << "GET " << path << ": " << (response ? std::to_string(response->status) : "no answer");
    return json();
  }
  return json::parse(response->body);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DialectCommandLine, LlamaServerReadmeBasicLinesStartAndStop) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string model = shared_path(kAidreamsGguf);
  {
    // llama-server -m model.gguf --port 8080
    ServerProcess server;
    ASSERT_TRUE(start_line(server, {"-m", model, "--port", "0"})) << server.log();
    EXPECT_EQ(get_json(server, "/v1/models")["data"][0]["id"], "model.gguf");
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  {
    // llama-server -m model.gguf -c 2048: more than the model's 128, so the model's, with a warning.
    ServerProcess server;
    ASSERT_TRUE(start_line(server, {"-m", model, "-c", "2048", "--port", "0"})) << server.log();
    EXPECT_EQ(get_json(server, "/props")["n_ctx"], 128);
    EXPECT_TRUE(has(server.log(), "--ctx 2048 is more than the model's context; using 128")) << server.log();
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

TEST(DialectCommandLine, LlamaServerJinjaGpuFlashAttentionAliasMetricsLine) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // llama-server -m model.gguf --jinja -ngl 99 -fa --ctx-size 8192 -a foo --metrics (issue 35's line),
  // then the same with a context the model has, to see --ctx-size take effect.
  for (const std::string ctx : {"8192", "96"}) {
    ServerProcess server;
    ASSERT_TRUE(start_line(server, {"-m", shared_path(kAidreamsGguf), "--jinja", "-ngl", "99", "-fa", "--ctx-size", ctx,
                                    "-a", "foo", "--metrics", "--port", "0"}))
        << server.log();
    const json models = get_json(server, "/v1/models");
    EXPECT_EQ(models["data"][0]["id"], "foo") << models;
    EXPECT_EQ(models["data"][0]["max_model_len"], ctx == "96" ? 96 : 128) << models;
    EXPECT_EQ(get_json(server, "/props")["model_alias"], "foo");
    const auto metrics = server.client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    const std::string log = server.log();
    EXPECT_TRUE(has(log, "-ngl 99")) << log;
    EXPECT_TRUE(has(log, "-fa changes nothing")) << log;
    EXPECT_EQ(server.stop(), 0) << log;
  }
}

TEST(DialectCommandLine, LlamaServerParallelEmbeddingsAndBatchLines) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string model = shared_path(kAidreamsGguf);
  {
    // llama-server -m model.gguf -c 2048 -np 4 -cb (a context the model has, to see it).
    ServerProcess server;
    ASSERT_TRUE(start_line(server, {"-m", model, "-c", "64", "-np", "4", "-cb", "--port", "0"})) << server.log();
    const json props = get_json(server, "/props");
    EXPECT_EQ(props["total_slots"], 4) << props;
    EXPECT_EQ(props["n_ctx"], 64) << props;
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  {
    // llama-server -m model.gguf --embeddings --pooling mean -b 64 -ub 32 (-ub is the step's size).
    ServerProcess server;
    ASSERT_TRUE(
        start_line(server, {"-m", model, "--embeddings", "--pooling", "mean", "-b", "64", "-ub", "32", "--port", "0"}))
        << server.log();
    const auto response = server.client().Post("/v1/embeddings", R"({"input": "a dream"})", "application/json");
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_EQ(json::parse(response->body)["data"][0]["embedding"].size(), 64u);
    EXPECT_TRUE(has(server.log(), "batch budget 32 tokens")) << server.log();
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

TEST(DialectCommandLine, LlamaServerCacheTypesTemplateFileAndCpuLine) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const fs::path template_file =
      fs::temp_directory_path() / ("tandem-dialect-" + std::to_string(::getpid()) + ".jinja");
  const std::string template_text =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>"
      "{% endif %}";
  std::ofstream(template_file) << template_text;
  // llama-server -m model.gguf -ctk f16 -ctv bf16 --chat-template-file F --no-mmap -ngl 0
  ServerProcess server;
  const bool started =
      start_line(server, {"-m", shared_path(kAidreamsGguf), "-ctk", "f16", "-ctv", "bf16", "--chat-template-file",
                          template_file.string(), "--no-mmap", "-ngl", "0", "--port", "0"});
  fs::remove(template_file);
  ASSERT_TRUE(started) << server.log();
  EXPECT_EQ(get_json(server, "/props")["chat_template"], template_text);
  const std::string log = server.log();
  EXPECT_TRUE(has(log, "K f16, V bf16")) << log;
  EXPECT_TRUE(has(log, "-ngl 0: every layer runs on the CPU")) << log;
  EXPECT_TRUE(has(log, "--no-mmap changes nothing")) << log;
  EXPECT_EQ(server.stop(), 0) << log;
}

TEST(DialectCommandLine, VllmServeDocLineStartsWithPositionalModel) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // vllm serve MODEL --max-model-len 2048 --max-num-seqs 4 --gpu-memory-utilization 0.9
  //   --enable-prefix-caching --dtype auto --kv-cache-dtype auto --enable-auto-tool-choice
  //   --tool-call-parser hermes --api-key K --port P, with lengths the tiny model has, plus
  //   --block-size, --max-num-batched-tokens and --served-model-name.
  ServerProcess server;
  ASSERT_TRUE(start_line(server, {shared_path(kAidreamsGguf),
                                  "--max-model-len",
                                  "96",
                                  "--max-num-seqs",
                                  "3",
                                  "--gpu-memory-utilization",
                                  "0.9",
                                  "--enable-prefix-caching",
                                  "--dtype",
                                  "auto",
                                  "--kv-cache-dtype",
                                  "auto",
                                  "--enable-auto-tool-choice",
                                  "--tool-call-parser",
                                  "hermes",
                                  "--api-key",
                                  "K",
                                  "--port",
                                  "0",
                                  "--block-size",
                                  "32",
                                  "--max-num-batched-tokens",
                                  "48",
                                  "--served-model-name",
                                  "tiny"}))
      << server.log();
  const auto unauthorised = server.client().Get("/v1/models");
  ASSERT_TRUE(unauthorised);
  EXPECT_EQ(unauthorised->status, 401);
  const json models = get_json(server, "/v1/models", "K");
  EXPECT_EQ(models["data"][0]["id"], "tiny") << models;
  EXPECT_EQ(models["data"][0]["max_model_len"], 96) << models;
  EXPECT_EQ(get_json(server, "/props", "K")["total_slots"], 3);
  const std::string log = server.log();
  EXPECT_TRUE(has(log, "tool calls read as hermes (--tool-call-parser)")) << log;
  EXPECT_TRUE(has(log, "blocks of 32 tokens")) << log;
  EXPECT_TRUE(has(log, "batch budget 48 tokens")) << log;
  EXPECT_TRUE(has(log, "--gpu-memory-utilization 0.9 does not apply")) << log;
  EXPECT_TRUE(has(log, "K f16, V f16")) << log;  // --kv-cache-dtype auto: the default
  EXPECT_EQ(server.stop(), 0) << log;
}

TEST(DialectCommandLine, VllmKvCacheDtypeAndToolParserNamesMap) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // vLLM's bfloat16 is Tandem's bf16; llama3_json is its name for the Llama 3 format.
  ServerProcess server;
  ASSERT_TRUE(start_line(server, {shared_path(kAidreamsGguf), "--kv-cache-dtype", "bfloat16", "--tool-call-parser",
                                  "llama3_json", "--port", "0"}))
      << server.log();
  const std::string log = server.log();
  EXPECT_TRUE(has(log, "K bf16, V bf16")) << log;
  EXPECT_TRUE(has(log, "tool calls read as llama3 (--tool-call-parser)")) << log;
  EXPECT_EQ(server.stop(), 0) << log;
}

}  // namespace
}  // namespace tandem::testing
