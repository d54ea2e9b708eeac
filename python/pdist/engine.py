"""pdist.Engine: train, evaluate, checkpoint a program under a strategy (Paddle's auto.Engine
shape: Engine(model, strategy=...).fit(train_data, ...))."""
import ctypes
import json
import os
import tempfile
import time

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
    return isinstance(data, (str, os.PathLike))


def _feeds(batch):
    """A batch (dict of data input name → numpy array) as pdist_feed structs; returns them with
    the arrays they point into, which must live until the call returns. C-contiguous arrays are
    not copied here (the library copies them once)."""
    import numpy as np
    if not isinstance(batch, dict):
        raise TypeError("a batch is a dict of data input name -> numpy array (training data: an iterable of such "
                        f"batches, or a token file path), got {type(batch).__name__}")
    feeds = (_native.Feed * len(batch))()
    keep = []
    for i, (name, value) in enumerate(batch.items()):
        array = np.ascontiguousarray(value)
        dtype = _DTYPES.get(array.dtype.name)
        if dtype is None:
            raise TypeError(f"batch['{name}']: numpy dtype {array.dtype} has no pdist dtype "
                            f"({', '.join(sorted(_DTYPES))})")
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        encoded = _native.encode(name)
        keep.append((array, shape, encoded))
        feeds[i] = _native.Feed(encoded, dtype.encode(), array.ndim, shape, array.ctypes.data_as(ctypes.c_void_p))
    return feeds, keep


