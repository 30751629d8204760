/* Tandem's C API: the objects of tandem.h (a shared model, an engine running many requests)
 * behind opaque handles, for C and for other languages' foreign-function interfaces.
 *
 *   tandem_model* model;
 *   if (tandem_model_load("model.gguf", NULL, &model) != TANDEM_OK) {
 *     fprintf(stderr, "%s\n", tandem_last_error());
 *     return 1;
 *   }
 *   tandem_engine* engine;
 *   tandem_engine_create(model, NULL, &engine);
 *   tandem_generate_options options = tandem_generate_options_default();
 *   options.temperature = 0;
 *   tandem_result result;
 *   tandem_generate(engine, "The dream", &options, print_text, NULL, &result);
 *   tandem_result_free(&result);
 *   tandem_engine_free(engine);
 *   tandem_model_free(model);
 *
 * C99 or later; standard headers only. No exception crosses this API: every call that can
 * fail returns a tandem_status, and tandem_last_error() gives the message. Strings are UTF-8
 * and NUL-terminated unless a length comes with them.
 */
#ifndef TANDEM_C_H
#define TANDEM_C_H

#include <stddef.h>
#include <stdint.h>

/* The library's version; CMakeLists.txt reads it from here. */
#define TANDEM_VERSION_MAJOR 0
#define TANDEM_VERSION_MINOR 1
#define TANDEM_VERSION_PATCH 0
#define TANDEM_VERSION "0.1.0"

/* libtandem.so is built with hidden visibility; what is marked TANDEM_API is its interface. */
#ifndef TANDEM_API
#if defined(__GNUC__)
#define TANDEM_API __attribute__((visibility("default")))
#else
#define TANDEM_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ---------------------------------------------------------------------------- */

typedef enum tandem_status {
  TANDEM_OK = 0,
  TANDEM_ERROR_INPUT = 1,            /* bad input: a file, a prompt, an option */
  TANDEM_ERROR_BUFFER_TOO_SMALL = 2, /* the caller's buffer is too small; the size needed was reported */
  TANDEM_ERROR_INVALID_ARGUMENT = 3, /* a required pointer or handle is NULL */
  TANDEM_ERROR_OUT_OF_MEMORY = 4,
  TANDEM_ERROR_INTERNAL = 5 /* anything else: a bug in Tandem */
} tandem_status;

/* The message of this thread's last failed call ("" if none has failed). Valid until this
 * thread's next failing call. */
TANDEM_API const char* tandem_last_error(void);
/* "ok", "input error", "buffer too small", ... */
TANDEM_API const char* tandem_status_name(tandem_status status);
/* The library's version, "0.1.0": compare with TANDEM_VERSION to catch a mismatched header. */
TANDEM_API const char* tandem_version(void);

/* ---- Model: loaded once, shared, immutable --------------------------------------------- */

typedef struct tandem_model tandem_model;

typedef struct tandem_model_options {
  /* llama2.c checkpoints only: their tokenizer. NULL or "": tokenizer.bin or tok*.bin beside
   * the model. */
  const char* tokenizer_path;
  /* A built-in chat format ("chatml", "llama2", "llama3", "zephyr"). NULL or "": the model's
   * own template. */
  const char* chat_template;
} tandem_model_options;

/* path: a .gguf, a Hugging Face model folder or a llama2.c model.bin. options may be NULL.
 * On success *model is a new handle (free it with tandem_model_free); on failure NULL. */
TANDEM_API tandem_status tandem_model_load(const char* path, const tandem_model_options* options, tandem_model** model);
/* Releases this handle; engines created from it keep the model alive. NULL is ignored. */
TANDEM_API void tandem_model_free(tandem_model* model);

/* Properties; a NULL model gives 0. */
TANDEM_API int32_t tandem_model_vocab_size(const tandem_model* model);
TANDEM_API int64_t tandem_model_context_length(const tandem_model* model);
TANDEM_API int32_t tandem_model_bos_token(const tandem_model* model); /* -1: none */
TANDEM_API int32_t tandem_model_eos_token(const tandem_model* model); /* -1: none */
/* With the default KV types (F16 K and V). */
TANDEM_API int64_t tandem_model_kv_bytes_per_token(const tandem_model* model);

/* Buffers: a call writes its output only when it fits and always reports the size it needs
 * in *n_ids / *text_len (text: without the NUL, which it also needs room for). Call with
 * capacity 0 (the buffer may be NULL) to learn the size: TANDEM_ERROR_BUFFER_TOO_SMALL. */

/* Text (text_len bytes) -> ids; BOS first when add_bos and the vocabulary uses one. */
TANDEM_API tandem_status tandem_tokenize(const tandem_model* model, const char* text, size_t text_len, int add_bos,
                                         int32_t* ids, size_t capacity, size_t* n_ids);
/* Ids -> text, NUL-terminated. */
TANDEM_API tandem_status tandem_detokenize(const tandem_model* model, const int32_t* ids, size_t n_ids, char* text,
                                           size_t capacity, size_t* text_len);

