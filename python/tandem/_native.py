"""The C API of libtandem (include/tandem/tandem_c.h) declared for ctypes, and where the
library is found. Only declarations and loading: the Pythonic classes are in __init__.py.

The library is, in order: $TANDEM_LIBRARY (a path); libtandem.so.0 in an installed tree
this package sits in (PREFIX/lib/python3/dist-packages/tandem -> PREFIX/lib*); a build
folder beside this source tree (build/); or whatever the dynamic loader finds.
"""

import ctypes
import os
from pathlib import Path

SONAME = "libtandem.so.0"

# tandem_status
OK = 0
ERROR_BUFFER_TOO_SMALL = 2


class ModelOptions(ctypes.Structure):
    _fields_ = [("tokenizer_path", ctypes.c_char_p), ("chat_template", ctypes.c_char_p)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("threads", ctypes.c_int32),
        ("max_sequences", ctypes.c_int32),
        ("max_batch_tokens", ctypes.c_int64),
        ("context_length", ctypes.c_int64),
        ("kv_memory_bytes", ctypes.c_int64),
        ("kv_block_size", ctypes.c_int32),
        ("kv_type_k", ctypes.c_int32),
        ("kv_type_v", ctypes.c_int32),
        ("draft_model", ctypes.c_void_p),  # a tandem_model handle, borrowed during engine creation
    ]


# tandem_kv_type: what the KV cache stores K and V in.
KV_TYPES = {"f32": 0, "f16": 1, "bf16": 2, "q8_0": 3, "q4_0": 4}


class GenerateOptions(ctypes.Structure):
    _fields_ = [
        ("max_tokens", ctypes.c_int64),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repetition_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop", ctypes.c_size_t),
        ("speculation", ctypes.c_int32),  # SPECULATION_NONE / _NGRAM / _DRAFT
        ("draft_max", ctypes.c_int32),
        ("draft_min", ctypes.c_int32),
        ("ngram_min", ctypes.c_int32),
        ("ngram_max", ctypes.c_int32),
        ("grammar", ctypes.c_char_p),  # llama.cpp GBNF, or None
        ("json_schema", ctypes.c_char_p),  # JSON Schema text ("{}": any JSON), or None
    ]


SPECULATION_NONE = 0
SPECULATION_NGRAM = 1
SPECULATION_DRAFT = 2


SEED_RANDOM = 2**64 - 1


class Usage(ctypes.Structure):
    _fields_ = [
        ("prompt_tokens", ctypes.c_int64),
        ("cached_tokens", ctypes.c_int64),
        ("completion_tokens", ctypes.c_int64),
        ("kv_bytes", ctypes.c_int64),
    ]


class SpeculationUsage(ctypes.Structure):
    _fields_ = [("drafted_tokens", ctypes.c_int64), ("accepted_tokens", ctypes.c_int64)]


class Timings(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_double)
        for name in ("queue_ms", "ttft_ms", "prefill_ms", "decode_ms", "e2e_ms",
                     "tpot_mean_ms", "tpot_p50_ms", "tpot_p99_ms")
    ]


class Event(ctypes.Structure):
    _fields_ = [
        ("request_id", ctypes.c_uint64),
        ("text", ctypes.POINTER(ctypes.c_char)),
        ("text_len", ctypes.c_size_t),
        ("tokens", ctypes.POINTER(ctypes.c_int32)),
        ("n_tokens", ctypes.c_size_t),
        ("finished", ctypes.c_int32),
        ("finish_reason", ctypes.c_int32),
        ("usage", Usage),
        ("timings", Timings),
        ("speculation", SpeculationUsage),
        ("error", ctypes.POINTER(ctypes.c_char)),  # finish_reason ERROR: why
        ("error_len", ctypes.c_size_t),
    ]