def _dataset(path, data_format, seed):
    if data_format not in _FORMATS:
        raise ValueError(f"pdist.Engine: data_format must be one of {sorted(_FORMATS)}, got {data_format!r}")
    return _native.Dataset(_native.encode(os.fspath(path)), _FORMATS[data_format], int(seed))


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
    for Perfetto, and pipeline.svg where the ranks are threads; docs/pipeline.md)."""

    def __init__(self, model, strategy=None, optimizer="adamw", learning_rate=1e-3, warmup_steps=0, decay_steps=0,
                 weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8, seed=1, backend=None,
                 device="cpu", fusions="auto", timeline=None):
        config = _native.EngineConfig()
        _native.lib.pdist_engine_config_init(ctypes.byref(config))
        # The config holds pointers into these bytes: keep them as long as the call needs them.
        self._optimizer = _native.encode(optimizer)
        self._strategy = None
        if strategy is not None:
            if isinstance(strategy, Strategy):
                strategy = strategy.to_json()
            self._strategy = _native.encode(strategy if isinstance(strategy, str) else json.dumps(strategy))
        config.optimizer = self._optimizer
        config.learning_rate = float(learning_rate)
        config.warmup_steps = int(warmup_steps)
        config.decay_steps = int(decay_steps)
        config.weight_decay = float(weight_decay)
        config.beta1, config.beta2, config.epsilon = float(beta1), float(beta2), float(epsilon)
        config.seed = int(seed)
        config.strategy_json = self._strategy
        self._backend = None if backend is None else _native.encode(backend)
        config.backend = self._backend
        self._device = _native.encode(device)
        config.device = self._device
        self._fusions = _native.encode(fusions)
        config.fusions = self._fusions
        self._timeline = None if timeline is None else _native.encode(os.fspath(timeline))
        config.timeline_dir = self._timeline
        handle = ctypes.c_void_p()
        if isinstance(model, Program):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.pb")
                model.save(path)
                status = _native.lib.pdist_engine_create_from_file(path.encode(), ctypes.byref(config), ctypes.byref(handle))
        else:
            status = _native.lib.pdist_engine_create_from_file(_native.encode(os.fspath(model)), ctypes.byref(config),
                                                               ctypes.byref(handle))
        _native.check(status, "pdist.Engine")
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
        if isinstance(test_data, dict):
            return self.predict_step(test_data)
        if _is_file(test_data):
            raise TypeError("predict: give batches (dicts of data input name -> numpy array), not a token file")
        results = []
        for batch in test_data:
            if steps is not None and len(results) >= steps:
                break
            results.append(self.predict_step(batch))
        return results

    def fit(self, train_data, steps=None, epochs=1, data_format="text", seed=0, log_freq=0, callbacks=()):
        """Trains on a token file (`steps` steps; `data_format` text, uint16 or uint32) or on an
        iterable of batches (dicts of data input name → numpy array; `epochs` passes over it, at
        most `steps` steps); returns the loss of each step. Each callback is called as
        callback(step, loss, seconds) and may return True to stop."""
        if not _is_file(train_data):
            return self._fit_batches(train_data, steps, epochs, log_freq, callbacks)
        if steps is None:
            raise ValueError("fit: steps is needed with a token file")
        losses = []
        raised = []

        def on_step(step, loss, seconds, _):
            losses.append(loss)
            if log_freq and (step + 1) % log_freq == 0:
                print(f"step {step + 1}/{steps}  loss {loss:.4f}  {seconds:.3f} s", flush=True)
            try:
                return 1 if any(bool(cb(step, loss, seconds)) for cb in callbacks) else 0
            except BaseException as e:  # re-raised below, after the library has returned
                raised.append(e)
                return 1

        data = _dataset(train_data, data_format, seed)
        status = _native.lib.pdist_engine_fit(self._handle, ctypes.byref(data), int(steps), _native.STEP_CALLBACK(on_step),
                                              None)
        if raised:
            raise raised[0]
        _native.check(status, "fit")
        return losses

    def _fit_batches(self, batches, steps, epochs, log_freq, callbacks):
        losses = []
        for _ in range(int(epochs)):
            for batch in batches:
                if steps is not None and len(losses) >= steps:
                    return losses
                start = time.perf_counter()
                loss = self.train_step(batch)
                seconds = time.perf_counter() - start
                losses.append(loss)
                step = len(losses) - 1
                if log_freq and (step + 1) % log_freq == 0:
                    print(f"step {step + 1}  loss {loss:.4f}  {seconds:.3f} s", flush=True)
                if any(bool(cb(step, loss, seconds)) for cb in callbacks):
                    return losses
        return losses

    def evaluate(self, valid_data, steps=None, data_format="text"):
        """Mean loss over `steps` batches from a token file's start, or over the batches of an
        iterable (at most `steps`); parameters unchanged."""
        if not _is_file(valid_data):
            losses = []
            for batch in valid_data:
                if steps is not None and len(losses) >= steps:
                    break
                losses.append(self.eval_step(batch))
            if not losses:
                raise ValueError("evaluate: no batches")
            return sum(losses) / len(losses)
        if steps is None:
            raise ValueError("evaluate: steps is needed with a token file")
        mean = ctypes.c_double()
        data = _dataset(valid_data, data_format, 0)
        _native.check(_native.lib.pdist_engine_evaluate(self._handle, ctypes.byref(data), int(steps), ctypes.byref(mean)),
                      "evaluate")
        return mean.value

    def save(self, path):
        _native.check(_native.lib.pdist_engine_save(self._handle, _native.encode(os.fspath(path))), f"save {path}")

    def load(self, path):
        _native.check(_native.lib.pdist_engine_load(self._handle, _native.encode(os.fspath(path))), f"load {path}")

    def cost(self, cluster="dgx-a100", gpus=None):
        """The planner's prediction (a pdist.Plan) for this engine's program under its strategy —
        degrees, sp, ZeRO stage, recompute, schedule, micro-batching and a stage cut
        (pipeline.split_before) all fixed; without a cut, the planner's — on `cluster`: a preset with `gpus` devices (default: the strategy's
        dp × mp × pp) or a cluster JSON file. Strategies with amp or gradient merge are not priced
        (the planner prices a model's dtype, not amp): UnimplementedError."""
        s = Strategy(json.loads(self._strategy)) if self._strategy else Strategy()
        if s.amp.enable or s.gradient_merge.enable:
            raise _native.UnimplementedError("Engine.cost: the planner does not price amp or gradient_merge; "
                                             "export the model in bf16 instead of enabling amp")
        full = s.to_dict()
        fixed = {key: full[key] for key in ("dp_degree", "mp_degree", "pp_degree", "sp")}
        # A disabled section's details are unused by the engine; the planner refuses them, so they stay here.
        for section in ("sharding", "recompute"):
            fixed[section] = full[section] if full[section]["enable"] else {"enable": False}
        pipelined = s.pp_degree > 1 or s.pipeline.enable
        # Without a pipeline the engine runs each rank's whole batch at once: one micro-batch.
        fixed["pipeline"] = full["pipeline"] if pipelined else {"accumulate_steps": 1}
        if gpus is None and not os.path.exists(str(cluster)):
            gpus = s.dp_degree * s.mp_degree * s.pp_degree
        program = self._model if isinstance(self._model, Program) else Program.load(self._model)
        return plan(program, cluster=cluster, gpus=gpus, strategy=fixed)

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
