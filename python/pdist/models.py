"""Built-in models' forward programs: pdist.models.gpt(layers=4, hidden=128, ...), .llama(...),
.mlp(...). Keyword arguments are pdist-export's flags (docs/models.md); dtype "bf16" gives the
mixed-precision (amp o2) program."""
import ctypes
import numbers

from . import _native
from .program import Program

# The options each kind reads (ir/models/model_options.cc: BuildModel). The library parses every
# option of every kind and ignores the ones a kind does not read (mlp(heads=3) built an MLP, no
# word said): those are refused here, naming the kind's options.
_DECODER = ("layers", "hidden", "heads", "vocab", "seq", "batch", "ffn", "tied", "dropout", "dtype")
_OPTIONS = {"gpt": _DECODER, "llama": _DECODER, "mlp": ("input", "layers", "hidden", "classes", "batch", "dtype")}
_INTS = {"layers", "hidden", "heads", "vocab", "seq", "batch", "ffn", "input", "classes"}


def _option_text(model, key, value):
    """One option's value as the library's "key=value" text wants it, checked: the pairs are
    joined with ',' and split at '=', so a value holding either would set other options
    (gpt(layers="1,layers=3") built 3 layers)."""
    where = f"pdist.models.{model}: option '{key}'"
    if key in _INTS:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"{where} must be int, got {value!r}")
        return str(int(value))
    if key == "tied":
        if not isinstance(value, bool):
            raise TypeError(f"{where} must be bool, got {value!r}")
        return "true" if value else "false"
    if key == "dropout":
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{where} must be a number, got {value!r}")
        return repr(float(value))
    # dtype
    if not isinstance(value, str):
        raise TypeError(f"{where} must be str, got {value!r}")
    if "," in value or "=" in value:
        raise ValueError(f"{where}: {value!r} holds ',' or '=', which no value has")
    return value


def _build(model, options):
    for key in options:
        if key not in _OPTIONS[model]:
            raise ValueError(f"unknown model option '{key}' for {model} (options: {', '.join(_OPTIONS[model])})")
    pairs = ",".join(f"{key}={_option_text(model, key, value)}" for key, value in options.items())
    handle = ctypes.c_void_p()
    _native.check(_native.lib.pdist_program_build(_native.encode(model, "model"), _native.encode(pairs, "model options"),
                                                  ctypes.byref(handle)),
                  f"pdist.models.{model}")
    return Program(handle.value)


def gpt(**options):
    """GPT-2-style decoder: layers, hidden, heads, vocab, seq, batch, ffn, tied, dropout, dtype."""
    return _build("gpt", options)


def llama(**options):
    """LLaMA-style decoder (RMSNorm, rotary, SwiGLU): the same options as gpt."""
    return _build("llama", options)


def mlp(**options):
    """An MLP classifier: input, layers (relu layers of width hidden), hidden, classes, batch, dtype."""
    return _build("mlp", options)