class Result(ctypes.Structure):
    _fields_ = [
        ("text", ctypes.POINTER(ctypes.c_char)),
        ("text_len", ctypes.c_size_t),
        ("tokens", ctypes.POINTER(ctypes.c_int32)),
        ("n_tokens", ctypes.c_size_t),
        ("finish_reason", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("usage", Usage),
        ("timings", Timings),
        ("speculation", SpeculationUsage),
        ("error", ctypes.POINTER(ctypes.c_char)),  # finish_reason ERROR: why
        ("error_len", ctypes.c_size_t),
    ]


def _candidates():
    if os.environ.get("TANDEM_LIBRARY"):
        yield Path(os.environ["TANDEM_LIBRARY"])
        return
    here = Path(__file__).resolve().parent
    for prefix in list(here.parents)[:5]:
        for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "build"):
            yield prefix / libdir / SONAME


def _load():
    tried = []
    for path in _candidates():
        if path.is_file():
            return ctypes.CDLL(str(path))
        tried.append(str(path))
    if os.environ.get("TANDEM_LIBRARY"):
        raise OSError(f"TANDEM_LIBRARY={os.environ['TANDEM_LIBRARY']} does not exist")
    try:
        return ctypes.CDLL(SONAME)
    except OSError as error:
        raise OSError(f"cannot find {SONAME}: set TANDEM_LIBRARY to its path "
                      f"(looked in {', '.join(tried)} and the loader's path: {error})") from None


lib = _load()

_status = ctypes.c_int
_model_p = ctypes.c_void_p
_engine_p = ctypes.c_void_p
_stream_p = ctypes.c_void_p
_size_p = ctypes.POINTER(ctypes.c_size_t)
_ids_p = ctypes.POINTER(ctypes.c_int32)
EventCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Event), ctypes.c_void_p)


def _declare(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


_declare("tandem_last_error", ctypes.c_char_p)
_declare("tandem_status_name", ctypes.c_char_p, _status)
_declare("tandem_version", ctypes.c_char_p)
_declare("tandem_model_load", _status, ctypes.c_char_p, ctypes.POINTER(ModelOptions), ctypes.POINTER(_model_p))
_declare("tandem_model_free", None, _model_p)
_declare("tandem_model_vocab_size", ctypes.c_int32, _model_p)
_declare("tandem_model_context_length", ctypes.c_int64, _model_p)
_declare("tandem_model_bos_token", ctypes.c_int32, _model_p)
_declare("tandem_model_eos_token", ctypes.c_int32, _model_p)
_declare("tandem_model_kv_bytes_per_token", ctypes.c_int64, _model_p)
_declare("tandem_tokenize", _status, _model_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, _ids_p,
         ctypes.c_size_t, _size_p)
_declare("tandem_detokenize", _status, _model_p, _ids_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _size_p)
_declare("tandem_render_chat", _status, _model_p, ctypes.POINTER(ChatMessage), ctypes.c_size_t, ctypes.c_char_p,
         ctypes.c_size_t, _size_p)
_declare("tandem_tokenize_chat", _status, _model_p, ctypes.POINTER(ChatMessage), ctypes.c_size_t, _ids_p,
         ctypes.c_size_t, _size_p)
_declare("tandem_engine_options_default", EngineOptions)
_declare("tandem_engine_create", _status, _model_p, ctypes.POINTER(EngineOptions), ctypes.POINTER(_engine_p))
_declare("tandem_engine_free", None, _engine_p)
_declare("tandem_engine_cancel", None, _engine_p, ctypes.c_uint64)
_declare("tandem_generate_options_default", GenerateOptions)
_declare("tandem_finish_reason_name", ctypes.c_char_p, ctypes.c_int32)
_declare("tandem_generate_tokens", _status, _engine_p, _ids_p, ctypes.c_size_t, ctypes.POINTER(GenerateOptions),
         EventCallback, ctypes.c_void_p, ctypes.POINTER(Result))
_declare("tandem_result_free", None, ctypes.POINTER(Result))
_declare("tandem_stream_open_tokens", _status, _engine_p, _ids_p, ctypes.c_size_t, ctypes.POINTER(GenerateOptions),
         ctypes.POINTER(_stream_p))
_declare("tandem_stream_next", _status, _stream_p, ctypes.POINTER(Event))
_declare("tandem_stream_cancel", None, _stream_p)
_declare("tandem_stream_seed", ctypes.c_uint64, _stream_p)
_declare("tandem_stream_free", None, _stream_p)
