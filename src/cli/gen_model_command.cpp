// tandem gen-model: writes a random-weight Llama/Qwen3/Gemma 3/Phi-3 (or MoE) GGUF of a known shape, with the tokenizer
// copied from a vocabulary GGUF. Flag parsing and progress only; the work is in
// model/model_generator.
#include <unistd.h>

#include <cstdio>

#include "base/error.h"
#include "cli/commands.h"
#include "model/model_generator.h"

namespace tandem::cli {

namespace {

struct GenModelFlags {
  std::string shape;
  std::string type = "Q8_0";
  std::string vocab_path;
  uint64_t seed = 1234;
  int64_t n_layers = 0;
  int64_t context_length = 0;
  float branch_scale = 1.0f;
  float output_scale = 1.0f;
  std::string rope_scaling;
  double rope_factor = 0.0;
  int64_t rope_original_context = 0;
  int64_t rank_head = 0;
  std::string out_path;
};

void run_gen_model(const GenModelFlags& flags) {
  GeneratorOptions options;
  options.shape = flags.shape;
  options.q4_k_m = flags.type == "Q4_K_M" || flags.type == "q4_k_m";
  options.q5_k_m = flags.type == "Q5_K_M" || flags.type == "q5_k_m";
  options.q3_k_m = flags.type == "Q3_K_M" || flags.type == "q3_k_m";
  const auto type = options.q4_k_m   ? std::optional<DType>(DType::Q4_K)
                    : options.q5_k_m ? std::optional<DType>(DType::Q5_K)
                    : options.q3_k_m ? std::optional<DType>(DType::Q3_K)
                                     : dtype_from_name(flags.type);
  TANDEM_CHECK_INPUT(type.has_value(),
                     "unknown --type '{}' (use F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, "
                     "Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_K_M, Q5_K_M or Q3_K_M)",
                     flags.type);
  options.type = *type;
  options.vocab_path = flags.vocab_path;
  options.seed = flags.seed;
  options.n_layers = flags.n_layers;
  options.context_length = flags.context_length;
  options.branch_scale = flags.branch_scale;
  options.output_scale = flags.output_scale;
  options.rope_scaling = flags.rope_scaling;
  options.rope_factor = flags.rope_factor;
  options.rope_original_context = flags.rope_original_context;
  options.rank_head = flags.rank_head;
  options.out_path = flags.out_path;
  // A bar redrawn with \r belongs on a terminal only; in a log file it is noise.
  if (::isatty(STDERR_FILENO))
    options.progress = [](int64_t tensors_done, int64_t n_tensors, int64_t bytes_done, int64_t bytes_total) {
      std::fprintf(stderr, "\rgen-model: %lld/%lld tensors, %.1f/%.1f MiB", static_cast<long long>(tensors_done),
                   static_cast<long long>(n_tensors), bytes_done / 1048576.0, bytes_total / 1048576.0);
      if (tensors_done == n_tensors) std::fputc('\n', stderr);
    };
  generate_random_gguf(options);
  std::fprintf(stderr, "gen-model: wrote %s\n", flags.out_path.c_str());
}

}  // namespace

void add_gen_model_command(CLI::App& app) {
  auto flags = std::make_shared<GenModelFlags>();
  std::string shapes;
  for (const std::string& name : generated_shape_names()) shapes += (shapes.empty() ? "" : ", ") + name;
  CLI::App* command = app.add_subcommand(
      "gen-model", "Write a random-weight Llama, Qwen3, Gemma 3, Phi-3 or mixture-of-experts GGUF of a known shape");
  command->add_option("--shape", flags->shape, "Model shape: " + shapes)->required();
  command
      ->add_option("--type", flags->type,
                   "Weight type: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, "
                   "Q6_K, IQ4_XS, Q4_K_M, Q5_K_M or Q3_K_M (mix)")
      ->capture_default_str();
  command->add_option("--vocab-from", flags->vocab_path, "GGUF whose tokenizer.ggml.* metadata is copied")->required();
  command->add_option("--seed", flags->seed, "Random seed")->capture_default_str();
  command->add_option("--layers", flags->n_layers,
                      "Keep only the shape's first N layers (0: all); same seed, same weights: an early-exit "
                      "draft of the full model");
  command
      ->add_option("--branch-scale", flags->branch_scale,
                   "Scale attn_output and ffn_down (each layer's residual contribution); below 1 a layer prefix "
                   "agrees with the whole model more often")
      ->capture_default_str();
  command
      ->add_option("--output-scale", flags->output_scale,
                   "Multiply the logits by S (output_norm.weight = S; weight bytes unchanged): random weights "
                   "give nearly flat next-token distributions, S ~16 peaked ones (the argmax stays the same)")
      ->capture_default_str();
  command->add_option("--context", flags->context_length, "Context length the file declares (0: the shape's)");
  command->add_option("--rope-scaling", flags->rope_scaling,
                      "RoPE scaling: none, linear, yarn, longrope (rope_factors_long/short) or llama3 (rope_freqs); "
                      "default: the shape's (LongRoPE for phi-4-mini and test-phi3, else none)");
  command->add_option("--rope-factor", flags->rope_factor,
                      "Scaling factor s for linear, yarn and llama3 (default 4); longrope's is the context / original");
  command->add_option("--rope-original-context", flags->rope_original_context,
                      "Context before scaling (default: the context / s, or the shape's for longrope)");
  command
      ->add_option("--rank-head", flags->rank_head,
                   "Add a reranker's classification head: cls.output.weight/bias with this many outputs (random)")
      ->check(CLI::Range(0, 16));
  command->add_option("-o,--output", flags->out_path, "Output GGUF path")->required();
  command->callback([flags] { run_gen_model(*flags); });
}

}  // namespace tandem::cli
