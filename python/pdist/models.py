"""Built-in models' forward programs: pdist.models.gpt(layers=4, hidden=128, ...), .llama(...),
.mlp(...). Keyword arguments are pdist-export's flags (docs/models.md); dtype "bf16" gives the
mixed-precision (amp o2) program."""
import ctypes

from . import _native
from .program import Program


def _build(model, options):
    pairs = ",".join(f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in options.items())
    handle = ctypes.c_void_p()
    _native.check(_native.lib.pdist_program_build(_native.encode(model), _native.encode(pairs), ctypes.byref(handle)),
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
