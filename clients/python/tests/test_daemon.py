"""test_daemon.py: the Python client against a real tensord (harness.py): every verb, numbers
checked against pure-Python references, errors by status name, threads; once with numpy arrays
(when numpy is installed) and once without (Tensor objects, lists, array.array)."""

from __future__ import annotations

import array
import math
import os
import random
import shutil
import signal
import threading
import unittest
from typing import Any

from harness import Daemon

import tensord
from tensord.convert import numpy_available

IN, HID, OUT = 4, 5, 3


def rand_matrix(rng: random.Random, rows: int, cols: int) -> list[list[float]]:
    return [[round(rng.uniform(-1, 1), 3) for _ in range(cols)] for _ in range(rows)]


def linear(x: list[list[float]], w: list[list[float]], b: list[float]) -> list[list[float]]:
    return [[sum(xi * wi for xi, wi in zip(row, wrow)) + bj for wrow, bj in zip(w, b)] for row in x]


def softmax(row: list[float]) -> list[float]:
    m = max(row)
    e = [math.exp(v - m) for v in row]
    return [v / sum(e) for v in e]


def mlp_graph() -> dict[str, Any]:
    g = tensord.Graph()
    x = g.input("x", "f32", [None, IN])
    w1, b1 = g.param("w1", [HID, IN]), g.param("b1", [HID])
    w2, b2 = g.param("w2", [OUT, HID]), g.param("b2", [OUT])
    y = g.linear(g.relu(g.linear(x, w1, b1)), w2, b2, name="y")
    g.output(y, g.softmax(y, -1, name="p"))
    return g.to_dict()


