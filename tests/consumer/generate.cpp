// An embedder's C++ program: greedy generation through the installed tandem/tandem.h alone.
// Prints the whole id sequence (prompt, then generated) on the first line, then the prompt
// and the streamed text. Usage: generate MODEL PROMPT
#include <tandem/tandem.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT\n", argv[0]);
    return 2;
  }
  try {
    const std::shared_ptr<const tandem::api::Model> model = tandem::api::Model::load(argv[1]);
    tandem::api::EngineOptions engine_options;
    engine_options.threads = 1;
    // The reference is llama2.c's, with an f32 KV cache.
    engine_options.kv_type_k = engine_options.kv_type_v = tandem::api::KvCacheType::F32;
    tandem::api::Engine engine(model, engine_options);
    tandem::api::GenerateOptions options;
    options.temperature = 0;
    options.max_tokens = 1000;  // the context ends it
    std::string streamed;
    const tandem::api::Result result =
        engine.generate(argv[2], options, [&](std::string_view text) { streamed.append(text); });
    if (streamed != result.text) {
      std::fprintf(stderr, "the streamed text differs from the result's\n");
      return 1;
    }
    std::vector<int32_t> ids = result.prompt_ids;
    ids.insert(ids.end(), result.tokens.begin(), result.tokens.end());
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n%s%s", argv[2], result.text.c_str());
    std::fprintf(stderr, "%s: %s, %lld tokens, TTFT %.2f ms, TPOT p50 %.3f ms\n", tandem::api::version(),
                 tandem::api::finish_reason_name(result.finish_reason),
                 static_cast<long long>(result.usage.completion_tokens), result.timings.ttft_ms,
                 result.timings.tpot_percentile_ms(0.5));
  } catch (const tandem::api::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
