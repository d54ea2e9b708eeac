"""The Python package over libpdist.so: programs, placements, the engine, errors.

Run by ctest (python.pdist) with Debian's python3; the environment names the library
(PDIST_LIBRARY), pdist-export (PDIST_EXPORT) and a text file to train on (PDIST_DATA)."""
import contextlib
import copy
import io
import json
import os
import pickle
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import pdist

DATA = os.environ["PDIST_DATA"]
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def example(kind, name):
    """A shipped example file (examples/strategies, examples/clusters)."""
    return os.path.join(EXAMPLES, kind, name)


def export_gpt(directory):
    path = os.path.join(directory, "gpt.pb")
    subprocess.run([os.environ["PDIST_EXPORT"], "gpt", "--layers", "2", "--hidden", "32", "--heads", "2", "--vocab",
                    "256", "--seq", "16", "--batch", "4", "-o", path], check=True, capture_output=True)
    return path


class WithExportedGpt(unittest.TestCase):
    """A small GPT exported once per test class into a temporary directory (self.model)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = export_gpt(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()


class ProgramTest(WithExportedGpt):
    def test_load_save_and_print_round_trip(self):
        program = pdist.load(self.model)
        text = str(program)
        self.assertIn('param "gpt.h.1.mlp.up.weight" : f32[32,128]', text)
        copy = os.path.join(self.tmp.name, "copy.pb")
        program.save(copy)
        self.assertEqual(str(pdist.load(copy)), text)

    def test_shard_tensor_annotates_with_paddles_placements(self):
        program = pdist.load(self.model)
        mesh = pdist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])
        pdist.shard_tensor(program, "gpt.h.0.mlp.up.weight", mesh, [pdist.Replicate(), pdist.Shard(1)])
        line = next(l for l in str(program).splitlines() if '"gpt.h.0.mlp.up.weight"' in l)
        self.assertIn("dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}", line)

    def test_bad_annotations_raise_naming_the_value(self):
        program = pdist.load(self.model)
        mesh = pdist.ProcessMesh(shape=[2], dim_names=["dp"])
        with self.assertRaisesRegex(pdist.NotFoundError, "tensor 'no_such_tensor' is neither a block argument"):
            pdist.shard_tensor(program, "no_such_tensor", mesh, [pdist.Shard(0)])
        with self.assertRaisesRegex(ValueError, "one pdist.Shard/Replicate/Partial per mesh dim"):
            pdist.shard_tensor(program, "gpt.wte", mesh, [pdist.Shard(0), pdist.Shard(1)])
        with self.assertRaisesRegex(ValueError, "row-major"):
            pdist.ProcessMesh([[1, 0]])
        with self.assertRaisesRegex(ValueError, "reduce_type"):
            pdist.Partial("min")
        # A failed call leaves the program as it was.
        self.assertEqual(str(program), str(pdist.load(self.model)))

    def test_missing_file_is_a_file_not_found_error(self):
        with self.assertRaises(FileNotFoundError) as caught:
            pdist.load(os.path.join(self.tmp.name, "absent.pb"))
        self.assertIsInstance(caught.exception, pdist.PdistError)
        self.assertIn("absent.pb", str(caught.exception))


class ModelsTest(unittest.TestCase):
    def test_builders_match_pdist_export(self):
        with tempfile.TemporaryDirectory() as tmp:
            exported = pdist.load(export_gpt(tmp))
        built = pdist.models.gpt(layers=2, hidden=32, heads=2, vocab=256, seq=16, batch=4)
        self.assertEqual(str(built), str(exported))
        self.assertIn('param "llama.h.0.mlp.gate.weight"', str(pdist.models.llama(layers=1, hidden=32, heads=2)))
        self.assertIn('param "mlp.head.weight" : f32[8,3]', str(pdist.models.mlp(input=5, layers=1, hidden=8, classes=3)))

    def test_bf16_is_the_mixed_precision_program_and_trains(self):
        program = pdist.models.gpt(layers=1, hidden=32, heads=2, vocab=256, seq=16, batch=4, tied=True, dtype="bf16")
        self.assertIn('param "gpt.wte" : bf16[256,32]', str(program))
        losses = pdist.Engine(program, learning_rate=3e-3).fit(DATA, steps=3)
        self.assertLess(losses[-1], losses[0])

    def test_bad_options_raise_naming_them(self):
        with self.assertRaisesRegex(ValueError, "unknown model option 'hiden'"):
            pdist.models.gpt(hiden=32)
        with self.assertRaisesRegex(ValueError, "GptConfig.hidden \\(30\\) must be divisible by GptConfig.heads \\(4\\)"):
            pdist.models.gpt(hidden=30, heads=4)
        with self.assertRaisesRegex(ValueError, "dtype 'f16' is not f32, f64 or bf16"):
            pdist.models.gpt(dtype="f16")

    def test_options_cannot_set_other_options_and_a_kinds_unread_options_are_refused(self):
        # The pairs travel as "key=value,key=value": a value holding ',' or '=' set other options
        # (this built 3 layers).
        with self.assertRaisesRegex(TypeError, "option 'layers' must be int, got '1,layers=3'"):
            pdist.models.gpt(layers="1,layers=3")
        with self.assertRaisesRegex(ValueError, "option 'dtype': 'f32,layers=3' holds ',' or '='"):
            pdist.models.gpt(layers=1, dtype="f32,layers=3")
        with self.assertRaisesRegex(TypeError, "option 'tied' must be bool, got 'yes'"):
            pdist.models.gpt(tied="yes")
        with self.assertRaisesRegex(TypeError, "option 'dropout' must be a number, got True"):
            pdist.models.gpt(dropout=True)
        # Options another kind reads were parsed and ignored.
        for build, key in ((pdist.models.mlp, "heads"), (pdist.models.mlp, "vocab"), (pdist.models.mlp, "tied"),
                           (pdist.models.gpt, "classes"), (pdist.models.llama, "input")):
            with self.assertRaisesRegex(ValueError, f"unknown model option '{key}' for {build.__name__}"):
                build(**{key: True if key == "tied" else 3})
        import numpy as np
        self.assertEqual(str(pdist.models.gpt(layers=np.int64(1), hidden=32, heads=2, dropout=0.1)),
                         str(pdist.models.gpt(layers=1, hidden=32, heads=2, dropout=0.1)))
        self.assertNotIn("gpt.h.1.", str(pdist.models.gpt(layers=1, hidden=32, heads=2)))


class StrategyTest(unittest.TestCase):
    def test_sections_are_attributes_with_paddles_keys(self):
        strategy = pdist.Strategy({"dp_degree": 2, "sharding": {"enable": True}})
        strategy.mp_degree = 2
        strategy.sharding.stage = 3
        strategy.amp.init_loss_scaling = 1024  # an int where a number goes
        d = strategy.to_dict()
        self.assertEqual((d["dp_degree"], d["mp_degree"], d["sharding"]["stage"]), (2, 2, 3))
        self.assertEqual(d["amp"]["init_loss_scaling"], 1024.0)
        self.assertEqual(d["pipeline"]["schedule_mode"], "1F1B")
        strategy.amp.custom_black_list = ["matmul"]  # Paddle's custom op lists
        self.assertEqual(strategy.to_dict()["amp"]["custom_black_list"], ["matmul"])

    def test_unknown_keys_and_wrong_types_raise_as_they_are_set(self):
        strategy = pdist.Strategy()
        with self.assertRaisesRegex(AttributeError, "strategy has no key 'dp_degre'"):
            strategy.dp_degre = 2
        with self.assertRaisesRegex(AttributeError, "section 'sharding' has no key 'stages'"):
            strategy.sharding.stages = 2
        with self.assertRaisesRegex(TypeError, "'sharding.enable' must be bool, got 1"):
            strategy.sharding.enable = 1
        with self.assertRaisesRegex(TypeError, "'dp_degree' must be int, got '2'"):
            strategy.dp_degree = "2"
        with self.assertRaisesRegex(AttributeError, "set key by key"):
            strategy.amp = {"enable": True}
        with self.assertRaisesRegex(TypeError, "'dp_degree' must be int, got True"):
            strategy.dp_degree = True
        import numpy as np
        strategy.dp_degree = np.int64(2)  # numpy's integers are ints (was "must be int, got 2")
        strategy.amp.init_loss_scaling = np.float32(8)
        self.assertEqual(json.loads(strategy.to_json())["dp_degree"], 2)
        self.assertIs(type(strategy.dp_degree), int)
        self.assertEqual(strategy.amp.init_loss_scaling, 8.0)
        # annotations: a list of objects, never an int ("'int' object is not iterable") nor a str taken apart.
        for bad in (5, "abc", ["abc"]):
            with self.assertRaisesRegex(TypeError, "'annotations' must be a list of objects"):
                pdist.Strategy({"annotations": bad})
            with self.assertRaisesRegex(TypeError, "'annotations' must be a list of objects"):
                strategy.annotations = bad
        self.assertEqual(strategy.annotations, [])

    def test_json_text_is_a_strategy_as_the_engine_takes_it(self):
        with open(example("strategies", "pp2_vpp2.json")) as f:
            text = f.read()
        strategy = pdist.Strategy(text)
        self.assertEqual((strategy.pp_degree, strategy.pipeline.schedule_mode, strategy.pipeline.vpp_degree),
                         (2, "VPP", 2))
        self.assertEqual(strategy.to_dict(given_only=True), json.loads(text))
        self.assertEqual(pdist.Strategy('{"dp_degree": 2}').dp_degree, 2)
        with self.assertRaisesRegex(ValueError, "strategy text is not JSON"):
            pdist.Strategy(example("strategies", "dp2.json"))  # a path is not JSON text (nor for pdist.Engine)
        with self.assertRaisesRegex(TypeError, "JSON text of an object, got list"):
            pdist.Strategy("[1, 2]")
        self.assertEqual(pdist.Strategy(strategy), strategy)

    def test_copies_and_pickles_are_whole_independent_strategies(self):
        strategy = pdist.Strategy({"dp_degree": 2, "sharding": {"enable": True}, "annotations": [
            {"tensor": "gpt.wte", "mesh": {"shape": [2], "dim_names": ["dp"]}, "placements": ["Replicate()"]}]})
        for clone in (copy.deepcopy(strategy), copy.copy(strategy), pickle.loads(pickle.dumps(strategy))):
            self.assertEqual(clone, strategy)
            self.assertEqual(clone.to_dict(given_only=True), strategy.to_dict(given_only=True))
            clone.dp_degree = 4
            clone.sharding.stage = 2
            clone.annotations[0]["tensor"] = "gpt.wpe"
            with self.assertRaisesRegex(AttributeError, "has no key 'stages'"):
                clone.sharding.stages = 2  # still checked
            self.assertNotEqual(clone, strategy)
            self.assertEqual((strategy.dp_degree, strategy.sharding.stage), (2, 1))
            self.assertEqual(strategy.annotations[0]["tensor"], "gpt.wte")
            self.assertEqual(strategy.to_dict(given_only=True)["sharding"], {"enable": True})
        for section in (copy.deepcopy(strategy.amp), pickle.loads(pickle.dumps(strategy.amp))):
            section.enable = True
            self.assertEqual(section.to_dict()["enable"], True)
            self.assertFalse(strategy.amp.enable)

    def test_the_engine_reads_it_and_the_library_checks_ranges(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = export_gpt(tmp)
            strategy = pdist.Strategy()
            strategy.dp_degree = 2
            strategy.sharding.enable = True
            strategy.sharding.stage = 2
            losses = pdist.Engine(model, strategy=strategy, learning_rate=3e-3).fit(DATA, steps=2)
            self.assertEqual(len(losses), 2)
            strategy.sharding.stage = 4
            with self.assertRaisesRegex(ValueError, "'sharding.stage'"):
                pdist.Engine(model, strategy=strategy)


class EngineTest(WithExportedGpt):
    def test_four_ranks_train_as_one(self):
        one = pdist.Engine(self.model, learning_rate=3e-3).fit(DATA, steps=4)
        four = pdist.Engine(pdist.load(self.model), strategy={"dp_degree": 2, "mp_degree": 2},
                            learning_rate=3e-3).fit(DATA, steps=4)
        self.assertEqual(len(four), 4)
        for a, b in zip(four, one):
            self.assertAlmostEqual(a, b, delta=1e-5 * b)
        self.assertLess(one[-1], one[0])

    def test_a_program_annotated_by_hand_trains_as_one_rank_without_a_strategy(self):
        # Paddle's semi-automatic flow: a few tensors placed, completion places the rest on their
        # mesh. Without a strategy the data went on one process and the weight on two: an IR error
        # ("gradient %0 <- %<undefined id 73>") from the partition of rank 1.
        one = pdist.Engine(self.model, learning_rate=3e-3).fit(DATA, steps=3)
        for mesh, placements in ((pdist.ProcessMesh(shape=[2], dim_names=["x"]), [pdist.Shard(1)]),
                                 (pdist.ProcessMesh(shape=[2, 2], dim_names=["x", "y"]),
                                  [pdist.Shard(1), pdist.Replicate()])):
            program = pdist.load(self.model)
            pdist.shard_tensor(program, "gpt.h.0.mlp.up.weight", mesh, placements)
            engine = pdist.Engine(program, learning_rate=3e-3)
            self.assertEqual(engine.local_ranks, 2 if mesh.ndim == 1 else 4)  # the mesh's processes
            for a, b in zip(engine.fit(DATA, steps=3), one):
                self.assertAlmostEqual(a, b, delta=1e-5 * b)
            # Micro-batches cannot follow hand placements: said so, not "split the program before it is annotated".
            with self.assertRaisesRegex(pdist.InvalidArgumentError, "the program's own placements .* run without micro-batches"):
                pdist.Engine(program, strategy={"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})
        # A parameter is stored whole or in shards: Partial() trained another model (each rank's
        # copy summed), 0.5% off one rank's loss.
        program = pdist.load(self.model)
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "Partial\\(\\) is a pending sum that ops leave"):
            pdist.shard_tensor(program, "gpt.wte", pdist.ProcessMesh(shape=[2], dim_names=["x"]), [pdist.Partial()])

    def test_an_interleaved_pipeline_over_nccls_point_to_point_trains_as_one_rank(self):
        one = pdist.Engine(self.model, learning_rate=3e-3).fit(DATA, steps=3)
        stages = {"pp_degree": 2, "pipeline": {"enable": True, "schedule_mode": "VPP", "vpp_degree": 2,
                                               "accumulate_steps": 2}}
        piped = pdist.Engine(self.model, strategy=stages, learning_rate=3e-3,
                             backend="inproc-rendezvous").fit(DATA, steps=3)
        for a, b in zip(piped, one):
            self.assertAlmostEqual(a, b, delta=1e-5 * b)

    def test_a_fit_callback_may_predict_while_another_thread_does(self):
        # Another thread's predict took the Python lock, then waited for the library's (held by
        # fit); the fit callback's predict then waited for the Python lock: a deadlock. Now fit
        # holds the Python lock too, so the other thread waits outside both.
        import threading
        import time
        import numpy as np
        engine = pdist.Engine(self.model, learning_rate=3e-3)
        batch = {"tokens": np.zeros((4, 16), dtype=np.int64)}
        done = []
        other = threading.Thread(target=lambda: done.append(engine.predict(batch)))

        def callback(step, loss, seconds):
            if step == 1:
                other.start()
                time.sleep(0.2)  # the other thread is waiting by now
                done.append(engine.predict(batch))
            return False

        engine.fit(DATA, steps=2, callbacks=[callback])
        other.join(timeout=60)
        self.assertFalse(other.is_alive())
        self.assertEqual(len(done), 2)

    def test_checkpoint_resumes_the_same_run(self):
        whole = pdist.Engine(self.model, learning_rate=3e-3).fit(DATA, steps=5)
        first = pdist.Engine(self.model, learning_rate=3e-3)
        first.fit(DATA, steps=3)
        ckpt = os.path.join(self.tmp.name, "ckpt")
        first.save(ckpt)
        resumed = pdist.Engine(self.model, learning_rate=3e-3)
        resumed.load(ckpt)
        self.assertEqual(resumed.step, 3)
        rest = resumed.fit(DATA, steps=2)
        for a, b in zip(rest, whole[3:]):
            self.assertAlmostEqual(a, b, delta=1e-6 * b)
        self.assertGreater(resumed.evaluate(DATA, steps=2), 0)
        # A C string ends at a NUL: "ckpt\0x" saved into "ckpt" (and loaded from it) quietly.
        with self.assertRaisesRegex(ValueError, "save: path: embedded null byte"):
            first.save(ckpt + "\0x")
        with self.assertRaisesRegex(ValueError, "load: path: embedded null byte"):
            resumed.load(ckpt + "\0x")
        self.assertEqual(resumed.step, 5)

    def test_a_pdist_train_checkpoint_resumes_here_in_the_same_order(self):
        # The same defaults as pdist-train (data seed 1, lr, AdamW): its run of 4 steps, and 2
        # steps of it resumed here. Python's data seed was 0, another order of windows.
        ckpt = os.path.join(self.tmp.name, "cli_ckpt")
        losses = os.path.join(self.tmp.name, "cli_losses.json")
        train = os.environ["PDIST_TRAIN"]
        subprocess.run([train, self.model, "--data", DATA, "--steps", "4", "--losses-out", losses, "--quiet"],
                       check=True, capture_output=True)
        subprocess.run([train, self.model, "--data", DATA, "--steps", "2", "--save", ckpt, "--quiet"],
                       check=True, capture_output=True)
        with open(losses) as f:
            whole = json.load(f)["losses"]
        resumed = pdist.Engine(self.model)
        resumed.load(ckpt)
        for a, b in zip(resumed.fit(DATA, steps=2), whole[2:]):
            self.assertAlmostEqual(a, b, delta=1e-6 * b)

    def test_callbacks_stop_fit_and_their_errors_propagate(self):
        engine = pdist.Engine(self.model)
        losses = engine.fit(DATA, steps=10, callbacks=[lambda step, loss, seconds: step == 2])
        self.assertEqual(len(losses), 2)

        def broken(step, loss, seconds):
            raise KeyError("from the callback")

        with self.assertRaisesRegex(KeyError, "from the callback"):
            engine.fit(DATA, steps=3, callbacks=[broken])
        self.assertEqual(engine.step, 3)

        def interrupted(step, loss, seconds):
            if step == 5:
                raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            engine.fit(DATA, steps=10, callbacks=[interrupted])
        self.assertEqual(engine.step, 5)

    def test_ctrl_c_during_fit_stops_it_and_is_raised(self):
        # SIGINT while the library runs a step: Python runs the handler at the callback's entry,
        # where its KeyboardInterrupt was printed ("Exception ignored on calling ctypes callback
        # function") and dropped, and fit went on to the end.
        engine = pdist.Engine(self.model)
        seen = []

        def on_step(step, loss, seconds):
            seen.append(step)
            if len(seen) == 1:  # Ctrl-C 50 ms on, mid-step (a step is about a millisecond)
                threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
            return len(seen) == 1000

        with self.assertRaises(KeyboardInterrupt):
            engine.fit(DATA, steps=3000, callbacks=[on_step])
        self.assertLess(engine.step, 1000)
        # Stopped after the step it came in: the callbacks had seen every step before it.
        self.assertEqual(seen, list(range(1, len(seen) + 1)))
        self.assertIn(engine.step, (len(seen), len(seen) + 1))
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)  # put back
        self.assertEqual(len(engine.fit(DATA, steps=1)), 1)  # and the engine trains on

    def test_ctrl_c_during_evaluate_on_a_token_file_stops_it_after_the_batch(self):
        # The library's evaluation loop had no callback: Ctrl-C waited for all its batches.
        engine = pdist.Engine(self.model)
        threading.Timer(0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        start = time.perf_counter()
        with self.assertRaises(KeyboardInterrupt):
            engine.evaluate(DATA, steps=100000)  # hours of batches
        self.assertLess(time.perf_counter() - start, 30)
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        self.assertGreater(engine.evaluate(DATA, steps=1), 0)

    def test_callbacks_get_the_engines_step_and_the_log_counts_this_fits_steps(self):
        engine = pdist.Engine(self.model)
        engine.fit(DATA, steps=2)
        seen, out = [], io.StringIO()
        with contextlib.redirect_stdout(out):
            engine.fit(DATA, steps=4, log_freq=2,
                       callbacks=[lambda step, loss, seconds: seen.append((step, engine.step))])
        self.assertEqual(seen, [(3, 3), (4, 4), (5, 5), (6, 6)])  # was the 0-based index (2, 3)...
        self.assertEqual([line.split()[:2] for line in out.getvalue().splitlines()],
                         [["step", "2/4"], ["step", "4/4"]])  # was "step 4/4", "step 6/4"

    def test_bad_input_raises_with_the_librarys_message(self):
        with self.assertRaisesRegex(ValueError, "unknown strategy key 'dp_degre'"):
            pdist.Engine(self.model, strategy={"dp_degre": 2})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "optimizer"):
            pdist.Engine(self.model, optimizer="lion")
        # A strategy file's path where its text belongs.
        path = os.path.join(self.tmp.name, "dp2.json")
        with open(path, "w") as f:
            f.write('{"dp_degree": 2}')
        with self.assertRaisesRegex(ValueError, "is a file; a strategy is JSON text"):
            pdist.Engine(self.model, strategy=path)
        # Integers past the C config's range wrapped silently.
        with self.assertRaisesRegex(ValueError, "warmup_steps 9223372036854775808 must be in"):
            pdist.Engine(self.model, warmup_steps=2**63)
        with self.assertRaisesRegex(ValueError, "seed -1 must be in"):
            pdist.Engine(self.model, seed=-1)
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "learning_rate nan must be > 0 and finite"):
            pdist.Engine(self.model, learning_rate=float("nan"))
        # The deadlines reach the engine, which refuses them by name; a str is not read as a number.
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "collective timeout 0 s must be > 0"):
            pdist.Engine(self.model, collective_timeout_s=0)
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "checkpoint timeout -1 s must be > 0"):
            pdist.Engine(self.model, checkpoint_timeout_s=-1)
        with self.assertRaisesRegex(TypeError, "collective_timeout_s must be a number of seconds, got '30'"):
            pdist.Engine(self.model, collective_timeout_s="30")
        pdist.Engine(self.model, collective_timeout_s=float("inf"))  # as long as the engine allows
        # A section's detail without its enable: refused by name, not trained without it.
        zero3 = pdist.Strategy({"dp_degree": 2})
        zero3.sharding.stage = 3
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "'sharding.stage' without 'sharding.enable'"):
            pdist.Engine(self.model, strategy=zero3)
        engine = pdist.Engine(self.model)
        with self.assertRaises(FileNotFoundError):
            engine.fit(os.path.join(self.tmp.name, "absent.txt"), steps=1)
        with self.assertRaisesRegex(TypeError, "a batch is a dict .* or a token file path\\), got list"):
            engine.fit([[1, 2, 3]], steps=1)
        with self.assertRaisesRegex(ValueError, "data_format"):
            engine.fit(DATA, steps=1, data_format="utf8")
        # A path as bytes is a path (it was iterated as batches: "got int").
        self.assertEqual(len(engine.fit(os.fsencode(DATA), steps=1)), 1)
        self.assertGreater(engine.evaluate(os.fsencode(DATA), steps=1), 0)
        # Every str handed to the library is checked: ctypes would take an int as a char* address.
        for key, value in (("optimizer", 5), ("device", 0), ("fusions", None), ("backend", 1)):
            with self.assertRaisesRegex(TypeError, f"pdist.Engine: {key} must be str, got"):
                pdist.Engine(self.model, **{key: value})
        with self.assertRaisesRegex(TypeError, "strategy must be a pdist.Strategy, a dict or JSON text, got int"):
            pdist.Engine(self.model, strategy=2)
        with self.assertRaisesRegex(TypeError, "model .* must be a path"):
            pdist.Engine(5)
        # "" read as no timeline, quietly.
        with self.assertRaisesRegex(ValueError, "timeline is '', not a directory"):
            pdist.Engine(self.model, timeline="")
        program = pdist.load(self.model)
        mesh = pdist.ProcessMesh(shape=[2], dim_names=["dp"])
        with self.assertRaisesRegex(TypeError, "shard_tensor: name must be str, got int"):
            pdist.shard_tensor(program, 7, mesh, [pdist.Shard(0)])
        with self.assertRaisesRegex(TypeError, "dim_names must be str"):
            pdist.ProcessMesh(shape=[2], dim_names=[0])
        with self.assertRaisesRegex(TypeError, "load: path must be a path"):
            pdist.load(3)


if __name__ == "__main__":
    unittest.main()


class PlanTest(WithExportedGpt):
    def test_plan_picks_a_strategy_for_the_devices_and_explains_it(self):
        p = pdist.plan(pdist.load(self.model), cluster="dgx-a100", gpus=4)
        self.assertIsInstance(p.strategy, pdist.Strategy)
        self.assertEqual(p.strategy.dp_degree * p.strategy.mp_degree * p.strategy.pp_degree, 4)
        self.assertGreater(p.step_time, 0)
        self.assertGreater(p.tokens_per_s, 0)
        self.assertLessEqual(p.peak_memory_bytes, p.memory_capacity_bytes)
        self.assertIn("2 repeated layers", p.model)
        self.assertIn("plan: dp", str(p))
        self.assertIn("compute", p.time)

    def test_fixed_keys_are_kept_and_the_plan_trains(self):
        p = pdist.plan(pdist.load(self.model), gpus=4, strategy={"dp_degree": 2, "mp_degree": 2})
        self.assertEqual((p.strategy.dp_degree, p.strategy.mp_degree, p.strategy.pp_degree), (2, 2, 1))
        losses = pdist.Engine(self.model, strategy=p.strategy, learning_rate=3e-3).fit(DATA, steps=2)
        self.assertEqual(len(losses), 2)

    def test_a_strategy_object_fixes_only_the_keys_set_on_it(self):
        strategy = pdist.Strategy()
        strategy.mp_degree = 2
        strategy.sharding.enable = True
        self.assertEqual(strategy.to_dict(given_only=True), {"mp_degree": 2, "sharding": {"enable": True}})
        # All keys with defaults would have fixed dp and pp to 1 and the micro-batch to 1.
        p = pdist.plan(pdist.load(self.model), gpus=4, strategy=strategy)
        self.assertEqual((p.strategy.dp_degree, p.strategy.mp_degree), (2, 2))
        self.assertTrue(p.strategy.sharding.enable)
        # A whole plan given back fixes everything it says.
        again = pdist.plan(pdist.load(self.model), gpus=4, strategy=p.strategy.to_dict())
        self.assertEqual(again.strategy.to_dict(), p.strategy.to_dict())
        # And a pipelined one, its stage cut included (was refused: "the planner cuts the pipeline itself").
        piped = pdist.plan(pdist.load(self.model), gpus=4, strategy={"pp_degree": 2})
        self.assertEqual(len(piped.strategy.pipeline.split_before), piped.strategy.pipeline.vpp_degree * 2 - 1)
        again = pdist.plan(pdist.load(self.model), gpus=4, strategy=piped.strategy.to_dict())
        self.assertEqual(again.strategy.to_dict(), piped.strategy.to_dict())
        self.assertEqual(again.step_time, piped.step_time)

    def test_engine_cost_prices_its_own_strategy(self):
        engine = pdist.Engine(self.model, strategy={"dp_degree": 2, "pp_degree": 2,
                                                    "pipeline": {"enable": True, "accumulate_steps": 2,
                                                                 "micro_batch_size": 1}})
        cost = engine.cost()
        s = cost.strategy
        self.assertEqual((s.dp_degree, s.mp_degree, s.pp_degree), (2, 1, 2))
        self.assertEqual((s.pipeline.accumulate_steps, s.pipeline.micro_batch_size), (2, 1))
        self.assertGreater(cost.step_time, 0)
        # The engine's own stage cut is priced, not replaced by the planner's (it was dropped).
        cut = pdist.Engine(self.model, strategy={"pp_degree": 2, "pipeline": {
            "enable": True, "accumulate_steps": 2, "micro_batch_size": 2, "split_before": ["gpt.h.1.*"]}})
        self.assertEqual(cut.cost().strategy.pipeline.split_before, ["gpt.h.1.*"])
        one = pdist.Engine(self.model).cost()
        self.assertEqual((one.strategy.dp_degree, one.strategy.pp_degree), (1, 1))
        # Details of a disabled section, which the engine leaves unused, are no reason to refuse.
        dormant = pdist.Engine(self.model, strategy={"dp_degree": 2, "sharding": {"enable": False, "stage": 3},
                                                     "recompute": {"enable": False, "granularity": "selective"}})
        self.assertFalse(dormant.cost().strategy.sharding.enable)

    def test_engine_cost_prices_the_shipped_strategies(self):
        program = pdist.models.gpt(layers=2, hidden=32, heads=2, vocab=256, seq=16, batch=8)

        def engine(name):
            with open(example("strategies", name)) as f:
                return pdist.Engine(program, strategy=f.read())

        # micro_batch_size (parsed, unused: a micro-batch is the batch / (dp × accumulate_steps)) was
        # fixed at its default 1: "micro_batch_size 1 × accumulate_steps 2 is not the batch per replica, 8".
        for name, mode in (("pp2_1f1b.json", "1F1B"), ("pp2_vpp2.json", "VPP"), ("pp2_zbh1.json", "ZBH1")):
            s = engine(name).cost().strategy
            self.assertEqual((s.pp_degree, s.pipeline.schedule_mode, s.pipeline.accumulate_steps,
                              s.pipeline.micro_batch_size), (2, mode, 2, 4), name)
        # Each refusal names what is on (gradient merge was told to export in bf16 instead of amp).
        with self.assertRaisesRegex(pdist.UnimplementedError, "does not price gradient_merge .* accumulate_steps 2") as e:
            engine("gradient_merge2.json").cost()
        self.assertNotIn("amp", str(e.exception))
        with self.assertRaisesRegex(pdist.UnimplementedError, "does not price amp .*bf16") as e:
            pdist.Engine(program, strategy={"amp": {"enable": True, "dtype": "bfloat16"}}).cost()
        self.assertNotIn("gradient_merge", str(e.exception))
        # A cluster file of other than the strategy's ranks: "no dp × mp × pp factorisation of 4 devices".
        pcie4 = example("clusters", "pcie-4gpu.json")
        with self.assertRaisesRegex(pdist.InvalidArgumentError,
                                    r"the strategy has 2 ranks \(dp 2 × mp 1 × pp 1\).*/pcie-4gpu.json has 4 devices"):
            engine("dp2.json").cost(cluster=pcie4)
        s = engine("dp2_mp2.json").cost(cluster=pcie4).strategy
        self.assertEqual((s.dp_degree, s.mp_degree, s.pp_degree), (2, 2, 1))
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "the strategy has 2 ranks .*not gpus=8"):
            engine("dp2.json").cost(gpus=8)

    def test_plan_takes_a_model_file_and_json_text(self):
        # A path was an AttributeError (_handle); JSON text "dictionary update sequence element #0".
        p = pdist.plan(self.model, gpus=4, strategy='{"dp_degree": 2, "mp_degree": 2}')
        self.assertEqual((p.strategy.dp_degree, p.strategy.mp_degree, p.strategy.pp_degree), (2, 2, 1))
        with self.assertRaisesRegex(TypeError, "program must be a pdist.Program or a model file's path, got int"):
            pdist.plan(3, gpus=4)

    def test_bad_plans_raise_naming_the_value(self):
        program = pdist.load(self.model)
        with self.assertRaisesRegex(pdist.NotFoundError, "cluster 'dgx-z9' is neither a file nor a preset"):
            pdist.plan(program, cluster="dgx-z9", gpus=4)
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "dp_degre"):
            pdist.plan(program, gpus=4, strategy={"dp_degre": 2})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "dp_degree 3 does not divide the 4 devices"):
            pdist.plan(program, gpus=4, strategy={"dp_degree": 3})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "devices is needed"):
            pdist.plan(program)


class NumpyBatchTest(unittest.TestCase):
    """Batches from Python: dicts of numpy arrays, fed through pdist_engine_train_step."""

    def setUp(self):
        import numpy as np
        self.np = np
        rng = np.random.default_rng(0)
        # A learnable task: the class is the index of the largest of the first 4 features.
        self.batches = []
        for _ in range(12):
            x = rng.standard_normal((8, 16)).astype(np.float32)
            self.batches.append({"x": x, "labels": x[:, :4].argmax(axis=1).reshape(8, 1).astype(np.int64)})

    def mlp(self):
        return pdist.models.mlp(input=16, layers=2, hidden=32, classes=4, batch=8)

    def test_an_mlp_learns_from_numpy_batches_and_two_ranks_train_as_one(self):
        one = pdist.Engine(self.mlp(), learning_rate=1e-2).fit(self.batches, epochs=3)
        self.assertEqual(len(one), 36)
        self.assertLess(sum(one[-6:]) / 6, 0.8 * sum(one[:6]) / 6)
        two = pdist.Engine(self.mlp(), strategy={"dp_degree": 2}, learning_rate=1e-2).fit(self.batches, steps=10)
        for a, b in zip(two, one[:10]):
            self.assertAlmostEqual(a, b, delta=1e-5 * b)
        engine = pdist.Engine(self.mlp(), learning_rate=1e-2)
        before = engine.evaluate(self.batches)
        self.assertAlmostEqual(before, engine.evaluate(iter(self.batches)), delta=1e-12)  # parameters unchanged
        engine.fit(iter(self.batches), steps=4, callbacks=[lambda step, loss, seconds: step == 2])
        self.assertEqual(engine.step, 2)  # the callback stopped it after the second step

    def test_arguments_are_checked_before_any_step_trains(self):
        # A user probe: each of these trained a step, or ran a different number of steps than
        # asked, before (or instead of) an error.
        np = self.np
        engine = pdist.Engine(self.mlp(), learning_rate=1e-2)
        data = os.environ["PDIST_DATA"]
        cases = [
            (TypeError, "callbacks is a list of functions", lambda: engine.fit(self.batches, callbacks=print)),
            (TypeError, "callbacks must be a list of functions", lambda: engine.fit(self.batches, callbacks=None)),
            (ValueError, "steps 18446744073709551617 must be in", lambda: engine.fit(data, steps=2**64 + 1)),
            (TypeError, "steps must be an int, got 2.7", lambda: engine.fit(self.batches, steps=2.7)),
            (ValueError, "steps -1 must be in", lambda: engine.fit(self.batches, steps=-1)),
            (TypeError, "epochs must be an int, got 2.5", lambda: engine.fit(self.batches, epochs=2.5)),
            (ValueError, "log_freq -1 must be in", lambda: engine.fit(self.batches, log_freq=-1)),
            (TypeError, "train_data is one batch", lambda: engine.fit(self.batches[0])),
            (ValueError, "steps 0 must be in", lambda: engine.evaluate(data, steps=0)),
            (ValueError, "steps 18446744073709551617 must be in", lambda: engine.evaluate(data, steps=2**64 + 1)),
        ]
        for error, message, call in cases:
            with self.assertRaises(error) as raised:
                call()
            self.assertIn(message, str(raised.exception))
        self.assertEqual(engine.step, 0)
        # A callback's answer is True, False or None: "no" stopped training.
        with self.assertRaisesRegex(TypeError, "returned 'no': return True to stop"):
            engine.fit(self.batches, callbacks=[lambda step, loss, seconds: "no"])
        self.assertEqual(engine.step, 1)
        self.assertEqual(len(engine.fit(self.batches, steps=2, callbacks=[lambda *a: np.bool_(False)])), 2)
        # numpy's and torch's bools, 0 and 1 answer as they did.
        self.assertEqual(len(engine.fit(self.batches, steps=3, callbacks=[lambda *a: np.float32(1) > 0])), 1)
        self.assertEqual(len(engine.fit(self.batches, steps=3, callbacks=[lambda *a: 1])), 1)
        # The iterable makes no batch beyond the steps asked for (a generator reading files).
        pulled = []

        def batches():
            for b in self.batches:
                pulled.append(b)
                yield b

        self.assertEqual(len(engine.fit(batches(), steps=2)), 2)
        self.assertEqual(len(pulled), 2)
        pulled.clear()
        self.assertEqual(len(engine.predict(batches(), steps=1)), 1)
        self.assertEqual(len(pulled), 1)
        # Any mapping is a batch (it iterated the keys of one that was not a dict).
        import types
        self.assertEqual(set(engine.predict(types.MappingProxyType(self.batches[0]))), {"logits"})

    def test_big_endian_arrays_are_read_as_the_numbers_they_hold(self):
        # They were read as this machine's bytes: a loss of 1.4e37, and parameters made nan.
        batch = self.batches[0]
        swapped = {"x": batch["x"].astype(">f4"), "labels": batch["labels"].astype(">i8")}
        engine = pdist.Engine(self.mlp(), learning_rate=1e-2)
        self.assertEqual(engine.eval_step(swapped), engine.eval_step(batch))

    def test_numpy_numbers_in_a_strategy_dict_are_numbers(self):
        np = self.np
        engine = pdist.Engine(self.mlp(), strategy={"dp_degree": np.int64(2)})
        self.assertEqual(engine.local_ranks, 2)
        s = pdist.Strategy()
        s.sp = np.bool_(True)
        self.assertIs(s.sp, True)
        with self.assertRaisesRegex(ValueError, "strategy is empty text"):
            pdist.Engine(self.mlp(), strategy="")
        with self.assertRaisesRegex(ValueError, "memory_margin must be a number in"):
            pdist.plan(self.mlp(), gpus=8, memory_margin=float("nan"))
        with self.assertRaisesRegex(TypeError, "gpus must be an int"):
            pdist.plan(self.mlp(), gpus=2.7)

    def test_threads_sharing_an_engine_take_turns(self):
        # Two threads training and one predicting on one engine crashed the process (the library
        # now takes one call at a time; predict's outputs are copied before another can run).
        import threading
        engine = pdist.Engine(self.mlp(), learning_rate=1e-2)
        errors = []

        def run(work):
            try:
                for batch in self.batches:
                    work(batch)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        predicted = []
        threads = [threading.Thread(target=run, args=(engine.train_step,)) for _ in range(2)]
        threads.append(threading.Thread(target=run, args=(lambda b: predicted.append(engine.predict(b)),)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(engine.step, 2 * len(self.batches))
        self.assertEqual(len(predicted), len(self.batches))
        for p in predicted:
            self.assertTrue(self.np.isfinite(p["logits"]).all())

    def test_callbacks_get_the_engines_step_and_the_log_counts_this_fits_steps(self):
        engine = pdist.Engine(self.mlp())
        engine.fit(self.batches, steps=2)
        seen, out = [], io.StringIO()
        with contextlib.redirect_stdout(out):
            engine.fit(self.batches, steps=3, log_freq=1,
                       callbacks=[lambda step, loss, seconds: seen.append((step, engine.step))])
            engine.fit(iter(self.batches[:2]), log_freq=2)  # no count known beforehand
        self.assertEqual(seen, [(3, 3), (4, 4), (5, 5)])  # was the 0-based count of this call, (0, 3)...
        self.assertEqual([line.split()[:2] for line in out.getvalue().splitlines()],
                         [["step", "1/3"], ["step", "2/3"], ["step", "3/3"], ["step", "2"]])

    def test_predict_after_fit_classifies_and_agrees_with_evaluate(self):
        engine = pdist.Engine(self.mlp(), learning_rate=1e-2)
        engine.fit(self.batches, epochs=3)
        outputs = engine.predict(self.batches, steps=4)
        self.assertEqual(len(outputs), 4)
        correct = sum(int((out["logits"].argmax(axis=1) == b["labels"][:, 0]).sum())
                      for out, b in zip(outputs, self.batches))
        self.assertGreater(correct / 32, 0.6)  # 4 classes: chance is 0.25
        # The mean cross entropy of the predicted logits is what evaluate reports.
        logits, labels = outputs[0]["logits"].astype(self.np.float64), self.batches[0]["labels"][:, 0]
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_softmax = shifted - self.np.log(self.np.exp(shifted).sum(axis=1, keepdims=True))
        self.assertAlmostEqual(-log_softmax[self.np.arange(8), labels].mean(), engine.eval_step(self.batches[0]),
                               delta=1e-5)
        # One batch (a dict, without labels): one dict, the same numbers.
        one = engine.predict({"x": self.batches[0]["x"]})
        self.assertTrue(self.np.array_equal(one["logits"], outputs[0]["logits"]))
        with self.assertRaisesRegex(TypeError, "not a token file"):
            engine.predict(DATA)

    def test_a_device_this_build_or_machine_lacks_raises_saying_what_is_missing(self):
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "unknown device 'tpu'"):
            pdist.Engine(self.mlp(), device="tpu")
        # No GPU on the machines the suite runs on: an error naming the device and what is
        # missing, never a crash. A build with CUDA on a GPU machine trains there.
        try:
            on_gpu = pdist.Engine(self.mlp(), device="cuda:0")
        except pdist.PdistError as e:
            self.assertRegex(str(e), r"cuda:0 (asked for|is not available)")
        else:
            self.assertEqual(len(on_gpu.fit(self.batches, steps=1)), 1)
        # A host device keeps the state apart as a GPU does; the numbers are the host's.
        on_host = pdist.Engine(self.mlp(), device="cpu").fit(self.batches, steps=2)
        self.assertEqual(pdist.Engine(self.mlp(), device="cpu:1").fit(self.batches, steps=2), on_host)

    def test_the_gpus_fusions_change_no_number_on_the_cpu(self):
        # Merged updates and bias adds in GEMM epilogues (docs/gpu.md), asked for on the CPU.
        fused = pdist.Engine(self.mlp(), strategy={"dp_degree": 2}, fusions="all").fit(self.batches, steps=3)
        plain = pdist.Engine(self.mlp(), strategy={"dp_degree": 2}, fusions="none").fit(self.batches, steps=3)
        self.assertEqual(fused, plain)
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "fusions: unknown fusion 'flash'"):
            pdist.Engine(self.mlp(), fusions="optimizer,flash")

    def test_a_timeline_is_written_for_each_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace_dir = os.path.join(tmp, "trace")
            engine = pdist.Engine(self.mlp(), strategy={"dp_degree": 2}, timeline=trace_dir)
            self.assertTrue(os.path.isdir(trace_dir))  # made when the engine is, before any step
            engine.fit(self.batches, steps=2)
            for rank in (0, 1):
                with open(os.path.join(trace_dir, f"rank{rank}.trace.json")) as f:
                    events = json.load(f)["traceEvents"]
                jobs = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0 and e.get("cat") != "wait"]
                self.assertEqual(sorted({e["name"] for e in jobs}), ["B", "F", "O"])
                self.assertTrue(all(e["dur"] >= 0 for e in jobs))
            self.assertTrue(os.path.isfile(os.path.join(trace_dir, "pipeline.svg")))
            a_file = os.path.join(tmp, "a_file")
            open(a_file, "w").close()
            with self.assertRaisesRegex(pdist.InvalidArgumentError, "is a file, not a directory"):
                pdist.Engine(self.mlp(), timeline=a_file)

    def test_bad_batches_raise_naming_the_input(self):
        engine = pdist.Engine(self.mlp())
        batch = self.batches[0]
        with self.assertRaisesRegex(pdist.InvalidArgumentError, r"'x'\): f64\[8,16\], but the model's data input is f32\[8,16\]"):
            engine.train_step({"x": batch["x"].astype(self.np.float64), "labels": batch["labels"]})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "'y' is not a data input of the model \\(data inputs: 'x', 'labels'"):
            engine.train_step({"y": batch["x"], "labels": batch["labels"]})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "no feed for data input 'labels'"):
            engine.train_step({"x": batch["x"]})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, r"f32\[4,16\], but the model's data input is f32\[8,16\]"):
            engine.train_step({"x": batch["x"][:4], "labels": batch["labels"]})
        with self.assertRaisesRegex(TypeError, "numpy dtype uint8 has no pdist dtype"):
            engine.train_step({"x": batch["x"].astype(self.np.uint8), "labels": batch["labels"]})
        with self.assertRaisesRegex(TypeError, "a batch is a dict"):
            engine.train_step([batch["x"], batch["labels"]])
        # A key not a str (an int was taken as a char* address: a crash).
        with self.assertRaisesRegex(TypeError, r"batch key 1 \(a data input's name\) must be str, got int"):
            engine.train_step({1: batch["x"], "labels": batch["labels"]})
        with self.assertRaisesRegex(TypeError, "batch key b'x' .* must be str, got bytes"):
            engine.predict_step({b"x": batch["x"]})
        # A 0-d array is named as one (np.ascontiguousarray made it f32[1]).
        with self.assertRaisesRegex(pdist.InvalidArgumentError, r"'x'\): f32\[\], but the model's data input is f32\[8,16\]"):
            engine.train_step({"x": self.np.float32(1), "labels": batch["labels"]})
        with self.assertRaisesRegex(ValueError, "steps is needed with a token file"):
            engine.fit(DATA)
        self.assertEqual(engine.step, 0)
        # A transposed (not contiguous) view is fed by value, as numpy sees it.
        x_t = self.np.asfortranarray(batch["x"])
        self.assertAlmostEqual(engine.eval_step({"x": x_t, "labels": batch["labels"]}),
                               engine.eval_step(batch), delta=1e-12)


class ImportOnnxTest(unittest.TestCase):
    """pdist.import_onnx: a model written with onnx.helper (Debian's python3-onnx), trained from numpy."""

    def setUp(self):
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        self.np = np
        self.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(1)
        self.weights = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32)
                        for name, shape in [("w1", (16, 32)), ("b1", (32,)), ("w2", (32, 4))]}
        inits = [numpy_helper.from_array(value, name) for name, value in self.weights.items()]
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
                 helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
                 helper.make_node("Relu", ["hb"], ["a"], name="relu"),
                 helper.make_node("MatMul", ["a", "w2"], ["logits"], name="fc2")]
        graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])], inits)
        self.model = os.path.join(self.tmp.name, "mlp.onnx")
        with open(self.model, "wb") as f:
            f.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
        self.batches = []
        for _ in range(12):
            x = rng.standard_normal((8, 16)).astype(np.float32)
            self.batches.append({"x": x, "labels": x[:, :4].argmax(axis=1).astype(np.int64)})

    def tearDown(self):
        self.tmp.cleanup()

    def imported(self):
        return pdist.import_onnx(self.model, loss="cross_entropy", input_shapes={"x": (8, 16)})

    def test_an_imported_model_learns_and_two_ranks_train_as_one(self):
        program = self.imported()
        text = str(program)
        self.assertIn('param "w1" : f32[16,32] {init = "stored"}', text)
        self.assertIn('data "labels" : i64[8]', text)
        one = pdist.Engine(program, learning_rate=1e-2).fit(self.batches, epochs=3)
        self.assertLess(sum(one[-6:]) / 6, 0.8 * sum(one[:6]) / 6)
        two = pdist.Engine(self.imported(), strategy={"dp_degree": 2}, learning_rate=1e-2).fit(self.batches, steps=10)
        for a, b in zip(two, one[:10]):
            self.assertAlmostEqual(a, b, delta=1e-5 * b)

    def test_frozen_as_one_name_and_labels_without_a_loss(self):
        # frozen="w1" was taken apart into "w" and "1"; labels without a loss were ignored.
        program = pdist.import_onnx(self.model, loss="cross_entropy", input_shapes={"x": (8, 16)}, frozen="w1")
        self.assertIn('param "w1" : f32[16,32] {init = "stored", trainable = false}', str(program))
        with self.assertRaisesRegex(ValueError, "labels 'y' name what a loss reads, but no loss is appended"):
            pdist.import_onnx(self.model, labels="y", input_shapes={"x": (8, 16)})
        with self.assertRaisesRegex(ValueError, "logits 'logits' name what a loss reads"):
            pdist.import_onnx(self.model, logits="logits", input_shapes={"x": (8, 16)})
        with self.assertRaisesRegex(ValueError, 'loss is ""; give None'):
            pdist.import_onnx(self.model, loss="", input_shapes={"x": (8, 16)})
        with self.assertRaisesRegex(ValueError, "the labels input of the loss needs a name"):
            pdist.import_onnx(self.model, loss="mse", labels="", input_shapes={"x": (8, 16)})
        # Shapes: 8.5 was cut to 8, 2**70 misreported, a str an AttributeError.
        for shape, error in (((8.5, 16), ValueError), ((2**70, 16), ValueError), ("8,16", TypeError)):
            with self.assertRaisesRegex(error, "input_shapes\\['x'\\]"):
                pdist.import_onnx(self.model, loss="cross_entropy", input_shapes={"x": shape})
        # A batch of no samples: its first step's nan loss blamed the initialisers.
        with self.assertRaisesRegex(pdist.PdistError, "data input 'x' is f32\\[0,16\\], a batch of no samples"):
            pdist.Engine(pdist.import_onnx(self.model, loss="cross_entropy", input_shapes={"x": (0, 16)}))
        # Every initializer frozen: the error said "run autodiff first".
        frozen = pdist.import_onnx(self.model, loss="cross_entropy", input_shapes={"x": (8, 16)}, frozen=["*"])
        with self.assertRaisesRegex(pdist.PdistError, "every one of the program's 3 parameters is frozen"):
            pdist.Engine(frozen)

    def test_predict_gives_the_onnx_graphs_outputs_on_one_rank_and_on_two(self):
        w = self.weights
        x = self.batches[0]["x"]
        want = self.np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"]
        for strategy in (None, {"dp_degree": 2}, {"mp_degree": 2}):
            got = pdist.Engine(self.imported(), strategy=strategy).predict({"x": x})  # no labels needed
            self.assertEqual(list(got), ["logits"])
            self.assertEqual(got["logits"].shape, (8, 4))
            self.assertLess(self.np.abs(got["logits"] - want).max(), 1e-5 * self.np.abs(want).max(), strategy)

    def test_models_and_options_it_cannot_take_raise_naming_them(self):
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "graph input 'x' has dimension 0 = 'batch'"):
            pdist.import_onnx(self.model, loss="cross_entropy")
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "unknown loss 'hinge'"):
            pdist.import_onnx(self.model, loss="hinge", input_shapes={"x": (8, 16)})
        with self.assertRaisesRegex(pdist.NotFoundError, "does not exist"):
            pdist.import_onnx(os.path.join(self.tmp.name, "missing.onnx"))
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "not an ONNX model"):
            pdist.import_onnx(DATA)
