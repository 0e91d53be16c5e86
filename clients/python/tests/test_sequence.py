"""test_sequence.py: sequences with implicit state through the Python client against a real
tensord (harness.py): the integer recurrent cell of tests/test_sequence.c, whose float32
arithmetic is exact, stepped through the daemon and compared bit for bit with the same stream
computed here (numpy when installed, else plain Python); the state read back, string ids, the
named errors, and the client's own checks of the sequence arguments."""

from __future__ import annotations

import random
import time
import unittest
from typing import Any

from harness import Daemon

import tensord
from tensord.convert import numpy_available

# hn = W x + U h (x [-1, 3], h [-1, 4]); y = V hn [-1, 2]; the state pair h <- hn
W = [[1, 0, -1], [2, 1, 0], [0, -2, 1], [1, 1, 1]]
U = [[1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]]
V = [[1, -1, 2, 0], [0, 1, 1, -1]]
H0 = [1, 0, -1, 2]
SEQ = {"state": [{"input": "h", "output": "hn", "init": H0}]}


def rnn_graph() -> tensord.Graph:
    g = tensord.Graph()
    x, h = g.input("x", "f32", [None, 3]), g.input("h", "f32", [None, 4])
    w = g.param("W", [4, 3], value=tensord.Tensor(W, "float32"))
    u = g.param("U", [4, 4], value=tensord.Tensor(U, "float32"))
    v = g.param("V", [2, 4], value=tensord.Tensor(V, "float32"))
    hn = g.add(g.linear(x, w), g.linear(h, u), name="hn")
    g.output(g.linear(hn, v, name="y"), hn)
    return g


class Reference:
    """The same cell stepped here: numpy float32 when installed (the daemon's arithmetic), else
    Python floats (the same numbers: every value is a small integer)."""

    def __init__(self) -> None:
        self.np = None
        if numpy_available():
            import numpy as np

            self.np = np
            self.w, self.u, self.v = (np.array(a, dtype=np.float32) for a in (W, U, V))
        self.h: Any = None
        self.start()

    def start(self) -> None:
        self.h = self.np.array(H0, dtype=self.np.float32) if self.np else [float(v) for v in H0]

    def step(self, x: list[float]) -> tuple[list[float], list[float]]:
        """One step: the new state and y, as lists."""
        if self.np:
            np = self.np
            self.h = self.w @ np.array(x, dtype=np.float32) + self.u @ self.h
            return self.h.tolist(), (self.v @ self.h).tolist()
        self.h = [sum(a * b for a, b in zip(wr, x)) + sum(a * b for a, b in zip(ur, self.h)) for wr, ur in zip(W, U)]
        return list(self.h), [sum(a * b for a, b in zip(vr, self.h)) for vr in V]


def rows(value: Any) -> list[list[float]]:
    return value.tolist()


