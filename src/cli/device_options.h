// --device cpu|cuda|auto for the commands that run the model (run, chat, serve, bench), and
// what `tandem info --device` prints. bench drives the CUDA forward pass directly; run, chat
// and serve run their Engine's steps on it (engine_device_forward). --device cuda refuses in
// one line saying why when it cannot be used, rather than silently using the CPU.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

#include "engine/engine.h"

namespace tandem::cli {

enum class ComputeDevice { Cpu, Cuda };

// Adds --device to `command`, writing the choice ("auto" by default) to *device.
CLI::Option* add_device_option(CLI::App* command, std::string* device);

// The device the command runs the model on for the flag's value; `has_cuda_path`: whether
// the command can run on the device at all (bench, run, chat, serve: yes; false for a command
// or mode that runs on the CPU only).
// auto: CUDA when the build has it, a device is present and the command has a CUDA path, else
// the CPU. cuda: throws InputError with the reason when it cannot be used (no CUDA in the
// build, no device, no CUDA path in this command).
ComputeDevice select_device(std::string_view flag, bool has_cuda_path);

// EngineConfig::device_forward for run, chat and serve: null for the CPU. `cpu_only`: a
// feature asked for that the device path lacks (e.g. "--workers"); empty: none. --device cuda
// throws InputError saying why when it cannot be used (no device, `cpu_only`, or, when the
// engine is built, what of the model or the KV cache the device path lacks); --device auto
// takes the CPU in each of those cases.
DeviceForwardFactory engine_device_forward(std::string_view flag, std::string_view cpu_only = {});

// `tandem info --device`: the GPU (name, compute capability, memory) and its measured read
// bandwidth, or one line saying why there is none.
std::string device_summary();

}  // namespace tandem::cli
