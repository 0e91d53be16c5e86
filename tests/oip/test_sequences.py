"""test_sequences.py: sequences with implicit state through the Open Inference Protocol, driven by
Triton's tritonclient over HTTP and gRPC (sequence_id, sequence_start, sequence_end as Triton's
clients send them). The model is the integer recurrent cell of tests/test_sequence.c (exact in
float32): every step's output must equal a numpy step-by-step reference bit for bit, streams of
both frontends interleave, the model config shows the sequence batcher, and a step of an unknown
sequence is answered 400 / INVALID_ARGUMENT naming it. make oip-check runs it."""

from __future__ import annotations

import socket
import sys
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

import harness  # noqa: E402
import tensord  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

W = np.array([[1, 0, -1], [2, 1, 0], [0, -2, 1], [1, 1, 1]], np.float32)
U = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]], np.float32)
V = np.array([[1, -1, 2, 0], [0, 1, 1, -1]], np.float32)
H0 = [1.0, 0.0, -1.0, 2.0]

SPEC = {
    "name": "rnn",
    "graph": {"nodes": [
        {"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 3]},
        {"id": "h", "op": "input", "dtype": "float32", "shape": [-1, 4]},
        {"id": "W", "op": "param", "dtype": "float32", "shape": [4, 3]},
        {"id": "U", "op": "param", "dtype": "float32", "shape": [4, 4]},
        {"id": "V", "op": "param", "dtype": "float32", "shape": [2, 4]},
        {"id": "a", "op": "linear", "in": ["x", "W"]}, {"id": "b", "op": "linear", "in": ["h", "U"]},
        {"id": "hn", "op": "add", "in": ["a", "b"]}, {"id": "y", "op": "linear", "in": ["hn", "V"]}],
        "outputs": ["y", "hn"]},
    "inputs": ["x", "h"],
    "batching": {"max": 16, "delay_us": 1000},
    "sequence": {"state": [{"input": "h", "output": "hn", "init": H0}], "max_sequence_idle_us": 60000000},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_ref(x: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hn = (W @ x + U @ h).astype(np.float32)
    return (V @ hn).astype(np.float32), hn


class SequenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.hport, cls.gport = free_port(), free_port()
        cls.d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{cls.hport}",
                                "oip_grpc_listen": f"grpc://127.0.0.1:{cls.gport}"})
        try:
            cls.d.start()
            cls.tsd = tensord.Client(cls.d.url)
            cls.tsd.load(spec=SPEC, weights={"W": W, "U": U, "V": V})
        except Exception:
            cls.d.cleanup()
            raise
        cls.http = httpclient.InferenceServerClient(url=f"127.0.0.1:{cls.hport}")
        cls.grpc = grpcclient.InferenceServerClient(url=f"127.0.0.1:{cls.gport}")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.http.close()
        cls.grpc.close()
        cls.tsd.close()
        cls.d.stop()

    def step(self, client, mod, seq, x, start=False, end=False):
        inp = mod.InferInput("x", [1, 3], "FP32")
        inp.set_data_from_numpy(x.reshape(1, 3))
        r = client.infer("rnn", [inp], sequence_id=seq, sequence_start=start, sequence_end=end,
                         outputs=[mod.InferRequestedOutput("y")])
        return r.as_numpy("y").reshape(2)

    def test_streams_over_both_frontends(self):
        rng = np.random.default_rng(5)
        streams = {  # id -> (client, module, state); a number and a string id on each frontend
            101: (self.http, httpclient), "robot-a": (self.http, httpclient),
            202: (self.grpc, grpcclient), "robot-b": (self.grpc, grpcclient),
        }
        state = {k: np.array(H0, np.float32) for k in streams}
        for k in range(25):
            for sid, (client, mod) in streams.items():
                x = rng.integers(-3, 4, 3).astype(np.float32)
                want, state[sid] = step_ref(x, state[sid])
                got = self.step(client, mod, sid, x, start=k == 0, end=k == 24)
                self.assertTrue(np.array_equal(got, want), f"{sid} step {k}: {got} != {want}")
        st = self.tsd.stats()["models"]["rnn"]["sequence"]
        self.assertEqual(st["live"], 0)
        self.assertGreaterEqual(st["ended"], 4)

    def test_unknown_sequence(self):
        x = np.zeros(3, np.float32)
        with self.assertRaises(InferenceServerException) as e:
            self.step(self.http, httpclient, 999, x)
        self.assertIn("400", str(e.exception.status()))
        self.assertIn("sequence 999", e.exception.message())
        with self.assertRaises(InferenceServerException) as e:
            self.step(self.grpc, grpcclient, "nobody", x)
        self.assertIn("INVALID_ARGUMENT", str(e.exception.status()))
        self.assertIn("sequence nobody", e.exception.message())
        # the daemon keeps serving
        self.step(self.http, httpclient, 1000, x, start=True, end=True)

    def test_config_shows_sequence_batching(self):
        cfg = self.http.get_model_config("rnn")
        sb = cfg["sequence_batching"]
        self.assertEqual(sb["max_sequence_idle_microseconds"], 60000000)
        self.assertEqual(sb["state"], [{"input_name": "h", "output_name": "hn"}])


if __name__ == "__main__":
    unittest.main()
