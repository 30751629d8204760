// Tandem's public C++ API: load a model once, share it between threads, and run many
// generation requests on an engine that batches them together.
//
//   auto model = tandem::api::Model::load("model.gguf");
//   tandem::api::Engine engine(model);
//   tandem::api::GenerateOptions options;
//   options.max_tokens = 64;
//   options.temperature = 0;  // greedy
//   auto result = engine.generate("The dream", options, [](std::string_view text) { std::cout << text; });
//
// Standard headers only (C++17 or later); nothing here exposes Tandem's internals. The API
// lives in tandem::api because the internals use namespace tandem (with their own Model,
// Engine, ...): two namespaces keep an embedder's `using namespace` from ever meeting an
// internal name. Bad input (a missing file, an over-long prompt, a bad option) throws
// tandem::api::Error. The C API over the same objects is tandem_c.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// libtandem.so is built with hidden visibility; what is marked TANDEM_API is its interface.
#ifndef TANDEM_API
#if defined(__GNUC__)
#define TANDEM_API __attribute__((visibility("default")))
#else
#define TANDEM_API
#endif
#endif

namespace tandem::api {

namespace detail {  // defined in src/api/
struct ModelState;
struct EngineState;
struct StreamState;
struct EngineAccess;
}  // namespace detail

// Bad input, with one line that names the problem. (Running out of memory is std::bad_alloc;
// Tandem's own bugs abort rather than throw.)
class TANDEM_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  ~Error() override;
};

// "0.1.0": the library's version (TANDEM_VERSION in tandem_c.h).
TANDEM_API const char* version();

// What the KV cache stores K and V in (llama.cpp's --cache-type-k/-v): F16 halves F32's
// memory; Q8_0 and Q4_0 (blocks of 32 along each head) need a head size that is a multiple of 32.
enum class KvCacheType { F32, F16, BF16, Q8_0, Q4_0 };

struct ModelOptions {
  // llama2.c checkpoints only: their tokenizer (tokenizer.bin, a .gguf or a tokenizer.json).
  // Empty: tokenizer.bin or tok*.bin beside the model.
  std::string tokenizer_path;
  // A built-in chat format ("chatml", "llama2", "llama3", "zephyr"). Empty: the model's own
  // Jinja template (GGUF tokenizer.chat_template), else the built-in it resembles (ChatML).
  std::string chat_template;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// A loaded model with its tokenizer and chat template. Immutable: one instance serves any
// number of engines and threads at once. Shared ownership keeps it alive for every engine
// that uses it.
class TANDEM_API Model {
 public:
  // path: a .gguf, a Hugging Face model folder or a llama2.c model.bin. Throws Error.
  static std::shared_ptr<const Model> load(const std::string& path, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Text -> token ids; BOS first when add_bos and the vocabulary uses one. With
  // parse_special, control-token text ("<s>", "<|im_start|>") becomes the control token;
  // without, it is plain text.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos = true, bool parse_special = false) const;
  // Token ids -> text (control tokens have none). Throws Error for an id outside the vocabulary.
  std::string detokenize(const std::vector<int32_t>& ids) const;

  // The conversation rendered with the model's chat template, ending with the assistant's
  // turn opener: the prompt a chat model continues. Throws Error (unknown role, template error).
  std::string render_chat(const std::vector<ChatMessage>& messages) const;
  // render_chat's text as prompt ids: BOS as the model wants it, and control tokens matched
  // only in the template's own text, never inside what a message says.
  std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& messages) const;
  // What render_chat uses: "model template" or a built-in format's name.
  std::string chat_format() const;

  int32_t vocab_size() const;
  int64_t context_length() const;  // positions one request may use (prompt + generated)
  int32_t bos_token() const;       // -1 when the vocabulary has none
  int32_t eos_token() const;       // -1 when the vocabulary has none
  // KV cache memory one position takes with K and V stored as given (default: the engine's).
  int64_t kv_bytes_per_token(KvCacheType k = KvCacheType::F16, KvCacheType v = KvCacheType::F16) const;
  const std::string& path() const;

