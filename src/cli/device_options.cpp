// --device and `info --device` (device_options.h). Only this file of the CLI asks whether
// the build has CUDA; the backend's own calls live in src/backends/cuda.
#include "cli/device_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "cli/human_units.h"

#if defined(TANDEM_WITH_CUDA)
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_step_forward.h"
#include "backends/cuda/hbm_bandwidth.h"
#endif

namespace tandem::cli {

CLI::Option* add_device_option(CLI::App* command, std::string* device) {
  return command
      ->add_option("--device", *device,
                   "Where the model runs: cpu, cuda, or auto (cuda when built with CUDA, a GPU is present and it "
                   "runs this model and these options; else cpu)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

ComputeDevice select_device(std::string_view flag, bool has_cuda_path) {
  if (flag == "cpu") return ComputeDevice::Cpu;
#if defined(TANDEM_WITH_CUDA)
  if (flag == "auto" && !has_cuda_path) return ComputeDevice::Cpu;  // no device query: nothing to gain
  std::string why_not;
  const bool present = cuda::find_cuda_device(&why_not).has_value();
  if (flag == "auto") return present ? ComputeDevice::Cuda : ComputeDevice::Cpu;
  TANDEM_CHECK_INPUT(present, "--device cuda: {}", why_not);
  TANDEM_CHECK_INPUT(has_cuda_path, "--device cuda: this command runs on the CPU only; use --device cpu");
  return ComputeDevice::Cuda;
#else
  TANDEM_CHECK_INPUT(flag != "cuda",
                     "--device cuda: built without CUDA (configure with nvcc installed, TANDEM_CUDA=ON)");
  return ComputeDevice::Cpu;
#endif
}

DeviceForwardFactory engine_device_forward(std::string_view flag, std::string_view cpu_only) {
  if (flag == "cuda" && !cpu_only.empty()) {
    select_device(flag, true);  // no device, or no CUDA in the build: that first
    throw InputError(fmt::format("--device cuda: {} runs on the CPU only; use --device cpu", cpu_only));
  }
  if (select_device(flag, cpu_only.empty()) == ComputeDevice::Cpu) return nullptr;
#if defined(TANDEM_WITH_CUDA)
  return cuda::cuda_device_forward(flag == "cuda");
#else
  return nullptr;  // select_device picks the CPU in a build without CUDA
#endif
}

std::string device_summary() {
#if defined(TANDEM_WITH_CUDA)
  std::string why_not;
  const std::optional<cuda::CudaDeviceInfo> device = cuda::find_cuda_device(&why_not);
  if (!device) return fmt::format("device:          {}", why_not);
  std::string text = fmt::format("device:          {} (compute capability {}.{}, {} SMs), memory {} ({} free)\n",
                                 device->name, device->compute_major, device->compute_minor, device->multiprocessors,
                                 human_bytes(device->total_bytes), human_bytes(device->free_bytes));
  // 4 GiB, far past any L2, or a quarter of what is free on a smaller device.
  const int64_t buffer = std::min<int64_t>(int64_t{4} << 30, device->free_bytes / 4);
  try {
    const cuda::HbmBandwidth bandwidth = cuda::measure_hbm_read_bandwidth(buffer, 10);
    text += fmt::format("memory read:     {:.1f} GB/s best, {:.1f} GB/s median ({} buffer, {} runs, streaming-read "
                        "kernel timed with CUDA events)",
                        bandwidth.best_gb_per_s, bandwidth.median_gb_per_s, human_bytes(bandwidth.buffer_bytes),
                        bandwidth.runs);
  } catch (const cuda::CudaError& error) {
    text += fmt::format("memory read:     not measured: {}", error.what());
  }
  return text;
#else
  return "device:          built without CUDA";
#endif
}

}  // namespace tandem::cli
