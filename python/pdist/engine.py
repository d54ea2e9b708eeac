"""pdist.Engine: train, evaluate, checkpoint a program under a strategy (Paddle's auto.Engine
shape: Engine(model, strategy=...).fit(train_data, ...))."""
import contextlib
import ctypes
import json
import numbers
import os
import signal
import tempfile
import threading
import time
from collections.abc import Mapping

from . import _native
from .plan import plan
from .program import Program
from .strategy import Strategy

_FORMATS = {"text": 0, "uint16": 1, "uint32": 2}


# numpy dtype names → pdist's (ir/types.h).
_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}
# pdist's output dtypes → numpy's (bf16 and f16 outputs come as f32).
_OUTPUT_DTYPES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool": "bool"}


def _is_file(data):
    # bytes too: a path as the OS spells it (iterated, it would be ints, never batches).
    return isinstance(data, (str, bytes, os.PathLike))


def _feeds(batch):
    """A batch (dict of data input name → numpy array) as pdist_feed structs; returns them with
    the arrays they point into, which must live until the call returns. C-contiguous arrays are
    not copied here (the library copies them once)."""
    import numpy as np
    if not isinstance(batch, Mapping):
        raise TypeError("a batch is a dict of data input name -> numpy array (training data: an iterable of such "
                        f"batches, or a token file path), got {type(batch).__name__}")
    feeds = (_native.Feed * len(batch))()
    keep = []
    for i, (name, value) in enumerate(batch.items()):
        # Checked here: ctypes would take an int key as a char* address and crash the library.
        encoded = _native.encode(name, f"batch key {name!r} (a data input's name)")
        # np.ascontiguousarray makes a 0-d array 1-d: the library then named a scalar f32[1].
        array = np.asarray(value)
        if not array.dtype.isnative:  # big-endian data: the library reads this machine's order
            array = array.astype(array.dtype.newbyteorder("="))
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        dtype = _DTYPES.get(array.dtype.name)
        if dtype is None:
            raise TypeError(f"batch['{name}']: numpy dtype {array.dtype} has no pdist dtype "
                            f"({', '.join(sorted(_DTYPES))})")
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        keep.append((array, shape, encoded))
        feeds[i] = _native.Feed(encoded, dtype.encode(), array.ndim, shape, array.ctypes.data_as(ctypes.c_void_p))
    return feeds, keep


def _c_int(name, value, low, high, where="pdist.Engine"):
    """`value` as an int in [low, high], else ValueError naming it (TypeError for a non-integer):
    ctypes would wrap a larger one silently and truncate a float."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"{where}: {name} {int(value)} must be in [{low}, {high}]")
    return int(value)


def _seconds(name, value, where="pdist.Engine"):
    """`value` as a float, else TypeError naming it (float() would take "300" and True)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be a number of seconds, got {value!r}")
    return float(value)


def _callbacks(callbacks, where):
    """fit's callbacks as a list of callables, checked before any step trains."""
    if callable(callbacks):
        raise TypeError(f"{where}: callbacks is a list of functions: callbacks=[{getattr(callbacks, '__name__', 'f')}]")
    try:
        callbacks = list(callbacks)
    except TypeError:
        raise TypeError(f"{where}: callbacks must be a list of functions, got {callbacks!r}") from None
    for cb in callbacks:
        if not callable(cb):
            raise TypeError(f"{where}: a callback must be a function (step, loss, seconds) -> bool, got {cb!r}")
    return callbacks


def _stops(result, callback):
    """A callback's answer: true stops, false or None goes on (numpy's and torch's bools, 0 and 1
    included); a string or a container is a TypeError (a callback returning "no" stopped
    training)."""
    if isinstance(result, (str, bytes, list, tuple, dict, set)):
        raise TypeError(f"fit: callback {getattr(callback, '__name__', callback)!r} returned {result!r}: return True "
                        "to stop, False or None to go on")
    return bool(result)


def _dataset(path, data_format, seed):
    if data_format not in _FORMATS:
        raise ValueError(f"pdist.Engine: data_format must be one of {sorted(_FORMATS)}, got {data_format!r}")
    return _native.Dataset(_native.encode_path(path, "token file"), _FORMATS[data_format],
                           _c_int("seed", seed, 0, 2**64 - 1))


