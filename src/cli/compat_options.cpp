// The llama.cpp and vLLM flags Tandem takes (see compat_options.h).
#include "cli/compat_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace tandem::cli {
namespace {

// vLLM's names for the formats Tandem reads (its parsers of the same formats).
constexpr std::pair<std::string_view, chat::ToolCallFormat> kVllmToolParsers[] = {
    {"hermes", chat::ToolCallFormat::kHermes},
    {"llama3_json", chat::ToolCallFormat::kLlama3},
    {"mistral", chat::ToolCallFormat::kMistralNemo},
    {"deepseek_v3", chat::ToolCallFormat::kDeepSeekR1},
};

constexpr chat::ToolCallFormat kToolCallFormats[] = {
    chat::ToolCallFormat::kHermes,         chat::ToolCallFormat::kLlama3,         chat::ToolCallFormat::kMistralNemo,
    chat::ToolCallFormat::kFunctionaryV31, chat::ToolCallFormat::kFunctionaryV32, chat::ToolCallFormat::kFirefunctionV2,
    chat::ToolCallFormat::kCommandR,       chat::ToolCallFormat::kCommandR7B,     chat::ToolCallFormat::kDeepSeekR1,
    chat::ToolCallFormat::kNone,
};

bool given(const CLI::App& command, const std::string& name) {
  const CLI::Option* option = command.get_option_no_throw(name);
  return option != nullptr && option->count() > 0;
}

// -ngl's value: a layer count (negative: all, as llama.cpp's -1), or llama.cpp's auto / all.
bool gpu_layers_is_zero(const std::string& value) {
  if (value == "auto" || value == "all") return false;
  int64_t layers = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), layers);
  TANDEM_CHECK_INPUT(error == std::errc() && end == value.data() + value.size(),
                     "-ngl/--n-gpu-layers takes a layer count, auto or all, not '{}'", value);
  return layers == 0;
}

bool flash_attn_off(const std::string& value) {
  return value == "off" || value == "0" || value == "false" || value == "disabled";
}

// vLLM's --kv-cache-dtype names (and Tandem's own) as Tandem's KV cache type names.
std::string kv_type_of_vllm_name(const std::string& name) {
  if (name == "bfloat16") return "bf16";
  if (name == "float16" || name == "half" || name == "fp16") return "f16";
  if (name == "float32" || name == "float" || name == "fp32") return "f32";
  TANDEM_CHECK_INPUT(!name.starts_with("fp8"),
                     "--kv-cache-dtype {}: Tandem has no FP8 KV cache; its 8-bit one is q8_0 (--kv-cache-dtype takes "
                     "auto, f32, f16, bf16, q8_0, q4_0 and vLLM's bfloat16, float16)",
                     name);
  return name;  // f32, f16, bf16, q8_0, q4_0; parse_kv_type refuses the rest by name
}

}  // namespace