typedef struct tandem_chat_message {
  const char* role; /* "system", "user", "assistant" */
  const char* content;
} tandem_chat_message;

/* The conversation in the model's chat template, ending with the assistant's turn opener. */
TANDEM_API tandem_status tandem_render_chat(const tandem_model* model, const tandem_chat_message* messages,
                                            size_t n_messages, char* text, size_t capacity, size_t* text_len);
/* The same as prompt ids (control tokens matched only in the template's own text). */
TANDEM_API tandem_status tandem_tokenize_chat(const tandem_model* model, const tandem_chat_message* messages,
                                              size_t n_messages, int32_t* ids, size_t capacity, size_t* n_ids);

/* ---- Engine: many concurrent requests over one model ---------------------------------- */

typedef struct tandem_engine tandem_engine;

/* What the KV cache stores K and V in; Q8_0/Q4_0 need a head size that is a multiple of 32. */
typedef enum tandem_kv_type {
  TANDEM_KV_F32 = 0,
  TANDEM_KV_F16 = 1,
  TANDEM_KV_BF16 = 2,
  TANDEM_KV_Q8_0 = 3,
  TANDEM_KV_Q4_0 = 4
} tandem_kv_type;

typedef struct tandem_engine_options {
  int32_t threads;          /* compute threads; <= 0: every core */
  int32_t max_sequences;    /* requests decoded together */
  int64_t max_batch_tokens; /* tokens per forward pass */
  int64_t context_length;   /* per request; 0: the model's */
  int64_t kv_memory_bytes;  /* KV cache pool; 0: max_sequences full contexts */
  int32_t kv_block_size;    /* tokens per KV cache block */
  int32_t kv_type_k;        /* tandem_kv_type of K (default TANDEM_KV_F16) */
  int32_t kv_type_v;        /* tandem_kv_type of V */
  /* A smaller model with the same vocabulary for TANDEM_SPECULATION_DRAFT requests (NULL:
   * none); borrowed: it must outlive tandem_engine_create, the engine keeps its own reference. */
  const struct tandem_model* draft_model;
} tandem_engine_options;

TANDEM_API tandem_engine_options tandem_engine_options_default(void);
/* options may be NULL (the defaults). The engine runs on a thread of its own until freed. */
TANDEM_API tandem_status tandem_engine_create(const tandem_model* model, const tandem_engine_options* options,
                                              tandem_engine** engine);
/* Cancels the requests in flight and stops the engine; streams still open then read their
 * final (cancelled) events, and must still be freed. NULL is ignored. */
TANDEM_API void tandem_engine_free(tandem_engine* engine);
/* Cancels a request (its id is in every event); unknown or finished ids are ignored. Any thread. */
TANDEM_API void tandem_engine_cancel(tandem_engine* engine, uint64_t request_id);

#define TANDEM_SEED_RANDOM UINT64_MAX

typedef struct tandem_generate_options {
  int64_t max_tokens;       /* 0: generate nothing */
  float temperature;        /* <= 0: greedy */
  int32_t top_k;            /* <= 0: off */
  float top_p;              /* >= 1: off */
  float min_p;              /* <= 0: off */
  float repetition_penalty; /* 1: off */
  int32_t repeat_last_n;
  float presence_penalty;
  float frequency_penalty;
  uint64_t seed;           /* TANDEM_SEED_RANDOM: a random one (reported in the result) */
  const char* const* stop; /* n_stop strings that end generation; they never appear */
  size_t n_stop;
  /* Speculative decoding (the output is unchanged by it): TANDEM_SPECULATION_*, at most
   * draft_max tokens proposed per step, the adaptive length's floor, prompt lookup's n-gram sizes. */
  int32_t speculation;
  int32_t draft_max;
  int32_t draft_min;
  int32_t ngram_min;
  int32_t ngram_max;
  /* Constrained decoding, at most one of the two (NULL or "": none): llama.cpp's GBNF text, or a
   * JSON Schema text ("{}": any JSON). Only allowed tokens are sampled; the request ends when the
   * text is complete. A grammar that does not compile fails the call with its reason. */
  const char* grammar;
  const char* json_schema;
} tandem_generate_options;

#define TANDEM_SPECULATION_NONE 0
#define TANDEM_SPECULATION_NGRAM 1 /* prompt lookup */
#define TANDEM_SPECULATION_DRAFT 2 /* the engine's draft_model proposes */

TANDEM_API tandem_generate_options tandem_generate_options_default(void);

typedef enum tandem_finish_reason {
  TANDEM_FINISH_NONE = 0, /* not finished */
  TANDEM_FINISH_END_OF_SEQUENCE = 1,
  TANDEM_FINISH_STOP_STRING = 2,
  TANDEM_FINISH_LENGTH = 3, /* max_tokens reached */
  TANDEM_FINISH_CONTEXT_LIMIT = 4,
  TANDEM_FINISH_CANCELLED = 5,
  TANDEM_FINISH_ERROR = 6
} tandem_finish_reason;

/* "end of sequence", "stop string", "token limit", "context limit", "cancelled", ... */
TANDEM_API const char* tandem_finish_reason_name(int32_t finish_reason);

