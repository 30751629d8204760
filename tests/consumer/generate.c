/* An embedder's C program: greedy generation through the installed tandem/tandem_c.h alone,
 * the text streamed through the event callback. Prints the whole id sequence (prompt, then
 * generated) on the first line, then the prompt and the text. Usage: generate MODEL PROMPT */
#include <tandem/tandem_c.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_text(const tandem_event* event, void* user_data) {
  size_t* streamed_bytes = (size_t*)user_data;
  *streamed_bytes += event->text_len;
  return 0; /* go on */
}

int main(int argc, char** argv) {
  tandem_model* model = NULL;
  tandem_engine* engine = NULL;
  tandem_engine_options engine_options;
  tandem_generate_options options;
  tandem_result result;
  int32_t* prompt_ids = NULL;
  size_t n_prompt_ids = 0, streamed_bytes = 0, i;
  int status = 1;

  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT\n", argv[0]);
    return 2;
  }
  if (strcmp(tandem_version(), TANDEM_VERSION) != 0) {
    fprintf(stderr, "header %s, library %s\n", TANDEM_VERSION, tandem_version());
    return 1;
  }
  if (tandem_model_load(argv[1], NULL, &model) != TANDEM_OK) goto fail;
  engine_options = tandem_engine_options_default();
  engine_options.threads = 1;
  engine_options.kv_type_k = TANDEM_KV_F32; /* the reference is llama2.c's, with an f32 KV cache */
  engine_options.kv_type_v = TANDEM_KV_F32;
  if (tandem_engine_create(model, &engine_options, &engine) != TANDEM_OK) goto fail;

  /* The prompt's ids: a first call for the size, a second to fill the buffer. */
  if (tandem_tokenize(model, argv[2], strlen(argv[2]), 1, NULL, 0, &n_prompt_ids) != TANDEM_ERROR_BUFFER_TOO_SMALL)
    goto fail;
  prompt_ids = malloc(n_prompt_ids * sizeof *prompt_ids);
  if (prompt_ids == NULL ||
      tandem_tokenize(model, argv[2], strlen(argv[2]), 1, prompt_ids, n_prompt_ids, &n_prompt_ids) != TANDEM_OK)
    goto fail;

  options = tandem_generate_options_default();
  options.temperature = 0;
  options.max_tokens = 1000; /* the context ends it */
  if (tandem_generate_tokens(engine, prompt_ids, n_prompt_ids, &options, print_text, &streamed_bytes, &result) !=
      TANDEM_OK)
    goto fail;
  if (streamed_bytes != result.text_len) {
    fprintf(stderr, "the streamed text differs from the result's\n");
  } else {
    for (i = 0; i < n_prompt_ids; ++i) printf(i ? " %d" : "%d", (int)prompt_ids[i]);
    for (i = 0; i < result.n_tokens; ++i) printf(" %d", (int)result.tokens[i]);
    printf("\n%s%s", argv[2], result.text);
    fprintf(stderr, "%s, %lld tokens, TTFT %.2f ms\n", tandem_finish_reason_name(result.finish_reason),
            (long long)result.usage.completion_tokens, result.timings.ttft_ms);
    status = 0;
  }
  tandem_result_free(&result);
  goto done;

fail:
  fprintf(stderr, "error: %s\n", tandem_last_error());
done:
  free(prompt_ids);
  tandem_engine_free(engine);
  tandem_model_free(model);
  return status;
}