def _cluster_file_devices(path):
    """A cluster file's devices (nodes × devices_per_node), or None where it does not say: the
    library then reads it and names what is wrong."""
    try:
        with open(path) as f:
            c = json.load(f)
        nodes, per_node = c["nodes"], c["devices_per_node"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (nodes, per_node)):
        return None
    return nodes * per_node


@contextlib.contextmanager
def _interrupts_kept(raised):
    """While the library runs fit's loop, a SIGINT handler's exception (Ctrl-C's
    KeyboardInterrupt) goes to `raised` instead of being raised. The library calls back into
    Python once a step; Python runs a pending handler at the first instruction it executes — the
    callback's entry, before any try in it — and an exception leaving a ctypes callback is printed
    ("Exception ignored on calling ctypes callback function") and dropped: fit went on. Signal
    handlers run in the main thread only, and only a handler set from Python can be wrapped."""
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:
        previous = None
    if not callable(previous):  # SIG_IGN, SIG_DFL, or not set from Python
        yield
        return

    def handler(signum, frame):
        try:
            previous(signum, frame)
        except BaseException as e:  # raised by fit once the library has returned
            raised.append(e)

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: this thread runs no signal handler anyway
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Engine:
    """`model` is a pdist.Program or a model file; `strategy` a pdist.Strategy, a dict or JSON text
    with Paddle's keys (docs/strategy.md), None for one rank. Ranks run as threads of this process,
    or — under `pdist-run --nprocs N -- python3 train.py` (`backend` None follows the launcher's
    environment; "gloo", "nccl" (one GPU per rank) or "inproc" to say it) — this process is one
    rank of the job; "inproc-rendezvous" runs the ranks as threads with NCCL's point-to-point
    semantics, a CPU check that a pipeline runs over NCCL (docs/communicators.md). `device`: "cpu", "cuda" (the rank's GPU), "cuda:N" or a host device "cpu:N";
    one this build or machine lacks is an error saying what is missing (docs/gpu.md). `fusions`: the
    GPU's kernel fusions, "auto" (all on cuda, none on cpu), "all", "none", or a comma list of
    "optimizer" and "gemm-epilogue"; on the CPU they change no number. `timeline`: a directory
    where every training step writes its timeline over the previous step's (a Chrome trace per rank
    for Perfetto, and pipeline.svg where the ranks are threads; docs/pipeline.md).
    `collective_timeout_s`: how long a collective waits for the other ranks before the call fails
    (a frozen rank fails the others after it; math.inf: as long as the engine allows);
    `checkpoint_timeout_s`: how long the ranks wait for the slowest one's checkpoint files."""

    def __init__(self, model, strategy=None, optimizer="adamw", learning_rate=1e-3, warmup_steps=0, decay_steps=0,
                 weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8, seed=1, backend=None,
                 device="cpu", fusions="auto", timeline=None, collective_timeout_s=300.0,
                 checkpoint_timeout_s=3600.0):
        config = _native.EngineConfig()
        _native.lib.pdist_engine_config_init(ctypes.byref(config))
        # The config holds pointers into these bytes: keep them as long as the call needs them.
        # Each str is checked (_native.encode): ctypes would take an int as a char* address.
        self._optimizer = _native.encode(optimizer, "pdist.Engine: optimizer")
        self._strategy = None
        if strategy is not None:
            if isinstance(strategy, Strategy):
                # The keys set on it, as a file would give them: a section's detail set without
                # its enable is then refused by name (its full form said enable false: unused).
                strategy = json.dumps(strategy.to_dict(given_only=True))
            elif isinstance(strategy, Mapping):
                strategy = _native.to_json(dict(strategy), "pdist.Engine: strategy")
            elif not isinstance(strategy, str):
                raise TypeError("pdist.Engine: strategy must be a pdist.Strategy, a dict or JSON text, got "
                                f"{type(strategy).__name__}")
            if not strategy.strip():  # a quiet "no strategy" would run one rank where several were meant
                raise ValueError("pdist.Engine: strategy is empty text; give None for one rank, or a strategy")
            # A path where JSON belongs read as "not valid JSON ... last read: '/'".
            if not strategy.lstrip().startswith("{") and os.path.isfile(strategy):
                raise ValueError(f"pdist.Engine: strategy {strategy!r} is a file; a strategy is JSON text, a dict or "
                                 "a pdist.Strategy: strategy=open(path).read()")
            # JSON text goes to the library as it is: the library names what is wrong in it.
            self._strategy = _native.encode(strategy, "pdist.Engine: strategy")
        config.optimizer = self._optimizer
        config.learning_rate = float(learning_rate)
        # ctypes wraps an int past its C type silently (2**63 steps read as -2**63, seed -1 as
        # 2**64 - 1): checked here, by name.
        config.warmup_steps = _c_int("warmup_steps", warmup_steps, 0, 2**63 - 1)
        config.decay_steps = _c_int("decay_steps", decay_steps, 0, 2**63 - 1)
        config.weight_decay = float(weight_decay)
        config.beta1, config.beta2, config.epsilon = float(beta1), float(beta2), float(epsilon)
        config.seed = _c_int("seed", seed, 0, 2**64 - 1)
        config.strategy_json = self._strategy
        self._backend = None if backend is None else _native.encode(backend, "pdist.Engine: backend")
        config.backend = self._backend
        self._device = _native.encode(device, "pdist.Engine: device")
        config.device = self._device
        self._fusions = _native.encode(fusions, "pdist.Engine: fusions")
        config.fusions = self._fusions
        self._timeline = None if timeline is None else _native.encode_path(timeline, "pdist.Engine: timeline")
        if self._timeline == b"":  # the library reads "" as no timeline: a quiet no, where a directory was meant
            raise ValueError("pdist.Engine: timeline is '', not a directory (None: no timeline)")
        config.timeline_dir = self._timeline
        # The library refuses one <= 0 or NaN by name; a str would be read as a number here.
        config.collective_timeout_s = _seconds("collective_timeout_s", collective_timeout_s)
        config.checkpoint_timeout_s = _seconds("checkpoint_timeout_s", checkpoint_timeout_s)
        handle = ctypes.c_void_p()
        if isinstance(model, Program):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.pb")
                model.save(path)
                status = _native.lib.pdist_engine_create_from_file(path.encode(), ctypes.byref(config), ctypes.byref(handle))
        else:
            status = _native.lib.pdist_engine_create_from_file(
                _native.encode_path(model, "pdist.Engine: model (a pdist.Program or a model file)"), ctypes.byref(config),
                ctypes.byref(handle))
        _native.check(status, "pdist.Engine")
        # Held by predict (whose outputs live until the next predict) and by fit's library loop
        # (whose callbacks may predict): both take it before the library's own lock, so a fit
        # callback's predict and another thread's cannot wait on each other.
        self._lock = threading.RLock()
        self._handle = handle
        self._model = model

    def train_step(self, batch):
        """One optimizer step on `batch` — a dict of data input name → numpy array, the global
        batch as the model declares it — and its loss."""
        feeds, _keep = _feeds(batch)
        loss = ctypes.c_double()
        _native.check(_native.lib.pdist_engine_train_step(self._handle, feeds, len(feeds), ctypes.byref(loss)),
                      "train_step")
        return loss.value

    def eval_step(self, batch):
        """The loss on `batch` (as train_step takes it), parameters unchanged."""
        feeds, _keep = _feeds(batch)
        loss = ctypes.c_double()
        _native.check(_native.lib.pdist_engine_eval_step(self._handle, feeds, len(feeds), ctypes.byref(loss)),
                      "eval_step")
        return loss.value

    def predict_step(self, batch):
        """The model's outputs on `batch` (as train_step takes it; the labels may be left out),
        dropout off: a dict of output name ("logits") → numpy array, whole."""
        import numpy as np
        feeds, _keep = _feeds(batch)
        outputs = ctypes.POINTER(_native.Output)()
        count = ctypes.c_int()
        # The library takes one call at a time, but its outputs live until the next predict: the
        # lock keeps another thread's predict off them until they are copied.
        with self._lock:
            _native.check(_native.lib.pdist_engine_predict(self._handle, feeds, len(feeds), ctypes.byref(outputs),
                                                           ctypes.byref(count)), "predict")
            result = {}
            for i in range(count.value):
                o = outputs[i]
                dtype = np.dtype(_OUTPUT_DTYPES[o.dtype.decode()])
                shape = tuple(o.shape[d] for d in range(o.ndim))
                size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                # A copy: the library's buffers are reused by the next predict.
                result[o.name.decode()] = np.frombuffer(ctypes.string_at(o.data, size), dtype=dtype).reshape(shape)
        return result

    def predict(self, test_data, steps=None):
        """The model's outputs (Paddle's Engine.predict): on one batch (a dict), a dict of output
        name → numpy array; on an iterable of batches, a list of such dicts, one per batch (at
        most `steps`). Parameters unchanged, dropout off."""
        if isinstance(test_data, Mapping):
            return self.predict_step(test_data)
        if _is_file(test_data):
            raise TypeError("predict: give batches (dicts of data input name -> numpy array), not a token file")
        if steps is not None:
            steps = _c_int("steps", steps, 0, 2**63 - 1, "predict")
        results = []
        if steps == 0:
            return results
        for batch in test_data:
            results.append(self.predict_step(batch))
            if steps is not None and len(results) >= steps:
                break  # before the iterable makes a batch nothing would read
        return results

    def fit(self, train_data, steps=None, epochs=1, data_format="text", seed=1, log_freq=0, callbacks=()):
        """Trains on a token file (`steps` steps; `data_format` text, uint16 or uint32; a path as
        str, bytes or os.PathLike) or on an iterable of batches (dicts of data input name → numpy
        array; `epochs` passes over it, at most `steps` steps); returns the loss of each step.
        Each callback is called after each step as callback(step, loss, seconds), `step` the
        engine's step count after it (engine.step: it goes on from an earlier fit or a loaded
        checkpoint), and may return True to stop; an exception from one, or Ctrl-C, stops fit
        after the step running and is raised. `log_freq` prints "step i/n" every log_freq steps,
        i counting this call's steps and n the steps asked for. `seed` orders a token file's
        windows: 1, as pdist-train's --data-seed, so that a run it checkpointed resumes here in the
        same order (it was 0)."""
        callbacks = _callbacks(callbacks, "fit")
        log_freq = _c_int("log_freq", log_freq, 0, 2**63 - 1, "fit")
        if steps is not None:
            steps = _c_int("steps", steps, 0, 2**63 - 1, "fit")
        if isinstance(train_data, Mapping):
            raise TypeError("fit: train_data is one batch (a dict); give an iterable of batches, [batch], or a "
                            "token file's path")
        if not _is_file(train_data):
            epochs = _c_int("epochs", epochs, 0, 2**63 - 1, "fit")
            return self._fit_batches(train_data, steps, epochs, log_freq, callbacks)
        if steps is None:
            raise ValueError("fit: steps is needed with a token file")
        losses = []
        raised = []  # a callback's exception or Ctrl-C's, raised once the library has returned

        def on_step(step, loss, seconds, _):
            # All of it in the try: an exception leaving a ctypes callback is printed and dropped.
            try:
                if raised:  # Ctrl-C came while the step ran (_interrupts_kept): stop
                    return 1
                losses.append(loss)
                # The library's `step` is the 0-based index of the step just run: the count is one more.
                return 1 if self._after_step(step + 1, len(losses), steps, loss, seconds, log_freq, callbacks) else 0
            except BaseException as e:
                raised.append(e)
                return 1

        data = _dataset(train_data, data_format, seed)
        with _interrupts_kept(raised), self._lock:
            status = _native.lib.pdist_engine_fit(self._handle, ctypes.byref(data), steps,
                                                  _native.STEP_CALLBACK(on_step), None)
        if raised:
            raise raised[0]
        _native.check(status, "fit")
        return losses

    @staticmethod
    def _after_step(step, done, asked, loss, seconds, log_freq, callbacks):
        """fit's log line and callbacks after a step: `step` the engine's count, `done` this
        call's, of `asked` (None: as many as the batches give). True stops."""
        if log_freq and done % log_freq == 0:
            of = f"/{asked}" if asked is not None else ""
            print(f"step {done}{of}  loss {loss:.4f}  {seconds:.3f} s", flush=True)
        return any(_stops(cb(step, loss, seconds), cb) for cb in callbacks)

    def _any_rank(self, stop):
        """Whether `stop` holds on any rank of the job: ranks that are processes of a pdist-run
        job each run their own loop (Ctrl-C reaches each at its own moment), and one that
        stopped alone would leave the others waiting in their next step's collectives."""
        any_ = ctypes.c_int()
        _native.check(_native.lib.pdist_engine_any_rank(self._handle, 1 if stop else 0, ctypes.byref(any_)), "stopping")
        return any_.value != 0

    def _each_batch(self, batches, steps, epochs, run, after):
        """The loop of fit and evaluate over an iterable: `run(batch)` on each batch of `epochs`
        passes, at most `steps`, then `after(...)`; every rank stops after the same batch when
        `after` returns True or raises, or Ctrl-C comes while a batch runs, on any rank, and the
        exception or Ctrl-C is raised here on the rank it came to. Ctrl-C while the iterable
        makes a batch is raised at once. Returns the losses."""
        losses = []

        def done():  # checked before the iterable makes another batch, which nothing would read
            return steps is not None and len(losses) >= steps

        for _ in range(epochs):
            if done():
                return losses
            for batch in batches:
                raised = []
                with _interrupts_kept(raised):  # a step, its callbacks and the agreement: not cut short
                    try:
                        start = time.perf_counter()
                        loss = run(batch)
                        seconds = time.perf_counter() - start
                        losses.append(loss)
                        stop = bool(after(len(losses), loss, seconds))
                    except BaseException as e:  # noqa: BLE001 - raised below, once every rank knows
                        raised.append(e)
                        stop = True
                    try:
                        stop = self._any_rank(stop or bool(raised))
                    except BaseException as e:  # noqa: BLE001
                        raised.append(e)  # after a callback's exception, which is raised first
                if raised:
                    raise raised[0]
                if stop or done():
                    return losses
        return losses

    def _fit_batches(self, batches, steps, epochs, log_freq, callbacks):
        asked = steps  # for log_freq's "step i/n": the steps this call will run, where known
        if hasattr(batches, "__len__"):
            total = int(epochs) * len(batches)
            asked = total if steps is None else min(int(steps), total)
        return self._each_batch(batches, steps, epochs, self.train_step,
                                lambda done, loss, seconds: self._after_step(self.step, done, asked, loss, seconds,
                                                                             log_freq, callbacks))

    def evaluate(self, valid_data, steps=None, data_format="text"):
        """Mean loss over `steps` batches from a token file's start, or over the batches of an
        iterable (at most `steps`); parameters unchanged. Ctrl-C stops it after the batch running
        and is raised."""
        if steps is not None:
            steps = _c_int("steps", steps, 1, 2**63 - 1, "evaluate")
        if isinstance(valid_data, Mapping):
            raise TypeError("evaluate: valid_data is one batch (a dict); give an iterable of batches, [batch], or a "
                            "token file's path (or eval_step(batch))")
        if not _is_file(valid_data):
            losses = self._each_batch(valid_data, steps, 1, self.eval_step, lambda done, loss, seconds: False)
            if not losses:
                raise ValueError("evaluate: no batches")
            return sum(losses) / len(losses)
        if steps is None:
            raise ValueError("evaluate: steps is needed with a token file")
        raised = []

        def on_batch(batch, loss, seconds, _):
            return 1 if raised else 0  # Ctrl-C came while the batch ran (_interrupts_kept)

        mean = ctypes.c_double()
        data = _dataset(valid_data, data_format, 0)
        with _interrupts_kept(raised), self._lock:
            status = _native.lib.pdist_engine_evaluate_with_callback(self._handle, ctypes.byref(data), steps,
                                                                     _native.STEP_CALLBACK(on_batch), None,
                                                                     ctypes.byref(mean))
        if raised:
            raise raised[0]
        _native.check(status, "evaluate")
        return mean.value

    def save(self, path):
        _native.check(_native.lib.pdist_engine_save(self._handle, _native.encode_path(path, "save: path")), f"save {path}")

    def load(self, path):
        _native.check(_native.lib.pdist_engine_load(self._handle, _native.encode_path(path, "load: path")), f"load {path}")

    def cost(self, cluster="dgx-a100", gpus=None):
        """The planner's prediction (a pdist.Plan) for this engine's program under its strategy —
        degrees, sp, ZeRO stage, recompute, schedule, micro-batching and a stage cut
        (pipeline.split_before) all fixed; without a cut, the planner's — on `cluster`: a preset
        with `gpus` devices (default: the strategy's dp × mp × pp) or a cluster JSON file of that
        many devices. Strategies with amp or gradient merge are not priced (the planner prices a
        model's dtype, not amp): UnimplementedError."""
        s = Strategy(json.loads(self._strategy)) if self._strategy else Strategy()
        refused = []
        if s.amp.enable:
            refused.append("amp (it prices the model's dtype: export the model in bf16 instead of enabling amp)")
        if s.gradient_merge.enable:
            k = s.gradient_merge.k_steps
            refused.append(f"gradient_merge (to the planner, micro-batching is pipeline.accumulate_steps: for its {k} "
                           f"micro-batches, price accumulate_steps {k} with gradient_merge off)")
        if refused:
            raise _native.UnimplementedError("Engine.cost: the planner does not price " + "; nor ".join(refused))
        full = s.to_dict()
        fixed = {key: full[key] for key in ("dp_degree", "mp_degree", "pp_degree", "sp")}
        # A disabled section's details are unused by the engine; the planner refuses them, so they stay here.
        for section in ("sharding", "recompute"):
            fixed[section] = full[section] if full[section]["enable"] else {"enable": False}
        # As the engine reads it (docs/strategy.md): pp_degree > 1 or accumulate_steps > 1 micro-batches
        # a step, whatever pipeline.enable says. Without, each rank runs its whole batch at once: one
        # micro-batch. micro_batch_size is parsed and unused — a micro-batch is the batch /
        # (dp × accumulate_steps) — so it is not fixed (its default 1 contradicted the shipped
        # pipelines' batches); max_micro_batch is lifted, as the engine has no such limit.
        pipelined = s.pp_degree > 1 or s.pipeline.accumulate_steps > 1
        fixed["pipeline"] = ({k: v for k, v in full["pipeline"].items() if k != "micro_batch_size"} if pipelined
                             else {"accumulate_steps": 1})
        ranks = s.dp_degree * s.mp_degree * s.pp_degree
        degrees = f"dp {s.dp_degree} × mp {s.mp_degree} × pp {s.pp_degree}"
        path = os.fsdecode(cluster) if isinstance(cluster, (bytes, os.PathLike)) else cluster
        if isinstance(path, str) and os.path.exists(path):  # a cluster file, as the library tells one
            devices = gpus if gpus is not None else _cluster_file_devices(path)
            if devices is not None and devices != ranks:
                raise _native.InvalidArgumentError(
                    f"Engine.cost: the strategy has {ranks} ranks ({degrees}), one device each, but cluster file "
                    f"{path} has {devices} devices (nodes × devices_per_node)")
        elif gpus is None:
            gpus = ranks
        elif gpus != ranks:
            raise _native.InvalidArgumentError(f"Engine.cost: the strategy has {ranks} ranks ({degrees}), one device "
                                               f"each, not gpus={gpus} (leave gpus out)")
        program = self._model if isinstance(self._model, Program) else Program.load(self._model)
        return plan(program, cluster=cluster, gpus=gpus, strategy=fixed, max_micro_batch=1 << 62)

    @property
    def local_ranks(self):
        """How many of the strategy's ranks this process runs (all in-process; one under pdist-run)."""
        return _native.lib.pdist_engine_local_rank_count(self._handle)

    @property
    def step(self):
        """Steps trained so far (restored by load)."""
        return _native.lib.pdist_engine_step(self._handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None and self._handle.value:
            _native.lib.pdist_engine_destroy(self._handle)
            self._handle = None
