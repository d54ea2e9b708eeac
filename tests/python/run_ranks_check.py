"""pdist.Engine as the ranks of a pdist-run job: two Python processes, one data-parallel rank each
(gloo), train as the in-process dp 2 run does, each predicts the whole logits, and a callback
that stops one rank stops both after the same step, and a rank that outlasts the collective
timeout fails the other with an error naming the option that sets it, and a checkpoint that fails
on one rank is an error on both that leaves them training. Run by ctest (python.pdist_run_ranks, registered
where Gloo is built); the environment names the library, pdist-export, pdist-run and the data.

    python3 run_ranks_check.py              checks (spawns pdist-run)
    python3 run_ranks_check.py MODEL OUT    one rank: trains, writes OUT/rank<R>.json
    python3 run_ranks_check.py MODEL OUT late    one rank: rank 1 outlasts the timeout, writes OUT/late<R>.json
    python3 run_ranks_check.py MODEL OUT save|fail    one rank: checkpoint failures, writes OUT/checkpoint<R>.json
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import pdist

STRATEGY = {"dp_degree": 2}
STEPS = 4


def first_windows():
    """The data file's first 4 windows of 16 bytes, as the model's tokens."""
    with open(os.environ["PDIST_DATA"], "rb") as f:
        return {"tokens": np.frombuffer(f.read(4 * 16), dtype=np.uint8).astype(np.int64).reshape(4, 16)}


def train_one_rank(model, out_dir):
    engine = pdist.Engine(model, strategy=STRATEGY, learning_rate=3e-3)  # the backend from pdist-run's environment
    losses = engine.fit(os.environ["PDIST_DATA"], steps=STEPS)
    logits = engine.predict(first_windows())["logits"]
    # A callback that stops on one rank only (as Ctrl-C reaches each process at its own moment):
    # every rank stops after that step, on a token file and on batches alike.
    rank = int(os.environ["RANK"])
    on_file = engine.fit(os.environ["PDIST_DATA"], steps=STEPS, callbacks=[lambda step, loss, s: rank == 1 and step == STEPS + 2])
    batch = dict(first_windows(), labels=first_windows()["tokens"])
    on_batches = engine.fit([batch] * STEPS, callbacks=[lambda step, loss, s: rank == 0])
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"losses": losses, "local_ranks": engine.local_ranks, "logits_shape": list(logits.shape),
                   "logits": logits.ravel().tolist(), "stopped_by_one_rank": [len(on_file), len(on_batches)],
                   "step": engine.step}, f)


TIMEOUT_S = 2


def outlast_the_timeout(model, out_dir):
    """Rank 1's callback takes longer than the collective timeout: rank 0, already waiting for it
    to agree on whether to stop, fails with the timeout's error; rank 1 then finds rank 0 gone."""
    engine = pdist.Engine(model, strategy=STRATEGY, learning_rate=3e-3, collective_timeout_s=TIMEOUT_S)
    rank = int(os.environ["RANK"])

    def slow(step, loss, seconds):
        if rank == 1:
            time.sleep(3 * TIMEOUT_S)

    errors = []
    for callbacks in ([slow], []):  # the second fit: after the communicators were aborted
        try:
            engine.fit(os.environ["PDIST_DATA"], steps=STEPS, callbacks=callbacks)
            errors.append("no error")
        except pdist.PdistError as e:
            errors.append(str(e))
    with open(os.path.join(out_dir, f"late{rank}.json"), "w") as f:
        json.dump(errors, f)


ZERO1 = {"dp_degree": 2, "sharding": {"enable": True, "stage": 1}}  # rank 1 writes a file of its own


def checkpoint_failures(model, out_dir, phase):
    """Checkpoint failures agreed between processes: phase "save" writes a good checkpoint; phase
    "fail" loads it after the driver damaged rank 1's file and saves where the driver blocked rank
    1's file. Each fails on both ranks — the failing rank with its error, the other saying another
    rank failed, with the same kind of error — and both go on training (the communicators were aborted before)."""
    engine = pdist.Engine(model, strategy=ZERO1, learning_rate=3e-3)
    rank = int(os.environ["RANK"])
    good = os.path.join(out_dir, "good")
    if phase == "save":
        engine.fit(os.environ["PDIST_DATA"], steps=2)
        engine.save(good)
        return
    engine.fit(os.environ["PDIST_DATA"], steps=1)
    errors, kinds = [], []
    for call in (lambda: engine.load(good), lambda: engine.save(os.path.join(out_dir, "blocked"))):
        try:
            call()
            errors.append("no error")
        except pdist.PdistError as e:
            errors.append(str(e))
            kinds.append(type(e).__name__)
    losses = engine.fit(os.environ["PDIST_DATA"], steps=1)
    with open(os.path.join(out_dir, f"checkpoint{rank}.json"), "w") as f:
        json.dump({"errors": errors, "kinds": kinds, "losses": losses, "step": engine.step}, f)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def export_model(tmp):
    model = os.path.join(tmp, "gpt.pb")
    subprocess.run([os.environ["PDIST_EXPORT"], "gpt", "--layers", "2", "--hidden", "32", "--heads", "2",
                    "--vocab", "256", "--seq", "16", "--batch", "4", "-o", model], check=True, capture_output=True)
    return model