class DaemonCase(unittest.TestCase):
    """One daemon for the class; a client per test."""

    use_numpy = False
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon().start_checked()
        rng = random.Random(7)
        cls.weights = {"w1": rand_matrix(rng, HID, IN), "b1": rand_matrix(rng, 1, HID)[0],
                       "w2": rand_matrix(rng, OUT, HID), "b2": rand_matrix(rng, 1, OUT)[0]}

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop_checked()

    def setUp(self) -> None:
        self.c = tensord.Client(self.daemon.url, 30000, use_numpy=self.use_numpy)
        self.addCleanup(self.c.close)

    # tensors of this class's kind
    def tensor(self, values: Any, dtype: str = "float32") -> Any:
        if self.use_numpy:
            import numpy as np

            return np.array(values, dtype=dtype)
        return tensord.Tensor(values, dtype)

    def assert_kind(self, value: Any) -> None:
        if self.use_numpy:
            import numpy as np

            self.assertIsInstance(value, np.ndarray)
        else:
            self.assertIsInstance(value, tensord.Tensor)

    def assert_close(self, got: list[list[float]], want: list[list[float]], tol: float = 1e-5) -> None:
        self.assertEqual(len(got), len(want))
        for g_row, w_row in zip(got, want):
            self.assertEqual(len(g_row), len(w_row))
            for g, w in zip(g_row, w_row):
                self.assertAlmostEqual(g, w, delta=tol * max(1.0, abs(w)))

    def load_mlp(self, name: str, **kw: Any) -> dict[str, Any]:
        ws = {k: self.tensor(v) for k, v in self.weights.items()}
        return self.c.load(name, mlp_graph(), kw.pop("weights", ws), buckets=[1, 2, 4], batch_max=4,
                           delay_us=100, **kw)

    def reference(self, x: list[list[float]]) -> tuple[list[list[float]], list[list[float]]]:
        w = self.weights
        h = [[max(0.0, v) for v in row] for row in linear(x, w["w1"], w["b1"])]
        y = linear(h, w["w2"], w["b2"])
        return y, [softmax(row) for row in y]

    # ---- the verbs ----
    def test_hello_health_stats(self) -> None:
        hello = self.c.hello()
        self.assertEqual(hello["protocol"], tensord.PROTOCOL_VERSION)
        self.assertIn("CPU", hello["devices"])
        self.assertGreater(hello["limits"]["max_tensors"], 0)
        health = self.c.health()
        self.assertTrue(health["ready"])
        self.assertFalse(health["draining"])
        stats = self.c.stats()
        self.assertGreaterEqual(stats["requests"]["hello"]["ok"], 1)
        self.assertIn("engine", stats)

    def test_load_infer(self) -> None:
        entry = self.load_mlp("mlp")
        self.assertEqual(entry["name"], "mlp")
        self.assertEqual(entry["state"], "ready")
        self.assertTrue(entry["batched"])
        self.assertEqual([i["name"] for i in entry["inputs"]], ["x"])
        self.assertEqual(entry["inputs"][0]["shape"], [-1, IN])
        self.assertIn("mlp", [m["name"] for m in self.c.models()])
        x = rand_matrix(random.Random(3), 3, IN)
        want_y, want_p = self.reference(x)
        out = self.c.infer("mlp", {"x": self.tensor(x)})
        self.assertEqual(sorted(out), ["p", "y"])
        self.assert_kind(out["y"])
        self.assertEqual(tuple(out["y"].shape), (3, OUT))
        self.assert_close(out["y"].tolist(), want_y)
        self.assert_close(out["p"].tolist(), want_p)
        # the request fields, and plain lists as input whatever the mode
        out = self.c.infer("mlp", {"x": x[:1]}, priority="realtime", timeout_ms=10000, latest_only=True)
        self.assert_close(out["p"].tolist(), want_p[:1])
        flat = array.array("f", [v for row in x for v in row])
        out = self.c.infer("mlp", {"x": tensord.Tensor(flat, shape=[3, IN])}, priority="bulk")
        self.assert_close(out["y"].tolist(), want_y)

    def test_weights_file(self) -> None:
        self.daemon.write_safetensors("mlp.safetensors", {
            "w1": ([HID, IN], sum(self.weights["w1"], [])), "b1": ([HID], self.weights["b1"]),
            "w2": ([OUT, HID], sum(self.weights["w2"], [])), "b2": ([OUT], self.weights["b2"])})
        self.load_mlp("from_file", weights="mlp.safetensors")
        x = rand_matrix(random.Random(4), 2, IN)
        self.assert_close(self.c.infer("from_file", {"x": self.tensor(x)})["y"].tolist(), self.reference(x)[0])

    def test_load_spec(self) -> None:
        spec = {"name": "spec_mlp", "graph": mlp_graph(), "outputs": ["p"],
                "batching": {"max": 2, "buckets": [1, 2]}}
        ws = {k: self.tensor(v) for k, v in self.weights.items()}
        entry = self.c.load(spec=spec, weights=ws, delay_us=50)
        self.assertEqual(entry["delay_us"], 50)
        self.assertEqual(entry["buckets"], [1, 2])
        self.assertEqual([o["name"] for o in entry["outputs"]], ["p"])

    def test_realize_builder(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "f32", [2, 3])
        w = g.param("w", [3, 2], value=self.tensor([[1, -1], [0.5, 2], [0, 1]]))
        y = g.tanh(x @ w) * 2.0 - 1.0
        s = g.mean(y, 1, name="s")
        g.output(y, s)
        xs = [[0.1, 0.2, 0.3], [-1.0, 0.0, 2.0]]
        out = self.c.realize(g, {"x": self.tensor(xs)})
        mm = [[sum(a * b for a, b in zip(row, col)) for col in zip(*[[1, -1], [0.5, 2], [0, 1]])] for row in xs]
        want = [[math.tanh(v) * 2 - 1 for v in row] for row in mm]
        self.assert_close(out[y.id].tolist(), want)
        self.assertEqual(len(out["s"].tolist()), 2)
        self.assertAlmostEqual(out["s"].tolist()[1], sum(want[1]) / 2, delta=1e-5)

    def test_dtypes_round_trip(self) -> None:
        values = {"bool": [True, False, True], "uint8": [0, 7, 255], "int32": [-5, 0, 2**31 - 1],
                  "int64": [-(2**40), 1, 2**40], "float16": [0.5, -2.0, 1024.0], "float32": [1.5, -0.25, 3.0]}
        g = tensord.Graph()
        for dt in values:
            g.input(f"in_{dt}", dt, [3])
        g.output(*[f"in_{dt}" for dt in values])
        out = self.c.realize(g, {f"in_{dt}": self.tensor(v, dt) for dt, v in values.items()})
        for dt, v in values.items():
            got = out[f"in_{dt}"]
            self.assert_kind(got)
            self.assertEqual(got.tolist(), v, dt)
            self.assertEqual(str(got.dtype) if self.use_numpy else got.dtype.name, dt)

    def test_unload(self) -> None:
        self.load_mlp("gone")
        self.c.unload("gone")
        self.assertNotIn("gone", [m["name"] for m in self.c.models()])
        with self.assertRaises(tensord.UnknownModel):
            self.c.infer("gone", {"x": self.tensor([[0.0] * IN])})

    def test_errors(self) -> None:
        with self.assertRaises(tensord.UnknownModel) as cm:
            self.c.infer("no_such_model", {"x": [[1.0] * IN]})
        self.assertEqual(cm.exception.status, "unknown_model")
        self.assertIn("no_such_model", cm.exception.message)
        self.assertEqual(cm.exception.reply["status"], "unknown_model")
        with self.assertRaises(tensord.UnknownVerb):
            self.c.call("no.such.verb")
        g = tensord.Graph()
        g.output(g.input("a", "f32", [2, 3]) @ g.input("b", "f32", [4, 5]))
        with self.assertRaises(tensord.TensordError) as cm2:
            self.c.realize(g, {"a": self.tensor([[0.0] * 3] * 2), "b": self.tensor([[0.0] * 5] * 4)})
        self.assertIn(cm2.exception.status, ("shape_mismatch", "bad_request"))
        self.assertIn("matmul", cm2.exception.message)
        self.load_mlp("shapes")
        with self.assertRaises(tensord.TensordError) as cm3:
            self.c.infer("shapes", {"x": self.tensor([[0.0] * (IN + 1)])})
        self.assertIn(cm3.exception.status, ("shape_mismatch", "bad_request"))

    def test_load_onnx(self) -> None:
        path = os.path.join(os.environ.get("ONNX_DATA", "/usr/share/libonnx-testdata/data"),
                            "pytorch-converted", "test_Linear", "model.onnx")
        if not os.path.exists(path):
            self.skipTest(f"{path} absent (Debian's libonnx-testdata)")
        # as the file fixes it: 4 rows of 10; then batched, the file sent as bytes
        fixed = self.c.load_onnx("lin4", path)
        self.assertEqual(fixed["format"], "onnx")
        self.assertFalse(fixed["batched"])
        with open(path, "rb") as f:
            entry = self.c.load_onnx("lin", f.read(), shapes={"0": [-1, 10]}, batch_max=8)
        self.assertTrue(entry["batched"])
        self.assertEqual(entry["inputs"][0]["shape"], [-1, 10])
        self.assertEqual(entry["outputs"][0]["shape"], [-1, 8])
        x = rand_matrix(random.Random(5), 4, 10)
        all4 = self.c.infer("lin4", {"0": self.tensor(x)})["3"].tolist()
        self.assertEqual(len(all4), 4)
        self.assert_close(self.c.infer("lin", {"0": self.tensor(x)})["3"].tolist(), all4)
        self.assert_close(self.c.infer("lin", {"0": self.tensor(x[2:3])})["3"].tolist(), all4[2:3])
        # from models_dir by name
        shutil.copy(path, self.daemon.models_dir / "linear.onnx")
        self.assertTrue(self.c.load_onnx("linf", file="linear.onnx", shapes={"0": [-1, 10]})["batched"])
        self.assert_close(self.c.infer("linf", {"0": self.tensor(x[:2])})["3"].tolist(), all4[:2])
        with self.assertRaises(tensord.BadRequest) as cm:
            self.c.load_onnx("junk", b"\xff" * 64)
        self.assertIn("not a valid ONNX", cm.exception.message)
        with self.assertRaises(ValueError):
            self.c.load_onnx("both", path, file="linear.onnx")

    def test_connect_failure(self) -> None:
        with self.assertRaises(tensord.TensordError) as cm:
            tensord.Client(f"ipc://{self.daemon.dir}/nobody.sock", 1000)
        self.assertIn("nobody.sock", str(cm.exception))

    def test_endpoint_list(self) -> None:
        # replicas as a list (libtensord's failover): one that is not there, one that is
        with tensord.Client(f"ipc://{self.daemon.dir}/nobody.sock,{self.daemon.url}", 5000,
                            use_numpy=self.use_numpy) as c:
            health = c.health()
            self.assertTrue(health["ready"])
            self.assertTrue(health["live"])
        with self.assertRaises(tensord.TensordError) as cm:  # none there: every one named
            tensord.Client(f"ipc://{self.daemon.dir}/a.sock,ipc://{self.daemon.dir}/b.sock", 1000)
        self.assertIn("a.sock", str(cm.exception))
        self.assertIn("b.sock", str(cm.exception))

    def test_train_step(self) -> None:
        g = tensord.Graph()
        x = g.input("x", "f32", [None, 2])
        y = g.linear(x, g.param("w", [1, 2], value=self.tensor([[0.0, 0.0]])),
                     g.param("b", [1], value=self.tensor([0.0])), name="y")
        g.output(y)
        entry = self.c.load("lin", g, loss="mse", lr=0.1, target="t", buckets=[8], batch_max=8)
        self.assertTrue(entry["trainable"])
        rng = random.Random(5)
        xs = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(8)]
        ts = [[2 * a - b + 0.5] for a, b in xs]
        losses = []
        for step in range(1, 41):
            r = self.c.train_step("lin", {"x": self.tensor(xs), "t": self.tensor(ts)})
            self.assertEqual(r["step"], step)
            losses.append(r["loss"])
        self.assertLess(losses[-1], losses[0] / 4, losses)
        r = self.c.train_step("lin", {"x": self.tensor(xs), "t": self.tensor(ts)}, lr=0.05)
        self.assertEqual(r["step"], 41)
        # save: the trained weights come back, and go to a file
        ws = self.c.save("lin")
        self.assertEqual(sorted(ws), ["b", "w"])
        self.assert_kind(ws["w"])
        w = ws["w"].tolist()[0]
        self.assertAlmostEqual(w[0], 2.0, delta=0.6)
        self.assertEqual(self.c.save("lin", "lin.safetensors"), "lin.safetensors")
        self.assertTrue((self.daemon.models_dir / "lin.safetensors").stat().st_size > 0)

    def test_train_classifier(self) -> None:
        train = {"loss": "sparse_cross_entropy", "output": "y", "target": "label",
                 "optimizer": {"kind": "adam", "lr": 0.001}}
        self.load_mlp("cls", train=train, lr=0.05)  # lr overrides the optimizer's, keeps adam
        rng = random.Random(11)
        xs = rand_matrix(rng, 4, IN)
        labels = self.tensor([0, 1, 2, 1], "int32")
        first = self.c.train_step("cls", {"x": self.tensor(xs), "label": labels})["loss"]
        for _ in range(30):
            last = self.c.train_step("cls", {"x": self.tensor(xs), "label": labels})["loss"]
        self.assertLess(last, first / 2)
        p = self.c.infer("cls", {"x": self.tensor(xs)})["p"].tolist()
        self.assertEqual([row.index(max(row)) for row in p], [0, 1, 2, 1])

    def test_threads(self) -> None:
        self.load_mlp("threads")
        x = rand_matrix(random.Random(9), 2, IN)
        want = self.reference(x)[0]
        errors: list[BaseException] = []
        shared = self.c

        def work(own: bool) -> None:
            try:
                c = tensord.Client(self.daemon.url, 30000, use_numpy=self.use_numpy) if own else shared
                for _ in range(10):
                    self.assert_close(c.infer("threads", {"x": self.tensor(x)})["y"].tolist(), want)
                if own:
                    c.close()
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_client_timeout(self) -> None:
        """No reply in time (the daemon stopped): Timeout from the C library, no reply header."""
        c = tensord.Client(self.daemon.url, 300, use_numpy=self.use_numpy)
        self.addCleanup(c.close)
        c.health()
        assert self.daemon.proc is not None
        self.daemon.proc.send_signal(signal.SIGSTOP)
        try:
            with self.assertRaises(tensord.Timeout) as cm:
                c.health()
        finally:
            self.daemon.proc.send_signal(signal.SIGCONT)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(cm.exception.status, "timeout")
        self.assertIsNone(cm.exception.reply)
        self.assertTrue(self.c.health()["ready"])

    def test_closed_client(self) -> None:
        c = tensord.Client(self.daemon.url)
        with c:
            c.health()
        with self.assertRaisesRegex(tensord.TensordError, "closed"):
            c.health()
        c.close()


class PlainTest(DaemonCase):
    """Without numpy: Tensor objects out, lists and Tensor in."""

    use_numpy = False


@unittest.skipUnless(numpy_available(), "numpy is not installed")
class NumpyTest(DaemonCase):
    """With numpy: arrays in and out."""

    use_numpy = True


del DaemonCase  # only its subclasses run

if __name__ == "__main__":
    unittest.main()
