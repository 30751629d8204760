// add_sampling_options (see sampling_options.h).
#include "cli/sampling_options.h"

namespace tandem::cli {

void add_sampling_options(CLI::App* command, api::GenerateOptions* sampling, int64_t* seed) {
  command->add_option("--temp", sampling->temperature, "Temperature (0: greedy)")->capture_default_str();
  command->add_option("--top-k", sampling->top_k, "Top-k (0: off)")->capture_default_str();
  command->add_option("--top-p", sampling->top_p, "Top-p (1: off)")->capture_default_str();
  command->add_option("--min-p", sampling->min_p, "Min-p (0: off)")->capture_default_str();
  command->add_option("--repeat-penalty", sampling->repetition_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  command->add_option("--repeat-last-n", sampling->repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  command->add_option("-s,--seed", *seed, "Random seed (default: random)");
}

}  // namespace tandem::cli
