"""pdist.plan: the planner's pick for a program on a cluster, as pdist-plan makes it."""
import ctypes
import json
import numbers
import os

from . import _native
from .program import Program
from .strategy import Strategy, config_dict


class Plan:
    """What the planner predicts for its pick: `strategy` (a pdist.Strategy that pdist.Engine and
    pdist-train run as it is), `step_time` (s), `tokens_per_s`, `tflops_per_device`, `mfu`,
    `peak_memory_bytes` of `memory_capacity_bytes`, `time` and `memory` by term, `model` (the
    segments the planner found), `explanation` (the runners-up and why they lost); str() is the
    report pdist-plan prints. `json` is the whole document."""

    def __init__(self, document):
        self.json = document
        self.strategy = Strategy(document["strategy"])
        self.step_time = document["step_time_s"]
        self.tokens_per_s = document["tokens_per_s"]
        self.tflops_per_device = document["tflops_per_device"]
        self.mfu = document["mfu"]
        self.peak_memory_bytes = document["peak_memory_bytes"]
        self.memory_capacity_bytes = document["memory_capacity_bytes"]
        self.time = document["time_s"]
        self.memory = document["memory_bytes"]
        self.model = document["model"]
        self.explanation = document["explanation"]
        self.report = document["report"]

    def __str__(self):
        return self.report

    def __repr__(self):
        return f"pdist.Plan(step_time={self.step_time:.4g} s, mfu={self.mfu:.3f}, strategy={self.strategy.to_dict()!r})"


def _whole(name, value, low):
    """`value` as an int >= low, else TypeError / ValueError naming plan's argument."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"plan: {name} must be an int, got {value!r}")
    if int(value) < low:
        raise ValueError(f"plan: {name} must be >= {low}, got {int(value)}")
    return int(value)


def plan(program, cluster="dgx-a100", gpus=None, strategy=None, memory_margin=0.1, max_micro_batch=None,
         mp_across_nodes=False, top=5):
    """Searches data, tensor, pipeline and sequence parallelism, ZeRO, micro-batching, schedules and
    recompute for `program` (a pdist.Program with a loss, or its file; its batch is the global batch) on
    `cluster` (a preset — dgx-a100, dgx-a100-40gb, dgx-h100, hgx-h200 — with `gpus` devices, or a cluster JSON
    file). `strategy` (a pdist.Strategy, a dict or JSON text) fixes the keys it sets; the rest is searched.
    Raises pdist.FailedPreconditionError when nothing fits, naming the leanest plan."""
    if isinstance(program, (str, bytes, os.PathLike)):  # a model file, as pdist.Engine takes one
        program = Program.load(program)
    if not isinstance(program, Program):
        raise TypeError(f"plan: program must be a pdist.Program or a model file's path, got {type(program).__name__}")
    if isinstance(cluster, (bytes, os.PathLike)):
        cluster = os.fsdecode(cluster)
    if not isinstance(cluster, str):
        raise TypeError(f"plan: cluster must be a preset name or a cluster file's path, got {cluster!r}")
    if not isinstance(memory_margin, numbers.Real) or isinstance(memory_margin, bool) or \
            not 0 <= float(memory_margin) < 1:
        raise ValueError(f"plan: memory_margin must be a number in [0, 1), got {memory_margin!r}")
    options = {"cluster": cluster, "memory_margin": float(memory_margin),
               "mp_across_nodes": bool(mp_across_nodes), "top": _whole("top", top, 0)}
    if max_micro_batch is not None:  # None: 64 sequences, or 131,072 tokens where that is more
        options["max_micro_batch"] = _whole("max_micro_batch", max_micro_batch, 1)
    if gpus is not None:
        options["gpus"] = _whole("gpus", gpus, 1)
    if strategy is not None:
        options["strategy"] = config_dict(strategy, "plan")  # of a pdist.Strategy, the keys set on it
    result = ctypes.c_char_p()
    options_json = _native.encode(_native.to_json(options, "plan"), "plan options")
    _native.check(_native.lib.pdist_program_plan(program._handle, options_json,
                                                 ctypes.byref(result)),
                  "plan")
    return Plan(json.loads(result.value.decode("utf-8")))
