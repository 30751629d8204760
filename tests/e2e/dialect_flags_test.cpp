// llama.cpp's and vLLM's spellings on the command line, end to end: the multi-letter short
// flags (-ngl, -fa, -ctk, -ctv, -np, -ub) parse as one flag each in run and chat and give the
// same text as without them; the flags Tandem does not take are refused in one line that
// names the flag as typed and the equivalent (no help text, non-zero exit), `serve -hf`
// included; several unexpected arguments are listed in the order given. The servers that
// start are in tests/server/dialect_command_line_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/run_binary.h"

namespace tandem::testing {
namespace {

std::string model() { return shell_quote(shared_path(kAidreamsGguf)); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A refusal: non-zero exit, nothing on stdout, one line on stderr naming `flag` and `advice`.
void expect_refused(const std::string& arguments, const std::string& flag, const std::string& advice) {
  SCOPED_TRACE(arguments);
  const CommandResult result = run_tandem(arguments);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_EQ(result.err.rfind("tandem: error: ", 0), 0u) << result.err;
  EXPECT_TRUE(has(result.err, flag)) << result.err;
  EXPECT_TRUE(has(result.err, advice)) << result.err;
  EXPECT_FALSE(has(result.err, "Usage")) << result.err;
}

TEST(DialectFlags, LlamaShortFlagsParseAsOneFlagInRun) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string base = "run -m " + model() + " -p 'The dream' -n 8 --temp 0";
  const CommandResult plain = run_tandem(base + " -q");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  // Issue 35: -ngl 99 was read as -n gl, -fa as -f a.
  for (const std::string flags :
       {"-ngl 99", "-fa", "-fa on", "-fa off", "--flash-attn", "-ngl 99 -fa -ctk f32 -ctv f16",
        "--n-gpu-layers 0 --no-mmap --jinja", "--ctx-size 64", "-ngl all"}) {
    SCOPED_TRACE(flags);
    const CommandResult loud = run_tandem(base + " " + flags);
    ASSERT_EQ(loud.exit_code, 0) << loud.err;
    EXPECT_EQ(loud.out, plain.out);
    if (has(flags, "-ngl 99")) {
      EXPECT_TRUE(has(loud.err, "tandem run: note: -ngl 99")) << loud.err;
    }
    if (has(flags, "-fa")) {
      EXPECT_TRUE(has(loud.err, "tandem run: note: -fa")) << loud.err;
    }
    if (has(flags, "--n-gpu-layers 0")) {
      EXPECT_TRUE(has(loud.err, "-ngl 0: every layer runs on the CPU")) << loud.err;
    }
    const CommandResult quiet = run_tandem(base + " " + flags + " -q");
    ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "");
    EXPECT_EQ(quiet.out, plain.out);
  }
  // -fa before -p: its value is not taken from the next argument.
  const CommandResult first = run_tandem("run -m " + model() + " -fa -p 'The dream' -n 8 --temp 0 -q");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, plain.out);
}

TEST(DialectFlags, CtxSizeTakesEffectInRun) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult narrow = run_tandem("run -m " + model() + " --ctx-size 12 -p 'The dream' -n 100 --temp 0 --ids");
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_TRUE(has(narrow.err, "stop:    context limit")) << narrow.err;
}

TEST(DialectFlags, ChatTakesTheSameFlags) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  // stdin is /dev/null: the chat ends at once, after parsing and loading.
  const CommandResult chat = run_tandem("chat -m " + model() + " -ngl 99 -fa --jinja -c 64 -ctk f32 -n 4");
  EXPECT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_TRUE(has(chat.err, "tandem chat: note: -ngl 99")) << chat.err;
  EXPECT_TRUE(has(chat.err, "tandem chat: note: -fa")) << chat.err;
}

TEST(DialectFlags, ForeignFlagsAreRefusedInOneLineNamingTheEquivalent) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const std::string serve = "serve -m " + model() + " --port 0 ";
  // -hf was read as -h (help) and exited 0.
  expect_refused("serve -hf ggml-org/gemma-3-1b-it-GGUF", "-hf", "-m PATH");
  expect_refused(serve + "--hf-repo x/y", "--hf-repo", "no network");
  expect_refused(serve + "-tb 4", "-tb", "-t, --threads");
  expect_refused(serve + "-md draft.gguf", "-md", "--draft-model");
  expect_refused(serve + "--mlock", "--mlock", "no equivalent");
  expect_refused(serve + "-nocb", "-nocb", "always continuous");
  expect_refused(serve + "--temp 0.5", "--temp", "per request");
  expect_refused(serve + "-sys hello", "-sys", "--system");
  expect_refused(serve + "--swap-space 4", "--swap-space", "--kv-memory");
  expect_refused(serve + "--trust-remote-code", "--trust-remote-code", "no code");
  // Values Tandem has no equivalent of.
  expect_refused(serve + "--dtype float16", "--dtype float16", "tandem convert");
  expect_refused(serve + "--kv-cache-dtype fp8", "--kv-cache-dtype fp8", "q8_0");
  expect_refused(serve + "--tool-call-parser pythonic", "--tool-call-parser pythonic",
                 "hermes, llama3 (or llama3_json), mistral-nemo (or mistral)");
  // Flags serve takes but run does not: named, one line.
  expect_refused("run -m " + model() + " -p hi -np 2", "-np", "(tandem serve does)");
  expect_refused("run -m " + model() + " -p hi -ub 8", "-ub", "(tandem serve does)");
  // vLLM's spelling is serve's --tensor-parallel (under mpirun).
  expect_refused("run -m " + model() + " -p hi --tensor-parallel-size 2", "--tensor-parallel-size",
                 "(tandem serve does)");
  expect_refused("bench -m " + model() + " -fa 1", "-fa", "(tandem run, tandem chat, tandem serve do)");
  expect_refused("run -m " + model() + " -p hi -xyz", "-xyz", "one letter");
  expect_refused("run -m " + model() + " -p hi --tensor-split 1,1", "--tensor-split", "--device");
  // The model twice, or none.
  expect_refused(serve + model(), "give the model once", "-m PATH or PATH");
  expect_refused("serve --port 0", "give a model", "tandem serve PATH");
}

TEST(DialectFlags, SeveralUnexpectedArgumentsAreListedInTheOrderGiven) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  expect_refused("serve -m " + model() + " --port 0 --frob --blarg --quux", "--frob, --blarg, --quux",
                 "see tandem serve --help");
  expect_refused("run -m " + model() + " -p hi --aaa --bbb 3 --ccc", "--aaa, --bbb, 3, --ccc", "see tandem run --help");
}

}  // namespace
}  // namespace tandem::testing
