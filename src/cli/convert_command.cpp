// tandem convert: a Hugging Face model folder (config.json, safetensors, tokenizer.json) to a
// GGUF file llama.cpp can load. Flag parsing and the progress bar only; the work is in
// model/hf_to_gguf.
#include <unistd.h>

#include <cstdio>

#include "base/error.h"
#include "base/quant.h"
#include "cli/commands.h"
#include "model/hf_to_gguf.h"

namespace tandem::cli {

namespace {

struct ConvertFlags {
  std::string model_dir;
  std::string out_path;
  std::string type = "F16";
};

void run_convert(const ConvertFlags& flags) {
  HfConvertOptions options;
  options.model_dir = flags.model_dir;
  options.out_path = flags.out_path;
  const std::optional<DType> type = dtype_from_name(flags.type);
  const bool block32 = type && dtype_is_computable(*type) && dtype_block_geometry(*type).first == 32;
  TANDEM_CHECK_INPUT(type == DType::F32 || type == DType::F16 || type == DType::BF16 || block32,
                     "unknown --type '{}' (use F16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, BF16 or F32)", flags.type);
  options.type = *type;
  // A bar redrawn with \r belongs on a terminal only; in a log file it is noise.
  if (::isatty(STDERR_FILENO))
    options.progress = [](int64_t tensors_done, int64_t n_tensors, int64_t bytes_done, int64_t bytes_total) {
      constexpr int kWidth = 30;
      const int filled = bytes_total > 0 ? static_cast<int>(kWidth * bytes_done / bytes_total) : kWidth;
      std::fprintf(stderr, "\rconvert: [%.*s%*s] %lld/%lld tensors, %.1f/%.1f MiB", filled,
                   "==============================", kWidth - filled, "", static_cast<long long>(tensors_done),
                   static_cast<long long>(n_tensors), bytes_done / 1048576.0, bytes_total / 1048576.0);
      if (tensors_done == n_tensors) std::fputc('\n', stderr);
    };
  convert_hf_to_gguf(options);
  std::fprintf(stderr, "convert: wrote %s\n", flags.out_path.c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto flags = std::make_shared<ConvertFlags>();
  CLI::App* command = app.add_subcommand("convert", "Convert a Hugging Face model folder to GGUF");
  command->add_option("dir", flags->model_dir, "Folder with config.json and model.safetensors (or an index)")
      ->required();
  command->add_option("-o,--output", flags->out_path, "Output GGUF path")->required();
  command
      ->add_option("--type", flags->type,
                   "Matrix type: F16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, BF16 or F32 (MXFP4 experts of a released "
                   "gpt-oss checkpoint stay MXFP4, losslessly)")
      ->capture_default_str();
  command->callback([flags] { run_convert(*flags); });
}

}  // namespace tandem::cli
