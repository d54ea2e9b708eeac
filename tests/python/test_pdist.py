"""The Python package over libpdist.so: programs, placements, the engine, errors.

Run by ctest (python.pdist) with Debian's python3; the environment names the library
(PDIST_LIBRARY), pdist-export (PDIST_EXPORT) and a text file to train on (PDIST_DATA)."""
import json
import os
import subprocess
import tempfile
import unittest

import pdist

DATA = os.environ["PDIST_DATA"]


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

    def test_an_interleaved_pipeline_over_nccls_point_to_point_trains_as_one_rank(self):
        one = pdist.Engine(self.model, learning_rate=3e-3).fit(DATA, steps=3)
        stages = {"pp_degree": 2, "pipeline": {"enable": True, "schedule_mode": "VPP", "vpp_degree": 2,
                                               "accumulate_steps": 2}}
        piped = pdist.Engine(self.model, strategy=stages, learning_rate=3e-3,
                             backend="inproc-rendezvous").fit(DATA, steps=3)
        for a, b in zip(piped, one):
            self.assertAlmostEqual(a, b, delta=1e-5 * b)

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

    def test_callbacks_stop_fit_and_their_errors_propagate(self):
        engine = pdist.Engine(self.model)
        losses = engine.fit(DATA, steps=10, callbacks=[lambda step, loss, seconds: step == 1])
        self.assertEqual(len(losses), 2)

        def broken(step, loss, seconds):
            raise KeyError("from the callback")

        with self.assertRaisesRegex(KeyError, "from the callback"):
            engine.fit(DATA, steps=3, callbacks=[broken])

    def test_bad_input_raises_with_the_librarys_message(self):
        with self.assertRaisesRegex(ValueError, "unknown strategy key 'dp_degre'"):
            pdist.Engine(self.model, strategy={"dp_degre": 2})
        with self.assertRaisesRegex(pdist.InvalidArgumentError, "optimizer"):
            pdist.Engine(self.model, optimizer="lion")
        engine = pdist.Engine(self.model)
        with self.assertRaises(FileNotFoundError):
            engine.fit(os.path.join(self.tmp.name, "absent.txt"), steps=1)
        with self.assertRaisesRegex(TypeError, "a batch is a dict .* or a token file path\\), got list"):
            engine.fit([[1, 2, 3]], steps=1)
        with self.assertRaisesRegex(ValueError, "data_format"):
            engine.fit(DATA, steps=1, data_format="utf8")


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
        engine.fit(iter(self.batches), steps=4, callbacks=[lambda step, loss, seconds: step == 1])
        self.assertEqual(engine.step, 2)  # the callback stopped it after the second step

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