 private:
  friend class Engine;
  friend struct detail::EngineAccess;
  explicit Model(std::unique_ptr<detail::ModelState> state);
  std::unique_ptr<detail::ModelState> state_;
};

struct EngineOptions {
  int threads = 0;                 // compute threads; <= 0: every core
  int32_t max_sequences = 4;       // requests decoded together; more wait in a queue
  int64_t max_batch_tokens = 512;  // tokens per forward pass: long prompts go in chunks of this
  int64_t context_length = 0;      // per request; 0 or above the model's: the model's
  int64_t kv_memory_bytes = 0;     // KV cache pool; 0: max_sequences full contexts
  int32_t kv_block_size = 16;      // tokens per KV cache block (the prefix cache's unit)
  KvCacheType kv_type_k = KvCacheType::F16;
  KvCacheType kv_type_v = KvCacheType::F16;
  // A smaller model with the same vocabulary for Speculation::Draft requests (a different
  // vocabulary is an Error here); null: none.
  std::shared_ptr<const Model> draft_model;
  // Records every op of every step (time, bytes, FLOPs) for Engine::profile_summary; the
  // cost is two clock reads per op.
  bool profile = false;
  // Also keeps each step, op and compute-thread chunk for Engine::write_trace (implies
  // profile; memory grows with the steps run).
  bool trace = false;
};

// Speculative decoding: tokens proposed ahead and checked by the model in one forward pass.
// It never changes what is generated: greedy output is the same tokens; prompt lookup gives
// seeded sampling the same tokens too, a draft model the same distribution.
enum class Speculation {
  None,   // one token per forward pass
  Ngram,  // prompt lookup: propose what followed the latest earlier match of the newest n-gram
  Draft,  // EngineOptions::draft_model proposes (kept with the rejection-sampling rule)
};

struct SpeculativeOptions {
  Speculation type = Speculation::None;
  int32_t draft_max = 4;  // tokens proposed per step at most
  int32_t draft_min = 0;  // the adaptive length's floor (it shrinks while proposals fail)
  int32_t ngram_min = 2;  // n-gram sizes looked up, the longest first
  int32_t ngram_max = 4;
};

struct GenerateOptions {
  int64_t max_tokens = 256;  // tokens to generate at most; 0: none (the request ends at once)
  // Sampling, applied in this order: penalties, temperature, top-k, top-p, min-p.
  float temperature = 0.8f;         // <= 0: greedy (the most probable token)
  int32_t top_k = 40;               // <= 0: off
  float top_p = 0.95f;              // >= 1: off
  float min_p = 0.05f;              // <= 0: off
  float repetition_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;       // tokens the penalties look back over; < 0: all
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;   // unset: a random one (Stream::seed, Result::seed say which)
  std::vector<std::string> stop;  // generation ends before any of these; they never appear
  SpeculativeOptions speculative;
  // Constrained decoding: only tokens the grammar allows are sampled, and the request ends
  // (EndOfSequence) once the text is complete and nothing may follow. At most one of the two;
  // a grammar that does not compile is an Error naming the problem.
  std::string grammar;      // llama.cpp's GBNF, rule `root` first; empty: none
  std::string json_schema;  // a JSON Schema (OpenAI strict mode's subset); "{}": any JSON; empty: none
};

enum class FinishReason {
  None,           // not finished yet
  EndOfSequence,  // the model ended its text (the EOS token)
  StopString,     // one of GenerateOptions::stop
  Length,         // max_tokens reached
  ContextLimit,   // the context is full
  Cancelled,      // Stream::cancel, Engine::cancel, or the engine shutting down
  Error,          // the engine could not run the request
};
// "end of sequence", "stop string", "token limit", "context limit", "cancelled", "error", "none".
TANDEM_API const char* finish_reason_name(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV came from the prefix cache
  int64_t completion_tokens = 0;  // generated, EOS included when it ended the request
  int64_t kv_bytes = 0;           // KV cache memory the request held at its end (whole blocks)
  int64_t drafted_tokens = 0;     // speculative decoding: tokens proposed and checked
  int64_t accepted_tokens = 0;    // of those, kept (each one a forward pass saved)
};

// Milliseconds, measured by the engine for one request.
struct TANDEM_API Timings {
  double queue_ms = 0.0;       // submitted -> first scheduled
  double ttft_ms = 0.0;        // submitted -> first token
  double prefill_ms = 0.0;     // first scheduled -> first token: the prompt's forward passes
  double decode_ms = 0.0;      // first token -> last token
  double e2e_ms = 0.0;         // submitted -> finished
  std::vector<double> itl_ms;  // gaps between consecutive tokens (time per output token)

  double tpot_mean_ms() const;  // decode_ms / itl_ms.size(); 0 without gaps
  // The gap at `fraction` (0.5: median, 0.99: p99) of the sorted itl_ms; 0 without gaps.
  double tpot_percentile_ms(double fraction) const;
};

// One step of a request: the text and token(s) it produced. The last event has finished set,
// the finish reason, and complete usage and timings (earlier events: usage so far, no timings).
struct Event {
  uint64_t request_id = 0;
  std::string text;             // may be empty (a UTF-8 character or a possible stop string is held back)
  std::vector<int32_t> tokens;  // the token(s) sampled in this step
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string error;  // finish_reason Error: why ("grammar: ..." for a grammar past a matching limit)
  Usage usage;
  Timings timings;
};

struct Result {
  std::string text;                 // the generated text (the prompt not included)
  std::vector<int32_t> prompt_ids;  // the prompt as the model saw it (BOS included if any)
  std::vector<int32_t> tokens;      // the generated ids (EOS included when it ended the request)
  FinishReason finish_reason = FinishReason::None;
  std::string error;  // finish_reason Error: why
  uint64_t seed = 0;  // the sampling seed used
  Usage usage;
  Timings timings;
};

class Engine;

// One request's events, pulled by the thread that owns the stream. Destroying a stream whose
// request has not finished cancels it.
class TANDEM_API Stream {
 public:
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  ~Stream();

