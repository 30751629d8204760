"""Tandem from Python: a ctypes binding of libtandem's C API (include/tandem/tandem_c.h).

    import tandem
    model = tandem.Model("model.gguf", threads=4)
    print(model.generate("The dream", max_tokens=64, temperature=0).text)
    for piece in model.generate("The dream", max_tokens=64, stream=True):
        print(piece, end="", flush=True)
    reply = model.chat([{"role": "user", "content": "Hello"}], max_tokens=64)

A Model is the loaded model plus an engine running on its own thread: any number of Python
threads may generate on one Model at once (the calls release the GIL). Bad input raises
TandemError with the library's message. No build step: it loads libtandem.so (see _native).
"""

import ctypes
import json
import math
import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Union

from . import _native
from ._native import lib

__all__ = ["Model", "Stream", "Result", "Usage", "Timings", "TandemError", "ArgumentError", "__version__"]

__version__ = lib.tandem_version().decode()


class TandemError(Exception):
    """Bad input (a missing file, an over-long prompt, a bad option); the message says which."""


class ArgumentError(TandemError, ValueError):
    """An argument out of its range (temperature=-1, top_p=5): a ValueError naming it, raised
    before the library is called (and a TandemError, as the library's own refusal was)."""


def _check(status: int) -> None:
    if status != _native.OK:
        raise TandemError(lib.tandem_last_error().decode("utf-8", "replace"))


