// A test-tiny F32 model file made by `tandem gen-model` for server tests that need a model
// ../shared lacks: random weights (so with ignore_eos a request runs to max_tokens), a
// 4096-token context, the vocabulary of a file in ../shared. Hold it in a function-local
// static: written once per test process, removed at exit.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

class GeneratedTinyModel {
 public:
  // Writes <temp>/<name>-<pid>.gguf; path() is empty when gen-model failed. `extra`: more
  // gen-model arguments ("--rank-head 1").
  GeneratedTinyModel(const std::string& name, const std::string& vocab_path, const std::string& extra = "") {
    const std::string out =
        (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
    const std::string command = std::string(TANDEM_BINARY) +
                                " gen-model --shape test-tiny --type F32 --context 4096 --vocab-from '" + vocab_path +
                                "' " + extra + " -o '" + out + "' > /dev/null 2>&1";
    if (std::system(command.c_str()) == 0) path_ = out;
  }
  ~GeneratedTinyModel() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove(path_, ignored);
  }
  GeneratedTinyModel(const GeneratedTinyModel&) = delete;
  GeneratedTinyModel& operator=(const GeneratedTinyModel&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
