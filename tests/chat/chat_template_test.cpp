// Chat templates against the reference: every template in ../shared/chat-templates and
// tests/chat/data/templates, with every message set in data/messages, with and
// without add_generation_prompt, must render byte-identically to python3-jinja2 configured
// as transformers configures it (render_reference.py), or fail where Python fails.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/jinja/chat_template.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const fs::path kTestDir = fs::path(__FILE__).parent_path();
const fs::path kDataDir = kTestDir / "data";
const fs::path kSharedTemplates = testing::shared_path("chat-templates");

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Runs a shell command; returns its exit status and stdout.
int run_command(const std::string& command, std::string& output) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool python_jinja_available() {
  std::string ignored;
  return run_command("python3 -c 'import jinja2' >/dev/null 2>&1", ignored) == 0;
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == extension) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Case {
  fs::path template_path;
  fs::path messages_path;
  bool add_generation_prompt = false;
};

const char* const kBos = "<s>";
const char* const kEos = "</s>";

// Renders a case as the CLI does: a bare array is the messages; an object holds messages,
// tools and extra variables.
std::string render_case(const Case& c) {
  const ordered_json input = ordered_json::parse(read_file(c.messages_path));
  ordered_json messages = input, tools = nullptr, extra = ordered_json::object();
  if (input.is_object()) {
    for (auto it = input.begin(); it != input.end(); ++it) {
      if (it.key() == "messages")
        messages = it.value();
      else if (it.key() == "tools")
        tools = it.value();
      else
        extra[it.key()] = it.value();
    }
  }
  return ChatTemplate(read_file(c.template_path)).render(messages, tools, c.add_generation_prompt, kBos, kEos, extra);
}

// Where two renderings first differ, with a little context, for a readable failure.
std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n  python: " + ordered_json(expected.substr(from, 120)).dump() +
         "\n  tandem: " + ordered_json(actual.substr(from, 120)).dump();
}

TEST(ChatTemplate, MatchesPythonJinjaOnEveryTemplateAndMessageSet) {
  if (!python_jinja_available()) GTEST_SKIP() << "python3 with jinja2 not found (apt install python3-jinja2)";
  TANDEM_REQUIRE_SHARED("chat-templates");
  std::vector<fs::path> templates = files_in(kSharedTemplates, ".jinja");
  ASSERT_FALSE(templates.empty()) << "no templates in " << kSharedTemplates;
  for (const fs::path& t : files_in(kDataDir / "templates", ".jinja")) templates.push_back(t);
  const std::vector<fs::path> message_sets = files_in(kDataDir / "messages", ".json");
  ASSERT_GE(message_sets.size(), 5u);

  std::vector<Case> cases;
  ordered_json manifest = ordered_json::array();
  for (const fs::path& t : templates) {
    for (const fs::path& m : message_sets) {
      for (const bool generation_prompt : {false, true}) {
        cases.push_back({t, m, generation_prompt});
        manifest.push_back({{"template", t.string()},
                            {"messages", m.string()},
                            {"add_generation_prompt", generation_prompt},
                            {"bos_token", kBos},
                            {"eos_token", kEos}});
      }
    }
  }
  const fs::path manifest_path =
      fs::temp_directory_path() / ("tandem_chat_cases_" + std::to_string(getpid()) + ".json");
  std::ofstream(manifest_path) << manifest.dump();
  std::string reference_text;
  const int status = run_command(
      "python3 '" + (kTestDir / "render_reference.py").string() + "' '" + manifest_path.string() + "'", reference_text);
  fs::remove(manifest_path);
  ASSERT_EQ(status, 0) << "render_reference.py failed";
  const ordered_json reference = ordered_json::parse(reference_text);
  ASSERT_EQ(reference.size(), cases.size());

  std::map<std::string, int> rendered_per_template;
  int n_rendered = 0, n_errors = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string label = c.template_path.filename().string() + " + " + c.messages_path.filename().string() +
                              (c.add_generation_prompt ? " + generation prompt" : "");
    const ordered_json& expected = reference[i];
    std::string actual, error;
    bool ok = true;
    try {
      actual = render_case(c);
    } catch (const InputError& e) {
      ok = false;
      error = e.what();
    }
    if (expected["ok"].get<bool>()) {
      ++n_rendered;
      ++rendered_per_template[c.template_path.filename().string()];
      EXPECT_TRUE(ok) << label << ": python rendered it, tandem failed: " << error;
      if (!ok) continue;
      const std::string want = expected["output"].get<std::string>();
      EXPECT_TRUE(want == actual) << label << ": output differs " << first_difference(want, actual);
    } else {
      ++n_errors;
      EXPECT_FALSE(ok) << label << ": python failed (" << expected["error"].get<std::string>()
                       << ") but tandem rendered:\n"
                       << actual;
    }
  }
  // Every template must render for real with some message set, not only match errors.
  for (const fs::path& t : templates) {
    EXPECT_GT(rendered_per_template[t.filename().string()], 0) << t.filename() << " never rendered";
  }
  std::printf("compared %zu cases: %d rendered identically, %d failed in both\n", cases.size(), n_rendered, n_errors);
}

TEST(ChatTemplate, CliPrintsTheRenderedPromptExactly) {
  TANDEM_REQUIRE_SHARED("chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  const fs::path template_path = kSharedTemplates / "Qwen-Qwen2.5-7B-Instruct.jinja";
  const fs::path messages_path = kDataDir / "messages" / "tool_calls_dict_args.json";
  std::string output;
  const int status =
      run_command(std::string(TANDEM_BINARY) + " chat-template --template '" + template_path.string() +
                      "' --messages '" + messages_path.string() + "' --add-generation-prompt --bos '<s>' --eos '</s>'",
                  output);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(output, render_case({template_path, messages_path, true}));
  EXPECT_TRUE(output.ends_with("<|im_start|>assistant\n"));
}

TEST(ChatTemplate, CliReportsTemplateErrorsOnOneLine) {
  const fs::path bad = fs::temp_directory_path() / ("tandem_bad_template_" + std::to_string(getpid()) + ".jinja");
  std::ofstream(bad) << "line one\n{% include 'x.jinja' %}\n";
  std::string output;
  const int status = run_command(std::string(TANDEM_BINARY) + " chat-template --template '" + bad.string() +
                                     "' --messages '" + (kDataDir / "messages" / "user_only.json").string() + "' 2>&1",
                                 output);
  fs::remove(bad);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(output, "tandem: error: chat template line 2: unsupported tag 'include'\n");
}

}  // namespace
}  // namespace tandem
