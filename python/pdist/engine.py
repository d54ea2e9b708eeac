"""pdist.Engine: train, evaluate, checkpoint a program under a strategy (Paddle's auto.Engine
shape: Engine(model, strategy=...).fit(train_data, ...))."""
import ctypes
import json
import os
import tempfile

from . import _native
from .program import Program
from .strategy import Strategy

_FORMATS = {"text": 0, "uint16": 1, "uint32": 2}


def _dataset(path, data_format, seed):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"pdist.Engine: data must be a token file path, got {type(path).__name__} "
                        "(iterables of numpy batches are not supported yet)")
    if data_format not in _FORMATS:
        raise ValueError(f"pdist.Engine: data_format must be one of {sorted(_FORMATS)}, got {data_format!r}")
    return _native.Dataset(_native.encode(os.fspath(path)), _FORMATS[data_format], int(seed))


class Engine:
    """`model` is a pdist.Program or a model file; `strategy` a pdist.Strategy, a dict or JSON text
    with Paddle's keys (docs/strategy.md), None for one rank. Ranks run as threads of this process."""

    def __init__(self, model, strategy=None, optimizer="adamw", learning_rate=1e-3, warmup_steps=0, decay_steps=0,
                 weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8, seed=1):
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

    def fit(self, train_data, steps, data_format="text", seed=0, log_freq=0, callbacks=()):
        """Trains `steps` steps on a token file; returns the loss of each step. Each callback is
        called as callback(step, loss, seconds) and may return True to stop."""
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

    def evaluate(self, valid_data, steps, data_format="text"):
        """Mean loss over `steps` batches from the file's start; parameters unchanged."""
        mean = ctypes.c_double()
        data = _dataset(valid_data, data_format, 0)
        _native.check(_native.lib.pdist_engine_evaluate(self._handle, ctypes.byref(data), int(steps), ctypes.byref(mean)),
                      "evaluate")
        return mean.value

    def save(self, path):
        _native.check(_native.lib.pdist_engine_save(self._handle, _native.encode(os.fspath(path))), f"save {path}")

    def load(self, path):
        _native.check(_native.lib.pdist_engine_load(self._handle, _native.encode(os.fspath(path))), f"load {path}")

    @property
    def step(self):
        """Steps trained so far (restored by load)."""
        return _native.lib.pdist_engine_step(self._handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None and self._handle.value:
            _native.lib.pdist_engine_destroy(self._handle)
            self._handle = None
