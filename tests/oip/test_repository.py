"""test_repository.py: a Triton-style model repository under models_dir (config repository),
driven through the Open Inference Protocol with tritonclient: versions chosen by the policy
(several served at once, each with its own weights),
config.json's shapes and batching, the index with every model's state, load and unload, and a
broken model that leaves the others serving. make oip-check runs it in tests/oip/.venv."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import tensord  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from test_tritonclient import ONNX_MODEL, free_port  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402


def make_repository(root: Path) -> None:
    """rmlp (versions 1 and 2: the latest serves), pinned (1 and 2, config.json picks 1), conv
    (an ONNX file as version 3, its batch axis from config.json), broken (a spec that fails)."""
    spec = json.loads((REPO / "examples" / "models" / "mlp.json").read_text())
    spec.pop("name")
    weights = Path(harness.daemon_binary()).parent / "make_weights"
    for model, versions in (("rmlp", (1, 2)), ("pinned", (1, 2))):
        for v in versions:
            d = root / model / str(v)
            d.mkdir(parents=True)
            (d / "model.json").write_text(json.dumps(spec))
            subprocess.run([str(weights), str(d / "mlp.safetensors")], check=True, capture_output=True)
    (root / "pinned" / "config.json").write_text(json.dumps({"version_policy": {"specific": {"versions": [1]}}}))
    (root / "conv" / "3").mkdir(parents=True)
    shutil.copy(ONNX_MODEL, root / "conv" / "3" / "model.onnx")
    (root / "conv" / "config.json").write_text(json.dumps({"shapes": {"0": [-1, 3, 7, 5]},
                                                           "batching": {"max": 8, "buckets": [1, 2, 4, 8]}}))
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.json").write_text(json.dumps({"graph": {"nodes": []}}))
    (root / "notamodel").mkdir()  # no version directory: not listed


class RepositoryAll(unittest.TestCase):
    d: harness.Daemon
    http: httpclient.InferenceServerClient

    @classmethod
    def setUpClass(cls) -> None:
        cls.port = free_port()
        cls.d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{cls.port}", "repository": "all"})
        try:
            make_repository(cls.d.models_dir)
            cls.d.start()
        except Exception:
            cls.d.cleanup()
            raise
        cls.http = httpclient.InferenceServerClient(url=f"127.0.0.1:{cls.port}")
        cls.tsd = tensord.Client(cls.d.url)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.http.close()
        cls.tsd.close()
        cls.d.stop()

    def index(self) -> dict[str, dict]:
        return {e["name"]: e for e in self.http.get_model_repository_index()}

    def test_versions_and_policy(self) -> None:
        idx = self.index()
        self.assertEqual(set(idx), {"rmlp", "pinned", "conv", "broken"})
        self.assertEqual((idx["rmlp"]["state"], idx["rmlp"]["version"]), ("READY", "2"))
        self.assertEqual((idx["pinned"]["state"], idx["pinned"]["version"]), ("READY", "1"))
        self.assertEqual((idx["conv"]["state"], idx["conv"]["version"]), ("READY", "3"))
        self.assertEqual(idx["broken"]["state"], "UNAVAILABLE")
        self.assertEqual(self.http.get_model_metadata("rmlp")["versions"], ["2"])
        x = np.ones((1, 16), np.float32)
        inp = httpclient.InferInput("x", [1, 16], "FP32")
        inp.set_data_from_numpy(x)
        r = self.http.infer("rmlp", [inp], model_version="2")
        np.testing.assert_array_equal(r.as_numpy("y"), self.tsd.infer("rmlp", {"x": x})["y"])
        with self.assertRaises(InferenceServerException):
            self.http.infer("rmlp", [inp], model_version="1")
        self.assertTrue(self.http.is_model_ready("pinned", "1"))
        self.assertFalse(self.http.is_model_ready("pinned", "2"))

    def test_config_from_config_json(self) -> None:
        cfg = self.http.get_model_config("conv")
        self.assertEqual(cfg["max_batch_size"], 8)
        self.assertEqual(cfg["input"][0]["dims"], [3, 7, 5])
        self.assertEqual(cfg["dynamic_batching"]["preferred_batch_size"], [1, 2, 4, 8])
        x = np.random.default_rng(2).standard_normal((5, 3, 7, 5)).astype(np.float32)
        inp = httpclient.InferInput("0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        r = self.http.infer("conv", [inp])
        np.testing.assert_array_equal(r.as_numpy("3"), self.tsd.infer("conv", {"0": x})["3"])

    def test_unload_and_load(self) -> None:
        self.http.unload_model("pinned")
        self.assertFalse(self.http.is_model_ready("pinned"))
        self.assertEqual(self.index()["pinned"]["state"], "UNAVAILABLE")
        self.http.load_model("pinned")
        self.assertTrue(self.http.is_model_ready("pinned", "1"))
        with self.assertRaises(InferenceServerException) as e:
            self.http.load_model("nothere")
        self.assertIn("no model", str(e.exception))
        with self.assertRaises(InferenceServerException) as e:
            self.http.load_model("broken")
        self.assertIn("graph", str(e.exception))
        self.assertTrue(self.http.is_model_ready("rmlp"))


class RepositoryExplicit(unittest.TestCase):
    def test_nothing_until_loaded(self) -> None:
        port = free_port()
        d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{port}", "repository": "explicit"})
        try:
            make_repository(d.models_dir)
            (d.models_dir / "pinned" / "config.json").write_text(
                json.dumps({"version_policy": {"latest": {"num_versions": 2}}}))
            d.start()
            c = httpclient.InferenceServerClient(url=f"127.0.0.1:{port}")
            idx = {e["name"]: e["state"] for e in c.get_model_repository_index()}
            self.assertEqual(idx, {"rmlp": "UNAVAILABLE", "pinned": "UNAVAILABLE", "conv": "UNAVAILABLE",
                                   "broken": "UNAVAILABLE"})
            self.assertFalse(c.is_model_ready("rmlp"))
            c.load_model("rmlp")
            self.assertTrue(c.is_model_ready("rmlp", "2"))
            c.load_model("pinned")  # latest 2: both versions serve
            self.assertTrue(c.is_model_ready("pinned", "1") and c.is_model_ready("pinned", "2"))
            self.assertEqual(sorted(c.get_model_metadata("pinned")["versions"]), ["1", "2"])
            c.close()
            d.stop()
        except Exception:
            d.cleanup()
            raise


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file of float32 tensors (an 8-byte header length, the JSON header, the data)."""
    header, data, at = {}, b"", 0
    for name, t in tensors.items():
        b = np.ascontiguousarray(t, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        data += b
        at += len(b)
    h = json.dumps(header).encode()
    path.write_bytes(len(h).to_bytes(8, "little") + h + data)


class RepositoryVersions(unittest.TestCase):
    """Several versions of one model served at once (Triton's version_policy), each answering with
    its own weights: y = x W, W = V times the identity in version V."""

    def test_policy_serves_several(self) -> None:
        port = free_port()
        d = harness.Daemon({"oip_http_listen": f"http://127.0.0.1:{port}", "repository": "explicit"})
        try:
            spec = {"graph": {"nodes": [{"id": "x", "op": "input", "dtype": "float32", "shape": [-1, 2]},
                                        {"id": "W", "op": "param", "dtype": "float32", "shape": [2, 2]},
                                        {"id": "y", "op": "matmul", "in": ["x", "W"]}], "outputs": ["y"]},
                    "weights": "w.safetensors"}
            for v in (1, 2, 3):
                vd = d.models_dir / "scale" / str(v)
                vd.mkdir(parents=True)
                (vd / "model.json").write_text(json.dumps(spec))
                write_safetensors(vd / "w.safetensors", {"W": np.eye(2, dtype=np.float32) * v})
            conf = d.models_dir / "scale" / "config.json"
            conf.write_text(json.dumps({"version_policy": {"latest": {"num_versions": 2}}}))
            d.start()
            c = httpclient.InferenceServerClient(url=f"127.0.0.1:{port}")
            c.load_model("scale")
            x = np.array([[1.0, -2.0]], np.float32)

            def infer(version: str) -> np.ndarray:
                inp = httpclient.InferInput("x", [1, 2], "FP32")
                inp.set_data_from_numpy(x)
                return c.infer("scale", [inp], model_version=version).as_numpy("y")

            np.testing.assert_array_equal(infer("3"), x * 3)
            np.testing.assert_array_equal(infer("2"), x * 2)
            np.testing.assert_array_equal(infer(""), x * 3)  # no version: the highest
            with self.assertRaises(InferenceServerException) as e:
                infer("1")
            self.assertIn("version 1", str(e.exception))
            self.assertEqual(sorted(c.get_model_metadata("scale")["versions"]), ["2", "3"])
            self.assertEqual(c.get_model_metadata("scale", "2")["versions"], ["2"])
            self.assertEqual(c.get_model_config("scale", "2")["name"], "scale")
            st = c.get_inference_statistics("scale", "2")["model_stats"]
            self.assertEqual([(m["name"], m["version"]) for m in st], [("scale", "2")])
            self.assertEqual(st[0]["inference_count"], 1)
            idx = sorted((e["name"], e.get("version"), e["state"]) for e in c.get_model_repository_index())
            self.assertEqual(idx, [("scale", "2", "READY"), ("scale", "3", "READY")])
            # another policy: version 2 goes, version 1 comes
            conf.write_text(json.dumps({"version_policy": {"specific": {"versions": [1, 3]}}}))
            c.load_model("scale")
            np.testing.assert_array_equal(infer("1"), x * 1)
            self.assertFalse(c.is_model_ready("scale", "2"))
            self.assertTrue(c.is_model_ready("scale", "3"))
            # unload: every version
            c.unload_model("scale")
            self.assertFalse(c.is_model_ready("scale", "1") or c.is_model_ready("scale", "3"))
            c.close()
            d.stop()
        except Exception:
            d.cleanup()
            raise


if __name__ == "__main__":
    unittest.main()
