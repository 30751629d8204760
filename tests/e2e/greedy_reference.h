// llama2.c's greedy reference runs (../shared/models/aidreams260K/greedy-reference.jsonl): per
// prompt, the whole id sequence run.c produced at temperature 0 (BOS, prompt, generated, up to
// the 128-token context). Shared by the CLI and library end-to-end tests.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_binary.h"

namespace tandem::testing {

struct ReferenceRun {
  std::string prompt;
  std::vector<int32_t> ids;
  std::string text;  // the prompt and the generated text, as run.c printed them
};

inline std::vector<ReferenceRun> read_reference() {
  std::vector<ReferenceRun> runs;
  std::istringstream lines(read_text_file(shared_path("models/aidreams260K/greedy-reference.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const nlohmann::json entry = nlohmann::json::parse(line);
    runs.push_back({entry.at("prompt").get<std::string>(), entry.at("ids").get<std::vector<int32_t>>(),
                    entry.at("text").get<std::string>()});
  }
  return runs;
}

}  // namespace tandem::testing
