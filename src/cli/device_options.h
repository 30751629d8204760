// --device cpu|cuda|auto for the commands that run the model (run, serve, bench), and what
// `tandem info --device` prints. The CUDA forward pass is not there yet (issue 17: the
// kernels are built and tested, src/backends/cuda/README.md), so the model runs on the CPU:
// --device cuda refuses in one line saying why rather than silently using the CPU.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace tandem::cli {

enum class ComputeDevice { Cpu, Cuda };

// Adds --device to `command`, writing the choice ("auto" by default) to *device.
CLI::Option* add_device_option(CLI::App* command, std::string* device);

// The device the forward pass runs on for the flag's value. auto: CUDA when the build has it,
// a device is present and the CUDA forward exists, else the CPU. cuda: throws InputError with
// the reason when it cannot be used (no CUDA in the build, no device, no CUDA forward yet).
ComputeDevice select_device(std::string_view flag);

// `tandem info --device`: the GPU (name, compute capability, memory) and its measured read
// bandwidth, or one line saying why there is none.
std::string device_summary();

}  // namespace tandem::cli