def run_two_ranks(*args):
    return subprocess.run([os.environ["PDIST_RUN"], "--nprocs", "2", "--timeout-s", "120", "--", sys.executable,
                           os.path.abspath(__file__), *args], capture_output=True, text=True, timeout=180)


class PdistRunRanksTest(unittest.TestCase):
    def test_checkpoint_failures_on_one_rank_are_errors_on_both_and_training_goes_on(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = export_model(tmp)
            run = run_two_ranks(model, tmp, "save")
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            rank1 = os.path.join(tmp, "good", "rank1.ckpt")
            with open(rank1, "r+b") as f:  # a flipped byte in rank 1's last piece
                f.seek(-20, os.SEEK_END)
                byte = f.read(1)
                f.seek(-20, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0x5A]))
            os.makedirs(os.path.join(tmp, "blocked", "rank1.ckpt.tmp"))  # where rank 1's new file goes
            run = run_two_ranks(model, tmp, "fail")
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            ranks = [read_json(os.path.join(tmp, f"checkpoint{r}.json")) for r in range(2)]
            load1, save1 = ranks[1]["errors"]
            self.assertIn("rank1.ckpt", load1)
            self.assertIn("rank1.ckpt.tmp", save1)
            load0, save0 = ranks[0]["errors"]
            self.assertIn("loading", load0)
            self.assertIn("failed on rank 1", load0)
            self.assertIn("failed on rank 1", save0)
            # The same kind of error on both ranks: one except clause catches it everywhere.
            self.assertEqual(ranks[0]["kinds"], ranks[1]["kinds"])
            for rank in ranks:
                self.assertEqual(len(rank["losses"]), 1)  # trained on after both
                self.assertEqual(rank["step"], 2)  # the failed load changed nothing
            self.assertEqual(ranks[0]["losses"], ranks[1]["losses"])


    def test_a_rank_past_the_deadline_fails_the_other_naming_the_option(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = run_two_ranks(export_model(tmp), tmp, "late")
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            error, again = read_json(os.path.join(tmp, "late0.json"))
            self.assertIn("agreeing with the other ranks on whether to stop", error)
            self.assertIn(f"timeout after {TIMEOUT_S}s", error)
            self.assertIn("collective_timeout_s", error)  # which option sets the deadline
            # The engine cannot go on: its next call says why (the first failure) and what to do.
            self.assertIn("communicators were aborted after an earlier failure", again)
            self.assertIn(f"timeout after {TIMEOUT_S}s", again)
            self.assertIn("create a new engine and load the last checkpoint", again)
            # The late rank does not train on alone.
            self.assertNotIn("no error", read_json(os.path.join(tmp, "late1.json")))

    def test_two_processes_train_as_the_in_process_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = export_model(tmp)
            run = run_two_ranks(model, tmp)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            ranks = [read_json(os.path.join(tmp, f"rank{r}.json")) for r in range(2)]
            in_process = pdist.Engine(model, strategy=STRATEGY, learning_rate=3e-3, backend="inproc")
            threads = in_process.fit(os.environ["PDIST_DATA"], steps=STEPS)
            self.assertEqual(in_process.local_ranks, 2)
            self.assertEqual(len(threads), STEPS)
            logits = in_process.predict(first_windows())["logits"]
            for rank in ranks:
                self.assertEqual(rank["local_ranks"], 1)  # each process was one rank of the job
                self.assertEqual(len(rank["losses"]), STEPS)
                for a, b in zip(rank["losses"], threads):
                    self.assertAlmostEqual(a, b, delta=1e-5 * b)
                # Every process gets the whole logits, not its data-parallel half.
                self.assertEqual(rank["logits_shape"], list(logits.shape))
                got = np.array(rank["logits"], dtype=logits.dtype)
                self.assertLess(np.abs(got - logits.ravel()).max(), 1e-5 * np.abs(logits).max())
                # One rank's callback stopped both: after step 2 of the file, step 1 of the batches.
                self.assertEqual(rank["stopped_by_one_rank"], [2, 1])
                self.assertEqual(rank["step"], STEPS + 3)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[3] in ("save", "fail"):
        checkpoint_failures(sys.argv[1], sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[3] == "late":
        outlast_the_timeout(sys.argv[1], sys.argv[2])
    elif len(sys.argv) == 3:
        train_one_rank(sys.argv[1], sys.argv[2])
    else:
        unittest.main()
