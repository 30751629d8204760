// --device cpu|cuda|auto for the commands that run the model (run, serve, bench), and what
// `tandem info --device` prints. The CUDA forward pass exists (src/backends/cuda/README.md)
// but the engine does not call it yet, so only bench runs on the device; run and serve
// refuse --device cuda in one line saying why rather than silently using the CPU.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace tandem::cli {

enum class ComputeDevice { Cpu, Cuda };

// Adds --device to `command`, writing the choice ("auto" by default) to *device.
CLI::Option* add_device_option(CLI::App* command, std::string* device);

// The device the command runs the model on for the flag's value; `has_cuda_path`: whether
// the command can run on the device at all (bench: yes; run, serve: not until the engine can).
// auto: CUDA when the build has it, a device is present and the command has a CUDA path, else
// the CPU. cuda: throws InputError with the reason when it cannot be used (no CUDA in the
// build, no device, no CUDA path in this command).
ComputeDevice select_device(std::string_view flag, bool has_cuda_path);

// `tandem info --device`: the GPU (name, compute capability, memory) and its measured read
// bandwidth, or one line saying why there is none.
std::string device_summary();

}  // namespace tandem::cli
