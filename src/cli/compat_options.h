// llama-server's, llama-cli's and vLLM's flags for what Tandem does on its own terms: ones it
// maps onto its settings (-ngl 0 -> --device cpu, --kv-cache-dtype -> --kv-type,
// --chat-template-file, -b/-ub -> --max-batch-tokens, --tool-call-parser, --dtype auto), ones
// that name what is always on (--jinja, --metrics, --embeddings, --cont-batching,
// --enable-prefix-caching, --enable-chunked-prefill, --enable-auto-tool-choice), and ones
// accepted with a one-line note saying what applies here (-ngl N, -fa, --no-mmap,
// --gpu-memory-utilization). The spellings Tandem's own options also take (--ctx-size,
// --max-model-len, --max-num-seqs, -a, --block-size, --max-num-batched-tokens) are names on
// those options in each command; the flags Tandem refuses are in cli/foreign_flags.h.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_call_parser.h"
#include "cli/kv_type_options.h"

namespace tandem::cli {

// Which flags a command takes: serve takes all; run and chat the ones about the model and
// the device.
enum class CompatScope { kServe, kGenerate };

// The flags as given (unset or empty: not given).
struct CompatFlags {
  std::string n_gpu_layers;                      // -ngl, --n-gpu-layers, --gpu-layers: N, auto, all
  std::string flash_attn;                        // -fa, --flash-attn: on, off, auto, ...
  bool no_mmap = false;                          // --no-mmap
  std::string kv_cache_dtype;                    // vLLM --kv-cache-dtype
  std::string chat_template_file;                // llama.cpp --chat-template-file
  bool always_on = false;                        // --jinja, --metrics, --embeddings, ... (nothing to do)
  std::optional<double> gpu_memory_utilization;  // vLLM (serve)
  std::string dtype;                             // vLLM --dtype (serve): only auto
  std::optional<int64_t> batch_size;             // llama.cpp -b, --batch-size (serve)
  std::optional<int64_t> ubatch_size;            // llama.cpp -ub, --ubatch-size (serve)
  std::string tool_call_parser;                  // vLLM --tool-call-parser (serve)
};

// Adds the flags of `scope` to `command`, writing into *flags.
void add_compat_options(CLI::App* command, CompatFlags* flags, CompatScope scope);

// Puts the mapped flags into the command's settings, before it runs: --kv-cache-dtype into
// *kv_types (InputError with --kv-type too, or for a type Tandem has no cache of),
// --chat-template-file into *chat_template (InputError with --chat-template too), -ngl 0 into
// *device ("cpu", unless --device was given), --dtype (InputError unless auto). `command`:
// to ask which of its flags were given.
void apply_compat_flags(const CompatFlags& flags, const CLI::App& command, KvTypeFlags* kv_types,
                        std::string* chat_template, std::string* device);

// serve's -b/--batch-size and -ub/--ubatch-size: the tokens per engine step they mean (the
// smaller; llama.cpp's physical batch is at most its logical one), or none when neither was
// given; InputError with --max-batch-tokens too.
std::optional<int64_t> compat_batch_tokens(const CompatFlags& flags, const CLI::App& command);

// --tool-call-parser NAME: the format (Tandem's names and vLLM's: hermes, llama3_json,
// mistral, deepseek_v3, ...); unset when not given; InputError for an unknown name, listing
// the known ones.
std::optional<chat::ToolCallFormat> compat_tool_call_format(const CompatFlags& flags);
// "hermes (vLLM's hermes), llama3 (llama3_json), ...": the names --tool-call-parser takes.
std::string tool_call_parser_names();

// One line for each flag given that changes nothing here, saying what applies instead
// (-ngl, -fa, --no-mmap, --gpu-memory-utilization). `on_gpu`: the model runs on the GPU.
std::vector<std::string> compat_notes(const CompatFlags& flags, bool on_gpu);

}  // namespace tandem::cli
