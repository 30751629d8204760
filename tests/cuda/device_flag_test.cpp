// What a user sees of --device and `info --device` in any build, with or without a GPU:
// --device cuda either runs on the device or refuses in one line saying why (never a silent
// CPU run), --device auto runs on the CPU where CUDA cannot, --device cpu is accepted, and
// `info --device` names the GPU or says why there is none.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "support/run_binary.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

using testing::run_tandem;

int count_lines(const std::string& text) {
  int lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines;
}

bool says_no_device(const std::string& text) {
  return text.find("no CUDA device: ") != std::string::npos || text.find("built without CUDA") != std::string::npos;
}

// run, chat and serve run their engine on CUDA: without CUDA or a device they refuse before
// reading the model, in one line saying so; with one they go on to the model (here missing).
TEST(DeviceFlag, RunChatServeOnCudaRefuseOnlyWithoutADevice) {
  for (const std::string command : {"run -p x", "chat", "serve"}) {
    const auto result = run_tandem(command + " --device cuda -m /nonexistent/model.gguf");
    EXPECT_EQ(result.exit_code, 1) << command;
    const bool refused = result.err.rfind("tandem: error: --device cuda: ", 0) == 0;
    EXPECT_EQ(refused, says_no_device(result.err)) << command << ": " << result.err;
    if (refused) {
      EXPECT_EQ(count_lines(result.err), 1) << command << ": " << result.err;
    }
  }
}

// What runs on the CPU only (other processes, a draft model) is refused with --device cuda in
// one line: the missing device first where there is none, else the flag that needs the CPU.
TEST(DeviceFlag, CpuOnlyFeaturesRefuseCudaInOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"serve --workers prefill:1,decode:1", "--workers runs on the CPU only"},
      {"serve --pipeline 2", "--pipeline runs on the CPU only"},
      {"serve --draft-model /nonexistent/draft.gguf", "--draft-model runs on the CPU only"},
      {"run --draft-model /nonexistent/draft.gguf -p x", "--draft-model runs on the CPU only"}};
  for (const auto& [command, reason] : cases) {
    const auto result = run_tandem(command + " --device cuda -m /nonexistent/model.gguf");
    EXPECT_EQ(result.exit_code, 1) << command;
    EXPECT_EQ(result.err.rfind("tandem: error: --device cuda: ", 0), 0u) << command << ": " << result.err;
    EXPECT_EQ(count_lines(result.err), 1) << command << ": " << result.err;
    EXPECT_TRUE(says_no_device(result.err) || result.err.find(reason) != std::string::npos)
        << command << ": " << result.err;
  }
}

// --device auto runs where it can: on the CPU without a device, and on the CPU for what the
// device path lacks (a bf16 KV cache) even with one; both print the CPU's ids.
TEST(DeviceFlagModel, AutoRunsOnTheCpuWhereCudaCannot) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string common = "run -m " + testing::shell_quote(testing::shared_path(testing::kAidreamsGguf)) +
                             " --ids --temp 0 -n 24 -t 2 -q -p \"The dream\" --kv-type bf16";
  const auto cpu = run_tandem(common + " --device cpu");
  const auto automatic = run_tandem(common + " --device auto");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_FALSE(cpu.out.empty());
  EXPECT_EQ(automatic.out, cpu.out);
  // Explicitly on the device, the bf16 cache is refused in one line (or the device is missing).
  const auto device = run_tandem(common + " --device cuda");
  EXPECT_EQ(device.exit_code, 1);
  EXPECT_EQ(count_lines(device.err), 1) << device.err;
  EXPECT_TRUE(says_no_device(device.err) || device.err.find("bf16") != std::string::npos) << device.err;
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