  // Blocks for the next event; std::nullopt once the final event has been returned.
  std::optional<Event> next();
  // Ends the request at the engine's next step (with a final Cancelled event, unless it
  // finished first). Thread-safe; harmless once finished.
  void cancel();

  uint64_t id() const;
  uint64_t seed() const;
  const std::vector<int32_t>& prompt_ids() const;

  // The remaining events in a range-for: for (const tandem::api::Event& event : stream) ...
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Event;
    using difference_type = std::ptrdiff_t;
    using pointer = const Event*;
    using reference = const Event&;

    iterator() = default;
    explicit iterator(Stream* stream) : stream_(stream) { ++*this; }
    reference operator*() const { return *event_; }
    pointer operator->() const { return &*event_; }
    iterator& operator++() {
      event_ = stream_->next();
      if (!event_) stream_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& a, const iterator& b) { return a.stream_ == b.stream_; }
    friend bool operator!=(const iterator& a, const iterator& b) { return !(a == b); }

   private:
    Stream* stream_ = nullptr;  // null: the end
    std::optional<Event> event_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  friend class Engine;
  explicit Stream(std::unique_ptr<detail::StreamState> state);
  std::unique_ptr<detail::StreamState> state_;
};

// Runs requests over one shared model: a thread of its own steps every request in flight
// together (continuous batching), with its own KV cache and compute threads. Every method is
// thread-safe: any number of threads may generate at once. Destroying the engine cancels
// what is still running.
class TANDEM_API Engine {
 public:
  // Throws Error for unusable options (e.g. a KV pool too small for one full context).
  explicit Engine(std::shared_ptr<const Model> model, const EngineOptions& options = {});
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // Blocking: generates a continuation of the prompt (text, or ids as Model::tokenize gives
  // them). on_text, if given, receives the text as it is generated, on this thread, never
  // half a UTF-8 character. Throws Error for an unusable request (empty or too long prompt,
  // bad sampling options).
  using TextCallback = std::function<void(std::string_view text)>;
  Result generate(std::string_view prompt, const GenerateOptions& options = {}, const TextCallback& on_text = {});
  Result generate(std::vector<int32_t> prompt_ids, const GenerateOptions& options = {},
                  const TextCallback& on_text = {});
  // Blocking: the assistant's reply to a conversation (Model::tokenize_chat, then generate).
  Result chat(const std::vector<ChatMessage>& messages, const GenerateOptions& options = {},
              const TextCallback& on_text = {});

  // Streaming: queues the request and returns at once; pull its events with Stream::next.
  Stream stream(std::string_view prompt, const GenerateOptions& options = {});
  Stream stream(std::vector<int32_t> prompt_ids, const GenerateOptions& options = {});

  // Callback style, for event loops: on_event runs on the engine's thread for every event of
  // the request and must return quickly (it delays every request in flight); an exception
  // from it cancels the request. Returns the request id, for cancel(). (A request for
  // max_tokens 0 never reaches the engine: its one, final event comes at once, on this thread.)
  using EventCallback = std::function<void(const Event& event)>;
  uint64_t submit(std::vector<int32_t> prompt_ids, const GenerateOptions& options, EventCallback on_event);
  // Cancels a request at the engine's next step; unknown or finished ids are ignored.
  void cancel(uint64_t request_id);

  const Model& model() const;
  const std::shared_ptr<const Model>& shared_model() const;
  int64_t context_length() const;  // per request (EngineOptions::context_length, resolved)

  // With EngineOptions::profile: the per-op summary of every step so far (prefill and decode
  // apart; roofline columns when `tandem bench --machine` has cached this machine's
  // ceilings), as `tandem run --profile` prints it; empty without. Waits for a step in
  // progress to end.
  std::string profile_summary() const;
  // With EngineOptions::trace: writes every step so far as Chrome trace-event JSON (Perfetto,
  // chrome://tracing), a track per compute thread. Call with no request in flight. Throws
  // Error when tracing is off or the file cannot be written.
  void write_trace(const std::string& path) const;

 private:
  friend struct detail::EngineAccess;  // the CLI's engines on a device (src/api/engine_state.h)
  explicit Engine(std::shared_ptr<detail::EngineState> state);
  std::shared_ptr<detail::EngineState> state_;  // shared with the streams, which may outlive the engine
};

}  // namespace tandem::api
