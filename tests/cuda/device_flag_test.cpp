// What a user sees of --device and `info --device` in any build, with or without a GPU:
// --device cuda either runs on the device or refuses in one line saying why (never a silent
// CPU run), --device cpu is accepted, and `info --device` names the GPU or says why there is none.
#include <gtest/gtest.h>

#include <string>

#include "support/run_binary.h"

namespace tandem {
namespace {

using testing::run_tandem;

int count_lines(const std::string& text) {
  int lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines;
}

TEST(DeviceFlag, RunOnCudaRefusesInOneLine) {
  // run checks --device before it reads the model, so no model is needed to see the answer:
  // without CUDA or a device the reason is that, with one it is the engine's missing CUDA path.
  const auto result = run_tandem("run --device cuda -m /nonexistent/model.gguf -p x");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err.rfind("tandem: error: --device cuda: ", 0), 0u) << result.err;
  EXPECT_EQ(count_lines(result.err), 1) << result.err;
  const bool says_why = result.err.find("no CUDA device: ") != std::string::npos ||
                        result.err.find("built without CUDA") != std::string::npos ||
                        result.err.find("not implemented yet") != std::string::npos;
  EXPECT_TRUE(says_why) << result.err;
}

// bench has a CUDA path: without CUDA or a device it refuses before reading the model; with
// one it goes on to the model (here missing).
TEST(DeviceFlag, BenchOnCudaRefusesOnlyWithoutADevice) {
  const auto result = run_tandem("bench --device cuda -m /nonexistent/model.gguf -p 8 -n 0 -r 1");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(count_lines(result.err), 1) << result.err;
  const bool refused = result.err.rfind("tandem: error: --device cuda: ", 0) == 0;
  const bool no_device = result.err.find("no CUDA device: ") != std::string::npos ||
                         result.err.find("built without CUDA") != std::string::npos;
  EXPECT_EQ(refused, no_device) << result.err;
}

TEST(DeviceFlag, UnknownDeviceIsABadFlag) {
  const auto result = run_tandem("bench --device gpu -m /nonexistent/model.gguf");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--device"), std::string::npos) << result.err;
}

TEST(DeviceFlag, CpuGoesOnToTheModel) {
  // Past the device choice: the missing model is now the error.
  const auto result = run_tandem("bench --device cpu -m /nonexistent/model.gguf -p 8 -n 0 -r 1");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err.find("--device"), std::string::npos) << result.err;
}

TEST(DeviceFlag, InfoDeviceNamesTheGpuOrSaysWhyNot) {
  const auto result = run_tandem("info --device");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("device:          ", 0), 0u) << result.out;
  const bool none = result.out.find("no CUDA device: ") != std::string::npos ||
                    result.out.find("built without CUDA") != std::string::npos;
  if (none) {
    EXPECT_EQ(count_lines(result.out), 1) << result.out;
  } else {
    EXPECT_NE(result.out.find("compute capability"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("memory read:"), std::string::npos) << result.out;
  }
}

}  // namespace
}  // namespace tandem