class SequenceTest(unittest.TestCase):
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon().start_checked()
        try:
            with tensord.Client(cls.daemon.url, 30000) as c:
                entry = c.load("rnn", rnn_graph(), batch_max=8, buckets=[1, 8], delay_us=500, sequence=SEQ)
            assert entry["sequence"]["state"] == [{"input": "h", "output": "hn"}], entry
        except BaseException:
            cls.daemon.cleanup()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop_checked()

    def setUp(self) -> None:
        self.c = tensord.Client(self.daemon.url, 30000)
        self.addCleanup(self.c.close)
        self.rng = random.Random(self._testMethodName)

    def x(self) -> list[list[float]]:
        return [[float(self.rng.randint(-3, 3)) for _ in range(3)]]

    def test_stream_equals_reference(self) -> None:
        ref = Reference()
        for k in range(60):
            x = self.x()
            want_h, want_y = ref.step(x[0])
            out = self.c.infer("rnn", {"x": x}, sequence_id=11, sequence_start=k == 0)
            self.assertEqual(sorted(out), ["y"], "the state stays in the daemon unless asked for")
            self.assertEqual(rows(out["y"]), [want_y], f"step {k}")
        # a restart resets the state to init; sequence_state returns it with the outputs
        ref.start()
        for k in range(5):
            x = self.x()
            want_h, want_y = ref.step(x[0])
            out = self.c.infer("rnn", {"x": x}, sequence_id=11, sequence_start=k == 0, sequence_state=True,
                               sequence_end=k == 4)
            self.assertEqual(sorted(out), ["hn", "y"])
            self.assertEqual(rows(out["y"]), [want_y], f"restarted, step {k}")
            self.assertEqual(rows(out["hn"]), [want_h], f"restarted, step {k}")
        with self.assertRaises(tensord.SequenceEnded) as cm:
            self.c.infer("rnn", {"x": self.x()}, sequence_id=11)
        self.assertEqual(cm.exception.status, "sequence_ended")
        self.assertIn("sequence_end", cm.exception.message)

    def test_interleaved_string_ids(self) -> None:
        """Sequences named by strings, stepped in turn on two connections: each its own state;
        "5" and 5 are two sequences."""
        other = tensord.Client(self.daemon.url, 30000)
        self.addCleanup(other.close)
        names = ["robot-a", "robot-b", "5", "ünïcode"]
        refs = {n: Reference() for n in names}
        for k in range(12):
            for i, n in enumerate(names):
                x = self.x()
                want_y = refs[n].step(x[0])[1]
                c = self.c if (i + k) % 2 else other
                out = c.infer("rnn", {"x": x}, sequence_id=n, sequence_start=k == 0, sequence_end=k == 11)
                self.assertEqual(rows(out["y"]), [want_y], f"{n} step {k}")
        with self.assertRaises(tensord.SequenceEnded):
            self.c.infer("rnn", {"x": self.x()}, sequence_id="robot-a")
        self.c.infer("rnn", {"x": self.x()}, sequence_id=5, sequence_start=True, sequence_end=True)
        with self.assertRaises(tensord.SequenceEnded):
            self.c.infer("rnn", {"x": self.x()}, sequence_id="5")

    def test_step_without_start(self) -> None:
        with self.assertRaises(tensord.SequenceEnded) as cm:
            self.c.infer("rnn", {"x": self.x()}, sequence_id=987654321)
        self.assertIn("not live", cm.exception.message)
        self.assertEqual(cm.exception.reply["status"], "sequence_ended")

    def test_step_carrying_state_refused(self) -> None:
        self.c.infer("rnn", {"x": self.x()}, sequence_id=21, sequence_start=True)
        with self.assertRaises(tensord.BadRequest) as cm:
            self.c.infer("rnn", {"x": self.x(), "h": [[0.0] * 4]}, sequence_id=21)
        self.assertIn("state", cm.exception.message)
        # the refused step changed nothing: the sequence goes on from its first step
        ref = Reference()
        x0 = [[1.0, 2.0, 3.0]]
        ref.step(x0[0])
        self.c.infer("rnn", {"x": x0}, sequence_id=22, sequence_start=True)
        with self.assertRaises(tensord.BadRequest):
            self.c.infer("rnn", {"x": x0, "h": [[9.0] * 4]}, sequence_id=22)
        x1 = self.x()
        out = self.c.infer("rnn", {"x": x1}, sequence_id=22, sequence_end=True, sequence_state=True)
        want_h, want_y = ref.step(x1[0])
        self.assertEqual((rows(out["hn"]), rows(out["y"])), ([want_h], [want_y]))

    def test_plain_request_carries_state(self) -> None:
        """Without sequence_id the state is an input like any other, and hn an output."""
        ref = Reference()
        x = [[2.0, -1.0, 0.0]]
        want_h, want_y = ref.step(x[0])
        out = self.c.infer("rnn", {"x": x, "h": [H0]})
        self.assertEqual((rows(out["hn"]), rows(out["y"])), ([want_h], [want_y]))
        with self.assertRaises(tensord.BadRequest):
            self.c.infer("rnn", {"x": x})  # h is missing

    def test_stats(self) -> None:
        before = self.c.stats()["models"]["rnn"]["sequence"]
        for k in range(3):
            self.c.infer("rnn", {"x": self.x()}, sequence_id=31, sequence_start=k == 0, sequence_end=k == 2)
        # the end is counted on the daemon's loop once the step's batch is back there, which
        # may be just after its reply went out
        deadline = time.monotonic() + 5
        while True:
            after = self.c.stats()["models"]["rnn"]["sequence"]
            if after["ended"] > before["ended"] or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.assertEqual(after["started"] - before["started"], 1)
        self.assertEqual(after["ended"] - before["ended"], 1)
        self.assertEqual(after["max"], 1024)

    def test_client_checks(self) -> None:
        x = self.x()
        for bad in (True, 1.0, b"ab", [1], {"id": 1}):
            with self.assertRaises(TypeError, msg=repr(bad)):
                self.c.infer("rnn", {"x": x}, sequence_id=bad)  # type: ignore[arg-type]
        for bad in (0, -1, 2**53 + 1, "", "x" * 129, "é" * 65):
            with self.assertRaises(ValueError, msg=repr(bad)):
                self.c.infer("rnn", {"x": x}, sequence_id=bad)
        for flag in ("sequence_start", "sequence_end", "sequence_state"):
            with self.assertRaises(TypeError):
                self.c.infer("rnn", {"x": x}, sequence_id=1, **{flag: 1})
            with self.assertRaises(ValueError):
                self.c.infer("rnn", {"x": x}, **{flag: True})
        with self.assertRaises(TypeError):
            self.c.load("bad", rnn_graph(), sequence=[SEQ])  # type: ignore[arg-type]
        # the limits themselves are accepted (the daemon's bounds)
        self.c.infer("rnn", {"x": x}, sequence_id=2**53, sequence_start=True, sequence_end=True)
        self.c.infer("rnn", {"x": x}, sequence_id="y" * 128, sequence_start=True, sequence_end=True)

    def test_model_without_state(self) -> None:
        self.c.load("rnn_plain", rnn_graph(), batch_max=1, buckets=[1])
        with self.assertRaises(tensord.BadRequest):  # h missing (the inputs are checked first)
            self.c.infer("rnn_plain", {"x": self.x()}, sequence_id=1, sequence_start=True)
        with self.assertRaises(tensord.BadRequest) as cm:
            self.c.infer("rnn_plain", {"x": self.x(), "h": [H0]}, sequence_id=1, sequence_start=True)
        self.assertIn("keeps no state", cm.exception.message)
        with self.assertRaises(tensord.BadRequest):  # the daemon checks the object
            self.c.load("rnn_bad", rnn_graph(), batch_max=1, buckets=[1],
                        sequence={"state": [{"input": "x", "output": "hn"}]})


if __name__ == "__main__":
    unittest.main()
