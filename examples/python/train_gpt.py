"""Paddle's auto-parallel Engine example, in pdist: build a GPT, ask the planner, shard a weight by
hand, train it on four in-process ranks (dp 2 × mp 2) with the planner's prediction beside it,
evaluate, save, load into a fresh engine, and predict with it.

    PYTHONPATH=python PDIST_LIBRARY=build/libpdist.so.0 python3 examples/python/train_gpt.py data/essay.txt

Paddle's version builds the model with paddle.nn, marks weights with dist.shard_tensor, and calls
auto.Engine(model, loss, optimizer, strategy=strategy).fit(train_dataset, ...); here the model is
a pdist program, the loss is part of it, and the optimizer is the engine's configuration.
"""
import os
import sys
import tempfile

import numpy as np

import pdist


def main(data_path, steps=30):
    # 1. Build: a 2-layer GPT over bytes (vocabulary 256), 64-token windows, batch 8.
    program = pdist.models.gpt(layers=2, hidden=64, heads=4, vocab=256, seq=64, batch=8)

    # 2. Plan: what the planner would pick for 4 A100s (any program: it finds the layers itself).
    plan = pdist.plan(program, cluster="dgx-a100", gpus=4)
    pick = plan.strategy
    print(f"planner's pick for 4 A100s: dp{pick.dp_degree} mp{pick.mp_degree} pp{pick.pp_degree}, "
          f"predicted {plan.step_time * 1e3:.3f} ms a step")

    # 3. Shard: column-parallel first MLP weight of each layer on the tensor-parallel axis, the
    #    rest derived by completion (and by the strategy's degrees).
    mesh = pdist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])
    for layer in range(2):
        pdist.shard_tensor(program, f"gpt.h.{layer}.mlp.up.weight", mesh, [pdist.Replicate(), pdist.Shard(1)])

    # 4. Fit: four ranks as threads of this process, AdamW with a warm-up.
    strategy = pdist.Strategy()
    strategy.dp_degree = 2
    strategy.mp_degree = 2
    engine = pdist.Engine(program, strategy=strategy, learning_rate=3e-3, warmup_steps=5)
    cost = engine.cost(cluster="dgx-a100")
    print(f"this strategy on 4 A100s: predicted {cost.step_time * 1e3:.3f} ms a step, MFU {cost.mfu:.1%}")
    losses = engine.fit(data_path, steps=steps, log_freq=10)
    print(f"trained {engine.step} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    # 5. Evaluate, save, and load into a fresh engine: the same held-out loss.
    loss = engine.evaluate(data_path, steps=4)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "checkpoint")
        engine.save(checkpoint)
        restored = pdist.Engine(program, strategy=strategy, learning_rate=3e-3, warmup_steps=5)
        restored.load(checkpoint)
        again = restored.evaluate(data_path, steps=4)
        # 6. Predict: the logits, whole (every rank's piece assembled), for the tokens alone.
        with open(data_path, "rb") as f:
            windows = np.frombuffer(f.read(8 * 64), dtype=np.uint8).astype(np.int64).reshape(8, 64)
        logits = restored.predict({"tokens": windows})["logits"]
    print(f"eval loss {loss:.4f}; after save and load {again:.4f} at step {restored.step}")
    print(f"predicted logits {logits.shape}: next byte after the first window {int(logits[0, -1].argmax())}")
    if abs(again - loss) > 1e-6 * loss or losses[-1] >= losses[0]:
        sys.exit("the restored engine does not evaluate as the saved one, or training did not learn")
    if logits.shape != (8, 64, 256):
        sys.exit(f"predict gave logits of shape {logits.shape}, not the whole (8, 64, 256)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} DATA [STEPS]")
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
