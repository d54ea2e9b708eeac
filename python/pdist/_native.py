"""libpdist.so through ctypes: the C API's prototypes, and its status codes as exceptions.

ctypes rather than a compiled extension: the C API (engine/c_api.h) is the library's stable,
exported surface, so the package needs no compiler, no Python headers and no rebuild per Python
version; it loads whatever libpdist.so.0 the environment names.

The library is found at $PDIST_LIBRARY, else next to this package in an installed prefix
(<prefix>/lib/libpdist.so.0), else by the dynamic loader's search path.
"""
import ctypes
import json
import os

_STATUS_NAMES = {1: "INVALID_ARGUMENT", 2: "NOT_FOUND", 3: "FAILED_PRECONDITION", 4: "UNIMPLEMENTED", 5: "INTERNAL"}


class PdistError(RuntimeError):
    """A call into libpdist failed; the message is the library's (pdist_last_error)."""


class InvalidArgumentError(PdistError, ValueError):
    """A bad model, configuration, strategy or dataset: the message names the value."""


class NotFoundError(PdistError, FileNotFoundError):
    """A file that does not exist."""


class FailedPreconditionError(PdistError):
    pass


class UnimplementedError(PdistError, NotImplementedError):
    pass


_ERRORS = {1: InvalidArgumentError, 2: NotFoundError, 3: FailedPreconditionError, 4: UnimplementedError}


def _candidates():
    explicit = os.environ.get("PDIST_LIBRARY")
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for up in ("..", "../..", "../../.."):  # <prefix>/lib/pythonX/site-packages/pdist → <prefix>/lib
        yield os.path.normpath(os.path.join(here, up, "libpdist.so.0"))
    yield "libpdist.so.0"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("pdist: cannot load libpdist.so.0 (set PDIST_LIBRARY to its path): " + "; ".join(errors))


lib = _load()


class EngineConfig(ctypes.Structure):
    _fields_ = [
        ("optimizer", ctypes.c_char_p),
        ("learning_rate", ctypes.c_double),
        ("warmup_steps", ctypes.c_int64),
        ("decay_steps", ctypes.c_int64),
        ("weight_decay", ctypes.c_double),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("epsilon", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("strategy_json", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("fusions", ctypes.c_char_p),
        ("timeline_dir", ctypes.c_char_p),
        ("collective_timeout_s", ctypes.c_double),
        ("checkpoint_timeout_s", ctypes.c_double),
    ]


class Dataset(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("format", ctypes.c_int), ("seed", ctypes.c_uint64)]


class Feed(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class Output(ctypes.Structure):
    """pdist_output: laid out as pdist_feed, pointing into the engine's memory."""
    _fields_ = Feed._fields_


STEP_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_double, ctypes.c_void_p)

_P = ctypes.c_void_p
_PROTOTYPES = {
    "pdist_engine_config_init": (None, [ctypes.POINTER(EngineConfig)]),
    "pdist_engine_create_from_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(EngineConfig), ctypes.POINTER(_P)]),
    "pdist_engine_create_from_bytes": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(EngineConfig),
                                                      ctypes.POINTER(_P)]),
    "pdist_engine_destroy": (None, [_P]),
    "pdist_engine_fit": (ctypes.c_int, [_P, ctypes.POINTER(Dataset), ctypes.c_int64, STEP_CALLBACK, ctypes.c_void_p]),
    "pdist_engine_evaluate": (ctypes.c_int, [_P, ctypes.POINTER(Dataset), ctypes.c_int64, ctypes.POINTER(ctypes.c_double)]),
    "pdist_engine_evaluate_with_callback": (ctypes.c_int, [_P, ctypes.POINTER(Dataset), ctypes.c_int64, STEP_CALLBACK,
                                                           ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]),
    "pdist_engine_any_rank": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
    "pdist_engine_save": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "pdist_engine_load": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "pdist_engine_step": (ctypes.c_int64, [_P]),
    "pdist_engine_local_rank_count": (ctypes.c_int64, [_P]),
    "pdist_engine_train_step": (ctypes.c_int, [_P, ctypes.POINTER(Feed), ctypes.c_int, ctypes.POINTER(ctypes.c_double)]),
    "pdist_engine_eval_step": (ctypes.c_int, [_P, ctypes.POINTER(Feed), ctypes.c_int, ctypes.POINTER(ctypes.c_double)]),
    "pdist_engine_predict": (ctypes.c_int, [_P, ctypes.POINTER(Feed), ctypes.c_int, ctypes.POINTER(ctypes.POINTER(Output)),
                                            ctypes.POINTER(ctypes.c_int)]),
    "pdist_program_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "pdist_program_build": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "pdist_program_import_onnx": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "pdist_program_shard_tensor": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                                  ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p]),
    "pdist_program_save": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "pdist_program_print": (ctypes.c_char_p, [_P]),
    "pdist_program_destroy": (None, [_P]),
    "pdist_program_plan": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]),
    "pdist_last_error": (ctypes.c_char_p, []),
    "pdist_version": (ctypes.c_char_p, []),
}
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def check(status, what):
    """Raises the exception of a non-OK status, with the library's message."""
    if status == 0:
        return
    message = (lib.pdist_last_error() or b"").decode("utf-8", "replace")
    kind = _ERRORS.get(status, PdistError)
    raise kind(f"{what}: {message}" if message else f"{what}: {_STATUS_NAMES.get(status, status)}")


def encode(text, what):
    """`text` (a str) as UTF-8 for a const char*. Anything else is a TypeError naming `what`:
    ctypes would take an int as a char* address (a crash in the library) and pass other
    objects' bytes unchecked."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, got {type(text).__name__} {text!r}")
    return _without_nul(text.encode("utf-8"), what)


def _without_nul(data, what):
    """A C string ends at its first NUL: "a\0b" would reach the library as "a" (a save into the
    wrong directory). A ValueError, as open() raises."""
    if b"\0" in data:
        raise ValueError(f"{what}: embedded null byte in {data!r}")
    return data


def encode_path(path, what):
    """A file system path (str, bytes or os.PathLike) as bytes for a const char*, as the OS
    spells it (os.fsencode); anything else is a TypeError naming `what`."""
    try:
        return _without_nul(os.fsencode(path), what)
    except TypeError:
        raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), got {type(path).__name__} {path!r}") \
            from None


def to_json(value, what):
    """json.dumps that takes numpy's scalars (np.int64(2), np.float32(0.5), np.bool_) as the numbers
    they are, and names `what` when a value is not JSON at all."""
    def plain(v):
        if hasattr(v, "item") and hasattr(v, "dtype") and getattr(v, "ndim", None) == 0:
            return v.item()
        raise TypeError(f"{what}: {v!r} ({type(v).__name__}) is not a JSON value")
    return json.dumps(value, default=plain)