def _check_number(name: str, value, low: float, high: float, *, integer: bool = False,
                  low_open: bool = False) -> None:
    """ValueError naming the argument when `value` is not a number in [low, high] ((low, high]
    with low_open), or not an integer where one is needed: caught here, before the library."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ArgumentError(f"{name} must be {'an integer' if integer else 'a number'}, not {value!r}")
    if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
        bounds = f"{'above' if low_open else 'at least'} {low}" + ("" if math.isinf(high) else f" and at most {high}")
        raise ArgumentError(f"{name} must be {bounds}, not {value!r}")


def _check_generate_options(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n,
                            presence_penalty, frequency_penalty, seed, draft_max) -> None:
    """The sampling arguments' ranges, as the server's request fields have them (OpenAI's)."""
    _check_number("max_tokens", max_tokens, 0, math.inf, integer=True)
    _check_number("temperature", temperature, 0.0, math.inf)
    _check_number("top_k", top_k, 0, math.inf, integer=True)
    _check_number("top_p", top_p, 0.0, 1.0)
    _check_number("min_p", min_p, 0.0, 1.0)
    _check_number("repetition_penalty", repetition_penalty, 0.0, math.inf, low_open=True)
    _check_number("repeat_last_n", repeat_last_n, -1, math.inf, integer=True)
    _check_number("presence_penalty", presence_penalty, -2.0, 2.0)
    _check_number("frequency_penalty", frequency_penalty, -2.0, 2.0)
    if seed is not None:
        _check_number("seed", seed, 0, 2**64 - 1, integer=True)
    _check_number("draft_max", draft_max, 0, math.inf, integer=True)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache
    completion_tokens: int = 0
    kv_bytes: int = 0  # KV cache memory the request held at its end
    drafted_tokens: int = 0  # speculative decoding: tokens proposed and checked
    accepted_tokens: int = 0  # of those, kept

    @staticmethod
    def _from(c: _native.Usage, speculation: _native.SpeculationUsage) -> "Usage":
        return Usage(c.prompt_tokens, c.cached_tokens, c.completion_tokens, c.kv_bytes, speculation.drafted_tokens,
                     speculation.accepted_tokens)


@dataclass(frozen=True)
class Timings:
    """Milliseconds, measured by the engine; TPOT from the gaps between tokens."""
    queue_ms: float = 0.0
    ttft_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    e2e_ms: float = 0.0
    tpot_mean_ms: float = 0.0
    tpot_p50_ms: float = 0.0
    tpot_p99_ms: float = 0.0

    @staticmethod
    def _from(c: _native.Timings) -> "Timings":
        return Timings(*(getattr(c, name) for name, _ in _native.Timings._fields_))


@dataclass
class Result:
    text: str  # the generated text (the prompt not included)
    tokens: List[int]  # the generated ids (EOS included when it ended the text)
    finish_reason: str  # "end of sequence", "stop string", "token limit", "context limit", "cancelled", "error"
    seed: int  # the sampling seed used
    usage: Usage = field(default_factory=Usage)
    timings: Timings = field(default_factory=Timings)
    error: str = ""  # finish_reason "error": why (a grammar past its matching limit, ...)

    def __str__(self) -> str:
        return self.text


Messages = Iterable[Union[dict, Sequence[str]]]


def _chat_messages(messages: Messages):
    """(ctypes array, the bytes it points into) for dicts {"role", "content"} or pairs."""
    pairs = [(m["role"], m["content"]) if isinstance(m, dict) else (m[0], m[1]) for m in messages]
    encoded = [(role.encode(), content.encode()) for role, content in pairs]
    array = (_native.ChatMessage * max(1, len(encoded)))(*(_native.ChatMessage(r, c) for r, c in encoded))
    return array, len(encoded), encoded


def _ids_array(ids: Sequence[int]):
    return (ctypes.c_int32 * max(1, len(ids)))(*ids), len(ids)


class Stream:
    """A request in flight: iterate it for text pieces as they are generated. `result` is set
    once the last piece has been read; cancel() (any thread) ends the request early. Closing
    (or dropping) an unfinished stream cancels it."""

    def __init__(self, model: "Model", handle: ctypes.c_void_p):
        self._model = model  # keeps the library objects alive while the stream is read
        self._handle = handle
        self._lock = threading.Lock()
        self._text: List[str] = []
        self._tokens: List[int] = []
        self.seed: int = lib.tandem_stream_seed(handle)
        self.result: Optional[Result] = None

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while self.result is None:
            if self._handle is None:
                raise StopIteration
            event = _native.Event()
            _check(lib.tandem_stream_next(self._handle, ctypes.byref(event)))  # blocks, GIL released
            piece = ctypes.string_at(event.text, event.text_len).decode("utf-8", "replace")
            self._text.append(piece)
            self._tokens.extend(event.tokens[i] for i in range(event.n_tokens))
            if event.finished:
                self.result = Result("".join(self._text), self._tokens,
                                     lib.tandem_finish_reason_name(event.finish_reason).decode(), self.seed,
                                     Usage._from(event.usage, event.speculation), Timings._from(event.timings),
                                     ctypes.string_at(event.error, event.error_len).decode("utf-8", "replace"))
                self.close()
            if piece:
                return piece
        raise StopIteration

    def read(self) -> Result:
        """Reads the stream to its end and returns the result."""
        for _ in self:
            pass
        if self.result is None:
            raise TandemError("the stream was closed before its end")
        return self.result

    def cancel(self) -> None:
        with self._lock:
            if self._handle is not None:
                lib.tandem_stream_cancel(self._handle)

    def close(self) -> None:
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            lib.tandem_stream_free(handle)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit the module's globals may already be gone
            pass


class Model:
    """A model and an engine over it. Options: tokenizer_path (llama2.c checkpoints),
    chat_template (a built-in format name: chatml, llama2, llama3, zephyr), threads (<= 0:
    every core), max_sequences (requests decoded together), max_batch_tokens,
    context_length (0: the model's), kv_memory_bytes (0: max_sequences full contexts),
    kv_block_size, kv_type_k / kv_type_v (KV cache storage: "f32", "f16" (default), "bf16",
    "q8_0", "q4_0"; the last two need a head size that is a multiple of 32), draft_model (path of
    a smaller model with the same vocabulary, for generate(speculative="draft"))."""

    def __init__(self, path: str, *, tokenizer_path: Optional[str] = None, chat_template: Optional[str] = None,
                 threads: int = 0, max_sequences: int = 4, max_batch_tokens: int = 512, context_length: int = 0,
                 kv_memory_bytes: int = 0, kv_block_size: int = 16, kv_type_k: str = "f16",
                 kv_type_v: str = "f16", draft_model: Optional[str] = None):
        for kv_type in (kv_type_k, kv_type_v):
            if kv_type not in _native.KV_TYPES:
                raise ValueError(f"unknown KV cache type {kv_type!r} (one of {', '.join(_native.KV_TYPES)})")
        self._model = self._engine = None
        model_options = _native.ModelOptions(tokenizer_path.encode() if tokenizer_path else None,
                                             chat_template.encode() if chat_template else None)
        handle = ctypes.c_void_p()
        _check(lib.tandem_model_load(str(path).encode(), ctypes.byref(model_options), ctypes.byref(handle)))
        self._model = handle
        engine_options = lib.tandem_engine_options_default()
        engine_options.threads = threads
        engine_options.max_sequences = max_sequences
        engine_options.max_batch_tokens = max_batch_tokens
        engine_options.context_length = context_length
        engine_options.kv_memory_bytes = kv_memory_bytes
        engine_options.kv_block_size = kv_block_size
        engine_options.kv_type_k = _native.KV_TYPES[kv_type_k]
        engine_options.kv_type_v = _native.KV_TYPES[kv_type_v]
        draft = ctypes.c_void_p()
        try:
            if draft_model is not None:
                _check(lib.tandem_model_load(str(draft_model).encode(), None, ctypes.byref(draft)))
                engine_options.draft_model = draft
            engine = ctypes.c_void_p()
            _check(lib.tandem_engine_create(self._model, ctypes.byref(engine_options), ctypes.byref(engine)))
            self._engine = engine
        finally:
            lib.tandem_model_free(draft)  # the engine holds its own reference to the draft

    # ---- the model ------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return lib.tandem_model_vocab_size(self._model)

    @property
    def context_length(self) -> int:
        return lib.tandem_model_context_length(self._model)

    @property
    def bos_token(self) -> int:
        return lib.tandem_model_bos_token(self._model)

    @property
    def eos_token(self) -> int:
        return lib.tandem_model_eos_token(self._model)

    @property
    def kv_bytes_per_token(self) -> int:
        return lib.tandem_model_kv_bytes_per_token(self._model)

    def tokenize(self, text: str, add_bos: bool = True) -> List[int]:
        data = text.encode()
        return self._read_ids(lambda out, capacity, n: lib.tandem_tokenize(
            self._model, data, len(data), int(add_bos), out, capacity, n))

    def detokenize(self, ids: Sequence[int]) -> str:
        array, n_ids = _ids_array(ids)
        return self._read_text(lambda out, capacity, length: lib.tandem_detokenize(
            self._model, array, n_ids, out, capacity, length))

    def render_chat(self, messages: Messages) -> str:
        """The conversation in the model's chat template, up to the assistant's turn."""
        array, n, _keep = _chat_messages(messages)
        return self._read_text(lambda out, capacity, length: lib.tandem_render_chat(
            self._model, array, n, out, capacity, length))

    def tokenize_chat(self, messages: Messages) -> List[int]:
        array, n, _keep = _chat_messages(messages)
        return self._read_ids(lambda out, capacity, n_ids: lib.tandem_tokenize_chat(
            self._model, array, n, out, capacity, n_ids))

    # ---- generation -----------------------------------------------------------------------

    def generate(self, prompt: Union[str, Sequence[int]], *, max_tokens: int = 256, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 repeat_last_n: int = 64, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 seed: Optional[int] = None, stop: Optional[Sequence[str]] = None,
                 stream: bool = False, speculative: str = "none", draft_max: int = 4,
                 grammar: Optional[str] = None,
                 json_schema: Union[None, str, dict] = None) -> Union[Result, Stream]:
        """Continues the prompt (text, or token ids). Returns a Result; with stream=True a
        Stream yielding the text as it is generated. speculative="ngram": prompt-lookup
        speculative decoding (same output, fewer forward passes when the text repeats);
        speculative="draft": the engine's draft_model proposes (same output distribution).
        grammar (llama.cpp GBNF) or json_schema (a dict or JSON text; {} for any JSON)
        constrain the output: only tokens they allow are sampled. An argument out of its
        range (temperature below 0, top_p or min_p outside 0..1, ...) raises ValueError naming it."""
        kinds = {"none": _native.SPECULATION_NONE, "ngram": _native.SPECULATION_NGRAM,
                 "draft": _native.SPECULATION_DRAFT}
        if speculative not in kinds:
            raise ValueError(f"speculative must be one of {sorted(kinds)}, not {speculative!r}")
        _check_generate_options(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n,
                                presence_penalty, frequency_penalty, seed, draft_max)
        ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        stop_strings = [s.encode() for s in (stop or [])]
        stop_array = (ctypes.c_char_p * max(1, len(stop_strings)))(*stop_strings)
        options = lib.tandem_generate_options_default()
        options.max_tokens = max_tokens
        options.temperature = temperature
        options.top_k = top_k
        options.top_p = top_p
        options.min_p = min_p
        options.repetition_penalty = repetition_penalty
        options.repeat_last_n = repeat_last_n
        options.presence_penalty = presence_penalty
        options.frequency_penalty = frequency_penalty
        options.seed = _native.SEED_RANDOM if seed is None else seed
        options.stop = stop_array
        options.n_stop = len(stop_strings)
        options.speculation = kinds[speculative]
        options.draft_max = draft_max
        if isinstance(json_schema, dict):
            json_schema = json.dumps(json_schema)
        grammar_text = grammar.encode() if grammar is not None else None
        schema_text = json_schema.encode() if json_schema is not None else None
        options.grammar = grammar_text  # the bytes objects outlive the call below
        options.json_schema = schema_text
        array, n_ids = _ids_array(ids)
        if stream:
            handle = ctypes.c_void_p()
            _check(lib.tandem_stream_open_tokens(self._engine, array, n_ids, ctypes.byref(options),
                                                 ctypes.byref(handle)))
            return Stream(self, handle)
        result = _native.Result()
        no_callback = _native.EventCallback()  # NULL: the text comes back whole, in the result
        _check(lib.tandem_generate_tokens(self._engine, array, n_ids, ctypes.byref(options), no_callback, None,
                                          ctypes.byref(result)))
        try:
            return Result(ctypes.string_at(result.text, result.text_len).decode("utf-8", "replace"),
                          [result.tokens[i] for i in range(result.n_tokens)],
                          lib.tandem_finish_reason_name(result.finish_reason).decode(), result.seed,
                          Usage._from(result.usage, result.speculation), Timings._from(result.timings),
                          ctypes.string_at(result.error, result.error_len).decode("utf-8", "replace"))
        finally:
            lib.tandem_result_free(ctypes.byref(result))

    def chat(self, messages: Messages, **options) -> Union[Result, Stream]:
        """The assistant's reply to a conversation; options as for generate()."""
        return self.generate(self.tokenize_chat(messages), **options)

    # ---- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the engine (cancelling what is in flight) and releases the model."""
        engine, self._engine = getattr(self, "_engine", None), None
        model, self._model = getattr(self, "_model", None), None
        if engine:
            lib.tandem_engine_free(engine)
        if model:
            lib.tandem_model_free(model)

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit the module's globals may already be gone
            pass

    # ---- the C API's two-call buffers -----------------------------------------------------

    @staticmethod
    def _read_ids(call) -> List[int]:
        needed = ctypes.c_size_t()
        status = call(None, 0, ctypes.byref(needed))
        if status == _native.OK:
            return []
        if status != _native.ERROR_BUFFER_TOO_SMALL:
            _check(status)
        out = (ctypes.c_int32 * needed.value)()
        _check(call(out, needed.value, ctypes.byref(needed)))
        return list(out)

    @staticmethod
    def _read_text(call) -> str:
        needed = ctypes.c_size_t()
        status = call(None, 0, ctypes.byref(needed))
        if status != _native.ERROR_BUFFER_TOO_SMALL:
            _check(status)
        out = ctypes.create_string_buffer(needed.value + 1)
        _check(call(out, needed.value + 1, ctypes.byref(needed)))
        return out.raw[:needed.value].decode("utf-8", "replace")
