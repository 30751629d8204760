// `tandem run` with llama-cli's constrained-decoding flags, as a user runs it: aidreams260K
// writes prose unconstrained, so JSON that parses and validates is the grammar's doing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_binary.h"

namespace tandem::testing {
namespace {

const char* const kModel = "models/aidreams260K/model.gguf";
const char* const kPrompt = "The dream";

std::string run_model(const std::string& flags) {
  return "run -m " + shell_quote(shared_path(kModel)) + " -p " + shell_quote(kPrompt) + " " + flags;
}

TEST(RunGrammar, JsonSchemaFileGivesAValidObject) {
  TANDEM_REQUIRE_SHARED(kModel);
  const std::filesystem::path schema_path =
      std::filesystem::temp_directory_path() / ("tandem-run-schema-" + std::to_string(::getpid()) + ".json");
  std::ofstream(schema_path) << R"({"type":"object","properties":{"mood":{"enum":["happy","sad"]},)"
                                R"("n":{"type":"integer"}},"required":["mood","n"],"additionalProperties":false})";
  int complete = 0;
  for (int seed = 1; seed <= 3; ++seed) {
    const CommandResult result =
        run_tandem(run_model("-n 200 -s " + std::to_string(seed) + " --json-schema-file " + shell_quote(schema_path)));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_EQ(result.out.rfind(kPrompt, 0), 0u) << result.out;                       // the prompt is echoed first
    if (result.err.find("stop:    end of sequence") == std::string::npos) continue;  // ran out of tokens
    ++complete;
    const nlohmann::json value = nlohmann::json::parse(result.out.substr(std::string(kPrompt).size()), nullptr, false);
    ASSERT_TRUE(value.is_object()) << result.out;
    EXPECT_TRUE(value.at("mood") == "happy" || value.at("mood") == "sad") << result.out;
    EXPECT_TRUE(value.at("n").is_number_integer()) << result.out;
  }
  std::filesystem::remove(schema_path);
  EXPECT_GT(complete, 0) << "no run finished its object within 200 tokens";
}

TEST(RunGrammar, GbnfGrammarAndUnconstrainedDiffer) {
  TANDEM_REQUIRE_SHARED(kModel);
  const CommandResult word = run_tandem(run_model("-n 20 -s 4 --grammar " + shell_quote(R"(root ::= "yes" | "no")")));
  ASSERT_EQ(word.exit_code, 0) << word.err;
  // run ends its text with a newline.
  EXPECT_TRUE(word.out == std::string(kPrompt) + "yes\n" || word.out == std::string(kPrompt) + "no\n") << word.out;
  const CommandResult free_text = run_tandem(run_model("-n 20 -s 4"));
  ASSERT_EQ(free_text.exit_code, 0) << free_text.err;
  EXPECT_NE(free_text.out, word.out);
}

TEST(RunGrammar, BadGrammarFlagsAreOneLineErrors) {
  TANDEM_REQUIRE_SHARED(kModel);
  for (const auto& [flags, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--grammar " + shell_quote("root ::= nowhere"), "nowhere"},
           {"--json-schema " + shell_quote("{oops"), "json_schema"},
           {"--grammar-file /nonexistent/g.gbnf", "/nonexistent/g.gbnf"},
           {"--grammar " + shell_quote(R"(root ::= "a")") + " -j '{}'", "at most one"},
           // Issue 33: nested bounded repetitions are refused before the request starts.
           {"--grammar " + shell_quote(R"(root ::= (("a"{0,100}){0,100}){0,100})"), "expanded repetition limit"},
           {"--grammar " + shell_quote(R"(root ::= ((("a"{0,30}){0,30}){0,30}){0,30})"),
            "expanded repetition limit"}}) {
    const CommandResult result = run_tandem(run_model(flags));
    EXPECT_EQ(result.exit_code, 1) << flags << ": " << result.err;
    EXPECT_EQ(result.err.rfind("tandem: error: ", 0), 0u) << flags << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << flags << ": " << result.err;
    EXPECT_NE(result.err.find(needle), std::string::npos) << flags << ": " << result.err;
    EXPECT_TRUE(result.out.empty()) << flags << ": " << result.out;  // refused before any text
  }
}

// A grammar within the compile limits whose matching passes the per-step work limit (one "a"
// of ("a"?){0,2000} is any of 2000 places): the run ends at that step and exits 1 with one
// line that says why, instead of stalling on the mask.
TEST(RunGrammar, GrammarPastAMatchingLimitFailsWithTheReason) {
  TANDEM_REQUIRE_SHARED(kModel);
  const CommandResult result = run_tandem(run_model("-n 8 --grammar " + shell_quote(R"(root ::= ("a"?){0,2000} "b")")));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("tandem: error: grammar: matching one token needed more than"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("stop:    error"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace tandem::testing