void add_compat_options(CLI::App* command, CompatFlags* flags, CompatScope scope) {
  const std::string group = "llama.cpp / vLLM spellings";
  command
      ->add_option("--n-gpu-layers,--gpu-layers", flags->n_gpu_layers,
                   "llama.cpp's -ngl: 0 runs on the CPU (as --device cpu); any other count changes nothing (Tandem "
                   "puts every layer where --device says)")
      ->group(group);
  command
      ->add_option("--flash-attn", flags->flash_attn,
                   "llama.cpp's -fa [on|off|auto]: accepted; attention is always fused (online softmax, no score "
                   "matrix)")
      ->check(CLI::IsMember({"on", "off", "auto", "1", "0", "true", "false", "enabled", "disabled"}))
      ->group(group);
  command->add_flag("--no-mmap", flags->no_mmap, "llama.cpp's: accepted; the model file is always mapped read-only")
      ->group(group);
  command
      ->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                   "vLLM's: auto (the default, f16), bfloat16, float16, or a --kv-type name; fp8 is refused (q8_0 is "
                   "the 8-bit cache)")
      ->group(group);
  command
      ->add_option("--chat-template-file", flags->chat_template_file,
                   "llama.cpp's: a Jinja chat template FILE (the same as --chat-template FILE)")
      ->group(group);
  command->add_flag("--jinja", flags->always_on, "llama.cpp's: accepted; the model's Jinja template is always used")
      ->group(group);
  if (scope == CompatScope::kGenerate) return;
  command->add_flag("--metrics", flags->always_on, "llama.cpp's: accepted; /metrics is always served")->group(group);
  command
      ->add_flag("--embeddings,--embedding", flags->always_on,
                 "llama.cpp's: accepted; /v1/embeddings is always served (--pooling mean|last)")
      ->group(group);
  command->add_flag("--cont-batching", flags->always_on, "llama.cpp's -cb: accepted; batching is always continuous")
      ->group(group);
  command
      ->add_flag("--enable-prefix-caching,--enable-chunked-prefill", flags->always_on,
                 "vLLM's: accepted; prefix caching and chunked prefill are always on")
      ->group(group);
  command
      ->add_flag("--enable-auto-tool-choice", flags->always_on,
                 "vLLM's: accepted; tool_choice auto (and none, required, a named function) always works")
      ->group(group);
  command
      ->add_option("--tool-call-parser", flags->tool_call_parser,
                   "How replies' tool calls are read (default: the format the chat template shows its model): " +
                       tool_call_parser_names())
      ->group(group);
  command
      ->add_option("--gpu-memory-utilization", flags->gpu_memory_utilization,
                   "vLLM's: accepted with a note; the KV pool is sized by --kv-memory SIZE")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  command
      ->add_option("--dtype", flags->dtype,
                   "vLLM's: only auto (Tandem computes in the model file's own tensor types; tandem convert --type "
                   "changes them)")
      ->check(CLI::IsMember({"auto", "half", "float16", "bfloat16", "float", "float32"}))
      ->group(group);
  command
      ->add_option("-b,--batch-size", flags->batch_size,
                   "llama.cpp's: tokens per engine step, as --max-batch-tokens (with -ub: the smaller)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->group(group);
  command
      ->add_option("--ubatch-size", flags->ubatch_size,
                   "llama.cpp's -ub: tokens per engine step, as --max-batch-tokens (with -b: the smaller)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->group(group);
}

void apply_compat_flags(const CompatFlags& flags, const CLI::App& command, KvTypeFlags* kv_types,
                        std::string* chat_template, std::string* device) {
  if (!flags.kv_cache_dtype.empty() && flags.kv_cache_dtype != "auto") {
    TANDEM_CHECK_INPUT(kv_types->both.empty(), "give --kv-cache-dtype or --kv-type, not both");
    kv_types->both = kv_type_of_vllm_name(flags.kv_cache_dtype);
  }
  if (!flags.chat_template_file.empty()) {
    TANDEM_CHECK_INPUT(chat_template->empty(), "give --chat-template or --chat-template-file, not both");
    *chat_template = flags.chat_template_file;
  }
  if (!flags.n_gpu_layers.empty() && gpu_layers_is_zero(flags.n_gpu_layers) && !given(command, "--device"))
    *device = "cpu";
  TANDEM_CHECK_INPUT(flags.dtype.empty() || flags.dtype == "auto",
                     "--dtype {}: Tandem computes in the model file's own tensor types (--dtype auto); to change "
                     "them, convert the model: tandem convert --type F16|BF16|F32",
                     flags.dtype);
}

std::optional<int64_t> compat_batch_tokens(const CompatFlags& flags, const CLI::App& command) {
  if (!flags.batch_size && !flags.ubatch_size) return std::nullopt;
  TANDEM_CHECK_INPUT(!given(command, "--max-batch-tokens"),
                     "give --max-batch-tokens or llama.cpp's -b/-ub, not both (they set the same thing)");
  if (flags.batch_size && flags.ubatch_size) return std::min(*flags.batch_size, *flags.ubatch_size);
  return flags.batch_size ? *flags.batch_size : *flags.ubatch_size;
}

std::string tool_call_parser_names() {
  std::string names;
  for (const chat::ToolCallFormat format : kToolCallFormats) {
    names += (names.empty() ? "" : ", ") + std::string(chat::tool_call_format_name(format));
    for (const auto& [vllm, same] : kVllmToolParsers)
      if (same == format && vllm != chat::tool_call_format_name(format)) names += fmt::format(" (or {})", vllm);
  }
  return names;
}

std::optional<chat::ToolCallFormat> compat_tool_call_format(const CompatFlags& flags) {
  if (flags.tool_call_parser.empty()) return std::nullopt;
  for (const auto& [vllm, format] : kVllmToolParsers)
    if (flags.tool_call_parser == vllm) return format;
  for (const chat::ToolCallFormat format : kToolCallFormats)
    if (flags.tool_call_parser == chat::tool_call_format_name(format)) return format;
  throw InputError(fmt::format("--tool-call-parser {}: not a format Tandem reads; it reads {}", flags.tool_call_parser,
                               tool_call_parser_names()));
}

std::vector<std::string> compat_notes(const CompatFlags& flags, bool on_gpu) {
  std::vector<std::string> notes;
  if (!flags.n_gpu_layers.empty()) {
    const std::string& count = flags.n_gpu_layers;
    if (gpu_layers_is_zero(count)) {
      notes.push_back(on_gpu ? "-ngl 0 changes nothing: --device cuda puts every layer on the GPU"
                             : "-ngl 0: every layer runs on the CPU (as --device cpu)");
    } else {
      notes.push_back(on_gpu ? "-ngl " + count +
                                   ": every layer runs on the GPU (Tandem does not split a model "
                                   "between GPU and CPU)"
                             : "-ngl " + count +
                                   " does not apply: this run is on the CPU (no usable GPU, or "
                                   "--device cpu), every layer here");
    }
  }
  if (!flags.flash_attn.empty())
    notes.push_back(flash_attn_off(flags.flash_attn)
                        ? "-fa off changes nothing: Tandem's attention is always fused (online softmax over KV "
                          "blocks, no score matrix) and cannot be turned off"
                        : "-fa changes nothing: Tandem's attention is always fused (online softmax over KV blocks, "
                          "no score matrix), on the CPU and the GPU");
  if (flags.no_mmap) notes.push_back("--no-mmap changes nothing: Tandem always maps the model file read-only");
  if (flags.gpu_memory_utilization)
    notes.push_back(fmt::format("--gpu-memory-utilization {} {}: the KV pool is sized by --kv-memory SIZE (default: "
                                "--parallel full contexts), not as a fraction of memory",
                                *flags.gpu_memory_utilization,
                                on_gpu ? "does not apply" : "does not apply on the CPU"));
  return notes;
}

}  // namespace tandem::cli
