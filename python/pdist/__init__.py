"""pdist from Python: programs, placements and the training engine, over libpdist.so's C API.

    import pdist
    program = pdist.load("gpt.pb")            # or pdist.models.gpt(layers=2, hidden=64, heads=4)
    # or a PyTorch model exported to ONNX: pdist.import_onnx("model.onnx", loss="cross_entropy")
    mesh = pdist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])
    pdist.shard_tensor(program, "gpt.h.0.mlp.up.weight", mesh, [pdist.Replicate(), pdist.Shard(1)])
    plan = pdist.plan(program, cluster="dgx-a100", gpus=16)   # the planner's pick; print(plan) explains it
    engine = pdist.Engine(program, strategy={"dp_degree": 2, "mp_degree": 2}, learning_rate=3e-3)
    print(engine.cost(cluster="dgx-a100"))                    # the planner's prediction for that strategy
    losses = engine.fit("data/essay.txt", steps=50)
    print(engine.evaluate("data/essay.txt", steps=4))
    engine.save("ckpt")

Errors from the library are exceptions carrying its message (pdist.PdistError and subclasses:
InvalidArgumentError is also a ValueError, NotFoundError a FileNotFoundError).
"""
from ._native import (FailedPreconditionError, InvalidArgumentError, NotFoundError, PdistError, UnimplementedError,
                      lib as _lib)
from . import models
from .engine import Engine
from .placements import Partial, ProcessMesh, Replicate, Shard
from .plan import Plan, plan
from .program import Program, import_onnx, load, shard_tensor
from .strategy import Strategy

__version__ = _lib.pdist_version().decode()

__all__ = ["Engine", "models", "FailedPreconditionError", "InvalidArgumentError", "NotFoundError", "Partial", "PdistError",
           "Plan", "ProcessMesh", "Program", "Replicate", "Shard", "Strategy", "UnimplementedError", "import_onnx", "load",
           "plan", "shard_tensor"]
