"""Programs: pdist.load(path), pdist.import_onnx(path, ...), program.save(path), str(program),
and Paddle's pdist.shard_tensor(program, name, mesh, placements)."""
import ctypes
import numbers
from collections.abc import Mapping

from . import _native
from .placements import Placement, ProcessMesh


class Program:
    """A pdist program (model.pb or textual IR), owned by the library."""

    def __init__(self, handle):
        self._handle = ctypes.c_void_p(handle)

    @classmethod
    def load(cls, path):
        handle = ctypes.c_void_p()
        _native.check(_native.lib.pdist_program_load(_native.encode_path(path, "load: path"), ctypes.byref(handle)),
                      f"load {path}")
        return cls(handle.value)

    def save(self, path):
        """Writes model.pb, placements and annotation marks included."""
        _native.check(_native.lib.pdist_program_save(self._handle, _native.encode_path(path, "save: path")), f"save {path}")

    def __str__(self):
        text = _native.lib.pdist_program_print(self._handle)
        if text is None:
            _native.check(1, "print")
        return text.decode("utf-8")

    def __del__(self):
        if getattr(self, "_handle", None) is not None and self._handle.value:
            _native.lib.pdist_program_destroy(self._handle)
            self._handle = None


def load(path):
    return Program.load(path)


def _input_shapes(given):
    """import_onnx's input_shapes as {name: [dims]}, each dim an int in [0, 2^62]: int() cut 8.5
    to 8, and a str failed with an AttributeError."""
    if not isinstance(given, Mapping):
        raise TypeError(f"import_onnx: input_shapes must be a dict of input name -> shape, got {given!r}")
    shapes = {}
    for name, shape in given.items():
        if not isinstance(name, str):
            raise TypeError(f"import_onnx: input_shapes: an input name must be str, got {name!r}")
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise TypeError(f"import_onnx: input_shapes[{name!r}] must be a sequence of dims, got {shape!r}")
        dims = list(shape)
        for d in dims:
            if not isinstance(d, numbers.Integral) or isinstance(d, bool) or not 0 <= int(d) <= 2**62:
                raise ValueError(f"import_onnx: input_shapes[{name!r}] = {shape!r}: each dim must be an int in "
                                 f"[0, 2**62], got {d!r}")
        shapes[name] = [int(d) for d in dims]
    return shapes


def import_onnx(path, loss=None, logits=None, labels="labels", frozen=(), input_shapes=None):
    """An ONNX model (opset >= 13) as a program, as pdist-import makes it (docs/onnx.md).

    loss: None (the forward program), "cross_entropy" or "mse", read from graph output `logits`
    (default: the only output) against a new data input `labels`; frozen: initializer names or
    globs kept fixed ("blocks.*.mask"); input_shapes: {"tokens": (8, 128)} for inputs whose ONNX
    shape is symbolic."""
    if isinstance(frozen, (str, bytes)):  # one pattern, not its characters
        frozen = [frozen]
    if loss == "":  # the library reads "" as no loss: a quiet no, where one was meant
        raise ValueError('import_onnx: loss is ""; give None for the forward program, or "cross_entropy" or "mse"')
    # labels or logits without a loss: the library names them.
    options = {"labels": labels, "frozen": list(frozen)}
    if loss is not None:
        options["loss"] = loss
    if logits is not None:
        options["logits"] = logits
    if input_shapes is not None:  # [] or "" were skipped unchecked
        options["input_shapes"] = _input_shapes(input_shapes)
    handle = ctypes.c_void_p()
    _native.check(_native.lib.pdist_program_import_onnx(_native.encode_path(path, "import_onnx: path"),
                                                        _native.encode(_native.to_json(options, "import_onnx"),
                                                                       "import_onnx options"),
                                                        ctypes.byref(handle)),
                  f"import_onnx {path}")
    return Program(handle.value)


def shard_tensor(program, name, mesh, placements):
    """Places tensor `name` (a parameter or data input's name, or "%12") on `mesh` with one
    placement per mesh dim, as Paddle's shard_tensor; completion derives every other tensor's."""
    if not isinstance(program, Program):
        raise TypeError(f"shard_tensor: program must be a pdist.Program, got {type(program).__name__}")
    if not isinstance(mesh, ProcessMesh):
        raise TypeError(f"shard_tensor: mesh must be a pdist.ProcessMesh, got {type(mesh).__name__}")
    placements = list(placements)
    if len(placements) != mesh.ndim or not all(isinstance(p, Placement) for p in placements):
        raise ValueError(f"shard_tensor: one pdist.Shard/Replicate/Partial per mesh dim ({mesh.ndim}), got {placements}")
    shape = (ctypes.c_int64 * mesh.ndim)(*mesh.shape)
    names = (ctypes.c_char_p * mesh.ndim)(*[_native.encode(n, "shard_tensor: mesh dim name") for n in mesh.dim_names])
    text = ",".join(str(p) for p in placements)
    _native.check(_native.lib.pdist_program_shard_tensor(program._handle, _native.encode(name, "shard_tensor: name"), shape,
                                                         mesh.ndim, names, _native.encode(text, "placements")),
                  f"shard_tensor {name}")
    return program