typedef struct tandem_usage {
  int64_t prompt_tokens;
  int64_t cached_tokens; /* prompt tokens served from the prefix cache */
  int64_t completion_tokens;
  int64_t kv_bytes; /* KV cache memory the request held at its end */
} tandem_usage;

/* Speculative decoding's count for one request: tokens proposed and checked, and of those
 * kept (each one a forward pass saved). Zero without speculation. */
typedef struct tandem_speculation_usage {
  int64_t drafted_tokens;
  int64_t accepted_tokens;
} tandem_speculation_usage;

/* Milliseconds, measured by the engine. TPOT: the gaps between consecutive tokens. */
typedef struct tandem_timings {
  double queue_ms;
  double ttft_ms;
  double prefill_ms;
  double decode_ms;
  double e2e_ms;
  double tpot_mean_ms;
  double tpot_p50_ms;
  double tpot_p99_ms;
} tandem_timings;

/* One step of a request. Its pointers are valid only during the callback (or until the next
 * tandem_stream_next). usage is complete and timings set on the final event. */
typedef struct tandem_event {
  uint64_t request_id;
  const char* text; /* text_len bytes, NUL-terminated; never half a UTF-8 character */
  size_t text_len;
  const int32_t* tokens;
  size_t n_tokens;
  int32_t finished;
  int32_t finish_reason; /* tandem_finish_reason */
  tandem_usage usage;
  tandem_timings timings;
  tandem_speculation_usage speculation; /* so far; complete on the final event */
  /* Why the request failed, on a final event with finish_reason TANDEM_FINISH_ERROR (e.g.
   * "grammar: matching one token needed more than ..."): error_len bytes, NUL-terminated,
   * valid as long as text. "" (never NULL) on every other event. */
  const char* error;
  size_t error_len;
} tandem_event;

/* Called for every event of a request, on the thread that called tandem_generate. Return 0 to
 * go on, nonzero to cancel the request (a final event still follows). */
typedef int (*tandem_event_callback)(const tandem_event* event, void* user_data);

/* What a blocking call produced; free its buffers with tandem_result_free. */
typedef struct tandem_result {
  char* text; /* the generated text, NUL-terminated */
  size_t text_len;
  int32_t* tokens; /* the generated ids */
  size_t n_tokens;
  int32_t finish_reason; /* tandem_finish_reason */
  uint64_t seed;         /* the sampling seed used */
  tandem_usage usage;
  tandem_timings timings;
  tandem_speculation_usage speculation;
  /* finish_reason TANDEM_FINISH_ERROR: why the request failed (as tandem_event.error),
   * error_len bytes, NUL-terminated; "" otherwise. Freed by tandem_result_free. */
  char* error;
  size_t error_len;
} tandem_result;

/* Blocking generation. options, callback and result may be NULL. Any number of threads may
 * generate on one engine at once. */
TANDEM_API tandem_status tandem_generate(tandem_engine* engine, const char* prompt,
                                         const tandem_generate_options* options, tandem_event_callback callback,
                                         void* user_data, tandem_result* result);
TANDEM_API tandem_status tandem_generate_tokens(tandem_engine* engine, const int32_t* prompt_ids, size_t n_prompt_ids,
                                                const tandem_generate_options* options, tandem_event_callback callback,
                                                void* user_data, tandem_result* result);
/* The assistant's reply to a conversation (tandem_tokenize_chat, then generation). */
TANDEM_API tandem_status tandem_chat(tandem_engine* engine, const tandem_chat_message* messages, size_t n_messages,
                                     const tandem_generate_options* options, tandem_event_callback callback,
                                     void* user_data, tandem_result* result);
/* Frees the result's buffers and clears it; NULL or an already freed result is fine. */
TANDEM_API void tandem_result_free(tandem_result* result);

/* ---- Streams: pull a request's events one at a time ------------------------------------ */

typedef struct tandem_stream tandem_stream;

/* Queues the request and returns at once. */
TANDEM_API tandem_status tandem_stream_open(tandem_engine* engine, const char* prompt,
                                            const tandem_generate_options* options, tandem_stream** stream);
TANDEM_API tandem_status tandem_stream_open_tokens(tandem_engine* engine, const int32_t* prompt_ids,
                                                   size_t n_prompt_ids, const tandem_generate_options* options,
                                                   tandem_stream** stream);
/* Blocks for the next event and fills *event (its pointers are valid until the next call on
 * this stream). Returns TANDEM_OK with event->finished set for the final event; after it,
 * TANDEM_ERROR_INPUT. */
TANDEM_API tandem_status tandem_stream_next(tandem_stream* stream, tandem_event* event);
/* Cancels the stream's request; safe from any thread while another reads the stream. */
TANDEM_API void tandem_stream_cancel(tandem_stream* stream);
TANDEM_API uint64_t tandem_stream_seed(const tandem_stream* stream);
/* Cancels an unfinished request and frees the stream. NULL is ignored. */
TANDEM_API void tandem_stream_free(tandem_stream* stream);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_C_H */
